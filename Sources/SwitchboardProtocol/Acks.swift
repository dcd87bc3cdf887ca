public import Foundation

extension ProtocolVersion {
    /// The minor that adds ACKS (section 6): a producer that sends its EVENTs as 1.1 reads one
    /// ACKS per commit instead of an ACK per event.
    public static let batchedAcks = ProtocolVersion(major: 1, minor: 1)
}

/// One event of an ACKS: durable in the journal under `busSeq`.
public struct Acknowledgement: Sendable, Hashable {
    public var producerSeq: Int64
    public var busSeq: Int64
    /// The broker had the event already; `busSeq` is the one it got the first time.
    public var duplicate: Bool

    public init(producerSeq: Int64, busSeq: Int64, duplicate: Bool) {
        self.producerSeq = producerSeq
        self.busSeq = busSeq
        self.duplicate = duplicate
    }
}

/// ACKS (broker → producer, protocol 1.1): the events of one producer, on one connection, that
/// one commit made durable (`schemas/commands.v1.json#/$defs/acks`). The header names the
/// producer; the content lists `[producer_seq, bus_seq]` pairs, newly journaled (`acks`) and
/// journaled before (`duplicates`), each in the order the producer sent them.
public struct Acks: Sendable, Hashable {
    public var producer: String
    public var entries: [Acknowledgement]

    public init(producer: String, entries: [Acknowledgement]) {
        self.producer = producer
        self.entries = entries
    }

    /// Frame 2.
    public func headerJSON() -> Data {
        var writer = JSONWriter(capacity: 96)
        writer.raw("{")
        writer.key("producer")
        writer.string(producer)
        writer.raw("}")
        return writer.data
    }

    /// Frame 5.
    public func contentJSON() -> Data {
        var writer = JSONWriter(capacity: 32 + entries.count * 16)
        writer.raw("{")
        for duplicates in [false, true] {
            writer.raw(duplicates ? ",\"duplicates\":[" : "\"acks\":[")
            var first = true
            for entry in entries where entry.duplicate == duplicates {
                writer.raw(first ? "[" : ",[")
                first = false
                writer.integer(entry.producerSeq)
                writer.raw(",")
                writer.integer(entry.busSeq)
                writer.raw("]")
            }
            writer.raw("]")
        }
        writer.raw("}")
        return writer.data
    }

    /// The frames of the whole message, in `version`.
    public func envelope(version: ProtocolVersion = .batchedAcks) -> Envelope {
        Envelope(command: .acks, header: headerJSON(), content: contentJSON(), version: version)
    }

    /// Reads an ACKS from its parsed envelope (`Envelope.parse`: the JSON frames are parsed
    /// once, there).
    /// - Throws: `invalid-header` for a header without `producer`, `schema-violation` for content
    ///   that is not two arrays of `[producer_seq, bus_seq]` pairs of integers ≥ 1.
    public init(_ parsed: ParsedEnvelope) throws(ProtocolError) {
        let producer = try WireObject(fields: parsed.header, frame: "header", code: .invalidHeader).string("producer")
        guard case .object(let content) = parsed.content else {
            throw ProtocolError(.schemaViolation, "content must be a JSON object")
        }
        var entries: [Acknowledgement] = []
        for (key, duplicate) in [("acks", false), ("duplicates", true)] {
            guard case .array(let pairs)? = content[key] else {
                throw ProtocolError(.schemaViolation, "content: field '\(key)' must be an array of [producer_seq, bus_seq] pairs")
            }
            entries.reserveCapacity(entries.count + pairs.count)
            for (index, pair) in pairs.enumerated() {
                guard case .array(let numbers) = pair, numbers.count == 2, case .integer(let producerSeq) = numbers[0],
                    case .integer(let busSeq) = numbers[1], producerSeq >= 1, busSeq >= 1
                else {
                    throw ProtocolError(
                        .schemaViolation, "content: \(key)[\(index)] must be [producer_seq, bus_seq], two integers of at least 1")
                }
                entries.append(Acknowledgement(producerSeq: producerSeq, busSeq: busSeq, duplicate: duplicate))
            }
        }
        self.init(producer: producer, entries: entries)
    }
}
