public import Foundation

/// The HEARTBEAT header (section 6): `{}` asks only where the journal stands; a producer that
/// keeps an outbox also reports its health, so the broker can tell operators which kiosk is
/// silent with check-ins waiting. Every field is optional; an empty header stays valid.
public struct HeartbeatHeader: Sendable, Hashable {
    /// The producer whose outbox this is (the name its events carry).
    public var producer: String?
    /// Events in the outbox not yet acknowledged.
    public var outbox: Int64?
    /// When the producer last received an ACK, in milliseconds since the epoch.
    public var lastAckMilliseconds: Int64?
    /// A number the HEAD that answers carries back (`HeadHeader.echo`): proof that the broker
    /// read this HEARTBEAT, which a group member's fence is measured from (section 15.3).
    public var echo: Int64?

    /// The largest `echo` (2^53, so that every JSON reader keeps it exact).
    public static let maximumEcho: Int64 = 1 << 53

    public init(producer: String? = nil, outbox: Int64? = nil, lastAckMilliseconds: Int64? = nil, echo: Int64? = nil) {
        self.producer = producer
        self.outbox = outbox
        self.lastAckMilliseconds = lastAckMilliseconds
        self.echo = echo
    }

    /// Reads and checks the header; errors name the field (`invalid-header`).
    public init(wire fields: [String: JSONValue]) throws(ProtocolError) {
        let object = WireObject(fields: fields, frame: "header", code: .invalidHeader)
        producer = try object.optionalString("producer")
        if let producer, !Producer.isValid(producer) {
            throw object.fail("producer", "must be 1–64 characters of A–Z a–z 0–9 . _ : -")
        }
        outbox = try object.optionalInteger("outbox")
        if let outbox, outbox < 0 { throw object.fail("outbox", "must be at least 0, got \(outbox)") }
        if outbox != nil, producer == nil { throw object.fail("producer", "is required with 'outbox'") }
        if let text = try object.optionalString("last_ack") {
            guard let milliseconds = Timestamp.parse(text) else { throw object.fail("last_ack", "must be an RFC 3339 date-time") }
            guard producer != nil else { throw object.fail("producer", "is required with 'last_ack'") }
            lastAckMilliseconds = milliseconds
        }
        echo = try object.optionalInteger("echo")
        if let echo, !(0...Self.maximumEcho).contains(echo) {
            throw object.fail("echo", "must be 0–2^53, got \(echo)")
        }
    }

    public func wireJSON() -> Data {
        var fields: [String: JSONValue] = [:]
        if let producer { fields["producer"] = .string(producer) }
        if let outbox { fields["outbox"] = .integer(outbox) }
        if let lastAckMilliseconds { fields["last_ack"] = .string(Timestamp.format(milliseconds: lastAckMilliseconds)) }
        if let echo { fields["echo"] = .integer(echo) }
        return JSONValue.object(fields).compactData
    }
}
