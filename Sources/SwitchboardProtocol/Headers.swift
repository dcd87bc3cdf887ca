public import Foundation

/// The header of an EVENT (`protocol/README.md`, "EVENT").
public struct EventHeader: Codable, Sendable, Hashable {
    /// UUIDv7, chosen by the producer once and kept across every resend.
    public var eventID: String
    /// The event type, which is also its topic (`checkin.recorded`).
    public var type: String
    /// The producer's name (a kiosk id, a worker name).
    public var producer: String
    /// The producer's own sequence number: 1, 2, 3… never reused.
    public var producerSeq: Int64
    /// Set by the broker when the event is journaled; absent from a producer's EVENT.
    public var busSeq: Int64?
    /// When the producer created the event, RFC 3339.
    public var time: String
    /// The JSON Schema the content follows, `type/major` (`checkin.recorded/1`).
    public var schema: String
    /// The producer's run (a UUID per process start), so restarts are visible.
    public var session: String
    /// Optional ordering key (for example a person), for consumers that keep per-key order.
    public var key: String?

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", type, producer, producerSeq = "producer_seq", busSeq = "bus_seq", time, schema,
            session, key
    }

    public init(
        eventID: String = UUIDv7.string(), type: String, producer: String, producerSeq: Int64, busSeq: Int64? = nil,
        time: String = Timestamp.now(), schema: String, session: String, key: String? = nil
    ) {
        self.eventID = eventID
        self.type = type
        self.producer = producer
        self.producerSeq = producerSeq
        self.busSeq = busSeq
        self.time = time
        self.schema = schema
        self.session = session
        self.key = key
    }

    /// Checks every field's format; the error names the field.
    public func validate() throws(ProtocolError) {
        guard UUIDv7.isValid(eventID) else {
            throw ProtocolError(.invalidHeader, "header: field 'event_id' must be a UUIDv7, got '\(eventID.prefix(40))'")
        }
        try Topic.validateEventType(type)
        guard Producer.isValid(producer) else {
            throw ProtocolError(.invalidHeader, "header: field 'producer' must be 1–64 characters of A–Z a–z 0–9 . _ : -")
        }
        guard producerSeq >= 1 else {
            throw ProtocolError(.invalidHeader, "header: field 'producer_seq' must be at least 1, got \(producerSeq)")
        }
        guard Timestamp.parse(time) != nil else {
            throw ProtocolError(.invalidHeader, "header: field 'time' must be an RFC 3339 date-time, got '\(time.prefix(40))'")
        }
        guard Schema.isValidReference(schema) else {
            throw ProtocolError(.invalidHeader, "header: field 'schema' must look like 'type/1', got '\(schema.prefix(80))'")
        }
        guard !session.isEmpty, session.utf8.count <= 64 else {
            throw ProtocolError(.invalidHeader, "header: field 'session' must be 1–64 characters")
        }
        if let key, key.utf8.count > 256 {
            throw ProtocolError(.invalidHeader, "header: field 'key' must be at most 256 bytes")
        }
    }
}

/// Producer names: 1–64 of `A–Z a–z 0–9 . _ : -`.
public enum Producer {
    public static func isValid(_ name: String) -> Bool {
        withUTF8Bytes(name) { bytes in
            guard !bytes.isEmpty, bytes.count <= 64 else { return false }
            return bytes.allSatisfy { c in
                (48...57).contains(c) || (65...90).contains(c) || (97...122).contains(c) || c == 46 || c == 95 || c == 58
                    || c == 45
            }
        }
    }
}

/// The ACK header: the event is durable in the journal.
public struct AckHeader: Codable, Sendable, Hashable {
    public var eventID: String
    public var producer: String
    public var producerSeq: Int64
    public var busSeq: Int64
    /// The broker had this event already; `bus_seq` is the one it got the first time.
    public var duplicate: Bool

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", producer, producerSeq = "producer_seq", busSeq = "bus_seq", duplicate
    }

    public init(eventID: String, producer: String, producerSeq: Int64, busSeq: Int64, duplicate: Bool) {
        self.eventID = eventID
        self.producer = producer
        self.producerSeq = producerSeq
        self.busSeq = busSeq
        self.duplicate = duplicate
    }
}

/// The NACK header: a well-formed event the broker did not accept.
public struct NackHeader: Codable, Sendable, Hashable {
    public var eventID: String
    public var producer: String
    public var producerSeq: Int64
    public var code: ProtocolError.Code
    public var reason: String
    /// Whether sending the same event again later may succeed.
    public var retryable: Bool
    /// With `conflict`: the highest `producer_seq` the journal holds for this producer, so a
    /// producer whose numbering went back (an outbox restored from a backup) can number the
    /// event again above it (protocol section 7). Absent from other NACKs and from older brokers.
    public var producerHead: Int64?

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", producer, producerSeq = "producer_seq", code, reason, retryable
        case producerHead = "producer_head"
    }

    public init(
        eventID: String, producer: String, producerSeq: Int64, code: ProtocolError.Code, reason: String, retryable: Bool,
        producerHead: Int64? = nil
    ) {
        self.eventID = eventID
        self.producer = producer
        self.producerSeq = producerSeq
        self.code = code
        self.reason = reason
        self.retryable = retryable
        self.producerHead = producerHead
    }
}

/// The ERROR header: the message itself was wrong.
public struct ErrorHeader: Codable, Sendable, Hashable {
    public var code: ProtocolError.Code
    public var message: String
    /// The command word of the refused message, if it could be read.
    public var command: String?
    /// The refused message's `event_id` or `request_id`, if it could be read.
    public var ref: String?

    public init(code: ProtocolError.Code, message: String, command: String? = nil, ref: String? = nil) {
        self.code = code
        self.message = message
        self.command = command
        self.ref = ref
    }

    public init(_ error: ProtocolError, command: String? = nil, ref: String? = nil) {
        self.init(code: error.code, message: error.message, command: command, ref: ref)
    }
}

/// The HEAD header (fan-out topic `$sys.head`) and the reply to HEARTBEAT on ingest.
public struct HeadHeader: Codable, Sendable, Hashable {
    /// The highest `bus_seq` in the journal (0 when empty).
    public var head: Int64
    /// The lowest `bus_seq` still in the journal (head + 1 when empty).
    public var first: Int64
    public var time: String
    /// The broker's instance id (a UUID per journal), so a subscriber notices a new journal.
    public var broker: String
    /// The `echo` of the HEARTBEAT this HEAD answers; absent in a HEAD sent on the broker's own
    /// schedule.
    public var echo: Int64?

    public init(head: Int64, first: Int64, time: String = Timestamp.now(), broker: String, echo: Int64? = nil) {
        self.head = head
        self.first = first
        self.time = time
        self.broker = broker
        self.echo = echo
    }
}

/// The FETCH header: ask the replay endpoint for journaled events.
public struct FetchHeader: Codable, Sendable, Hashable {
    public var requestID: String
    /// The first `bus_seq` wanted (at least 1).
    public var from: Int64
    /// The last `bus_seq` wanted (inclusive); absent means up to the head.
    public var to: Int64?
    /// Topic prefixes; empty means every event type.
    public var topics: [String]
    /// The most events to return in this batch (1–1000).
    public var limit: Int

    enum CodingKeys: String, CodingKey {
        case requestID = "request_id", from, to, topics, limit
    }

    public init(requestID: String = UUIDv7.string(), from: Int64, to: Int64? = nil, topics: [String] = [], limit: Int = 500) {
        self.requestID = requestID
        self.from = from
        self.to = to
        self.topics = topics
        self.limit = limit
    }

    public static let maximumLimit = 1000
    /// Sequence numbers are below 2^53, so they are exact in every JSON implementation.
    public static let maximumSequence: Int64 = 1 << 53

    public func validate() throws(ProtocolError) {
        guard !requestID.isEmpty, requestID.utf8.count <= 64 else {
            throw ProtocolError(.invalidHeader, "header: field 'request_id' must be 1–64 characters")
        }
        guard from >= 1 else { throw ProtocolError(.invalidHeader, "header: field 'from' must be at least 1, got \(from)") }
        guard from <= FetchHeader.maximumSequence, (to ?? 1) <= FetchHeader.maximumSequence else {
            throw ProtocolError(.invalidHeader, "header: fields 'from' and 'to' must be at most \(FetchHeader.maximumSequence)")
        }
        if let to, to < from {
            throw ProtocolError(.invalidHeader, "header: field 'to' (\(to)) must not be below 'from' (\(from))")
        }
        guard (1...FetchHeader.maximumLimit).contains(limit) else {
            throw ProtocolError(.invalidHeader, "header: field 'limit' must be 1–\(FetchHeader.maximumLimit), got \(limit)")
        }
        guard topics.count <= 32, topics.allSatisfy({ $0.utf8.count <= Topic.maximumLength }) else {
            throw ProtocolError(.invalidHeader, "header: field 'topics' takes at most 32 prefixes of at most \(Topic.maximumLength) bytes")
        }
    }
}

/// The END header: closes the answer to one FETCH.
public struct EndHeader: Codable, Sendable, Hashable {
    public var requestID: String
    public var from: Int64
    /// Every matching event with `from <= bus_seq <= through` has been sent in this batch.
    public var through: Int64
    /// Events sent in this batch.
    public var count: Int
    public var head: Int64
    /// The lowest `bus_seq` still journaled; events below it were removed by retention.
    public var first: Int64
    /// More events may match beyond `through` (up to `to` or the head): send another FETCH.
    public var more: Bool

    enum CodingKeys: String, CodingKey {
        case requestID = "request_id", from, through, count, head, first, more
    }

    public init(requestID: String, from: Int64, through: Int64, count: Int, head: Int64, first: Int64, more: Bool) {
        self.requestID = requestID
        self.from = from
        self.through = through
        self.count = count
        self.head = head
        self.first = first
        self.more = more
    }
}

/// The fan-out welcome, sent by the XPUB to every new subscriber as one frame:
/// `$sys.welcome ` followed by this object as JSON.
public struct Welcome: Codable, Sendable, Hashable {
    public var broker: String
    public var version: String
    public var head: Int64
    public var first: Int64
    /// How often HEAD is published, in milliseconds.
    public var heartbeatMilliseconds: Int

    enum CodingKeys: String, CodingKey {
        case broker, version, head, first, heartbeatMilliseconds = "heartbeat_ms"
    }

    public init(
        broker: String, version: String = ProtocolVersion.current.description, head: Int64, first: Int64, heartbeatMilliseconds: Int
    ) {
        self.broker = broker
        self.version = version
        self.head = head
        self.first = first
        self.heartbeatMilliseconds = heartbeatMilliseconds
    }

    public static let prefix = "$sys.welcome "

    public func frame() throws -> Data {
        Data(Welcome.prefix.utf8) + (try WireJSON.encode(self))
    }

    public static func parse(_ frame: Data) throws(ProtocolError) -> Welcome {
        let prefix = Data(Welcome.prefix.utf8)
        guard frame.starts(with: prefix) else { throw ProtocolError(.malformed, "welcome frame must start with '\(Welcome.prefix)'") }
        return try WireJSON.decode(Welcome.self, from: frame.dropFirst(prefix.count), frame: "welcome", code: .invalidHeader)
    }
}
