public import Foundation

extension ProtocolVersion {
    /// The minor that adds a member's ACKS on the groups endpoint (section 15.2): one message
    /// settles up to `GroupAcks.maximumCount` deliveries, each as its own ACK would.
    public static let memberAcks = ProtocolVersion(major: 1, minor: 2)
}

/// ACKS (member → groups endpoint, protocol 1.2): the deliveries of one group this member
/// finished, each settled as an ACK of it would be (section 15.2). Header
/// (`schemas/commands.v1.json#/$defs/group-acks`): `group`, and `acks`, 1–1000
/// `[bus_seq, attempt]` pairs in the order the member finished them.
public struct GroupAcks: Sendable, Hashable {
    public var group: String
    public var deliveries: [HeldDelivery]

    public init(group: String, deliveries: [HeldDelivery]) {
        self.group = group
        self.deliveries = deliveries
    }

    /// At most this many pairs in one ACKS: a member holds at most its credit, 1–1000.
    public static let maximumCount = JoinHeader.maximumCredit

    /// Reads the header as the broker checks it: `group` (a group name), then `acks` (an array
    /// of 1–1000 items, each `[bus_seq, attempt]`: bus_seq 1–2^53, attempt 1–1 000 000; an
    /// integral float counts as an integer). The first failure is `invalid-header` naming the
    /// field (and, for `acks`, the item).
    public init(wire fields: [String: JSONValue]) throws(ProtocolError) {
        let object = WireObject(fields: fields, frame: "header", code: .invalidHeader)
        group = try object.string("group")
        try GroupName.check(group)
        guard let value = fields["acks"] else { throw object.fail("acks", "is required") }
        guard case .array(let items) = value, (1...Self.maximumCount).contains(items.count) else {
            throw object.fail("acks", "must be an array of 1–\(Self.maximumCount) [bus_seq, attempt] pairs")
        }
        var deliveries: [HeldDelivery] = []
        deliveries.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            guard case .array(let pair) = item, pair.count == 2, let busSeq = Self.integer(pair[0]), let attempt = Self.integer(pair[1]),
                (1...FetchHeader.maximumSequence).contains(busSeq), (1...Int64(SettleHeader.maximumAttempt)).contains(attempt)
            else {
                let got = String(decoding: item.compactData, as: UTF8.self).prefix(60)
                throw object.fail(
                    "acks",
                    "item \(index) must be [bus_seq, attempt]: bus_seq 1 to 2^53, attempt 1 to \(SettleHeader.maximumAttempt); got \(got)")
            }
            deliveries.append(HeldDelivery(busSeq: busSeq, attempt: Int(attempt)))
        }
        self.deliveries = deliveries
    }

    /// An integer, or a float with an integral value in Int64's range (section 2).
    private static func integer(_ value: JSONValue) -> Int64? {
        switch value {
        case .integer(let number): number
        case .double(let number) where number == number.rounded() && number >= -0x1p63 && number < 0x1p63: Int64(number)
        default: nil
        }
    }

    /// The header frame, keys in sorted order.
    public func wireJSON() -> Data {
        var writer = JSONWriter(capacity: 32 + group.utf8.count + deliveries.count * 16)
        writer.raw("{\"acks\":[")
        for (index, delivery) in deliveries.enumerated() {
            writer.raw(index == 0 ? "[" : ",[")
            writer.integer(delivery.busSeq)
            writer.raw(",")
            writer.integer(Int64(delivery.attempt))
            writer.raw("]")
        }
        writer.raw("]")
        writer.key("group")
        writer.string(group)
        writer.raw("}")
        return writer.data
    }

    /// The whole message, as protocol 1.2.
    public func envelope() -> Envelope {
        Envelope(command: .acks, header: wireJSON(), version: .memberAcks)
    }

    /// The ACKS an envelope carries when it is plain: frame 0 at 1.2 or later, the header exactly
    /// `acks` and `group` in either order, written without spaces (pairs of integers of 1–16
    /// digits with no leading zero, a group name of a–z 0–9 _ -), and `{}` for parent, metadata
    /// and content, as our members send it; nil for anything else, which the general parse and
    /// `init(wire:)` read and refuse. What it reads is what `init(wire:)` reads from the same
    /// header (`GroupAcksTests`).
    public static func plain(_ envelope: Envelope) -> GroupAcks? {
        guard envelope.command == .acks, envelope.version >= .memberAcks, envelope.parent == Envelope.emptyObject,
            envelope.metadata == Envelope.emptyObject, envelope.content == Envelope.emptyObject
        else { return nil }
        return envelope.header.withUnsafeBytes { raw -> GroupAcks? in
            var scan = PlainHeaderScan(raw.bindMemory(to: UInt8.self))
            var group: String?
            var deliveries: [HeldDelivery]?
            guard scan.take(UInt8(ascii: "{")) else { return nil }
            for index in 0..<2 {
                if index > 0 { guard scan.take(UInt8(ascii: ",")) else { return nil } }
                guard let key = scan.key() else { return nil }
                if key.spells("group"), group == nil {
                    guard let name = scan.name() else { return nil }
                    group = name
                } else if key.spells("acks"), deliveries == nil {
                    guard let pairs = Self.pairs(&scan) else { return nil }
                    deliveries = pairs
                } else {
                    return nil
                }
            }
            guard scan.take(UInt8(ascii: "}")), scan.atEnd, let group, let deliveries, GroupName.isValid(group) else { return nil }
            return GroupAcks(group: group, deliveries: deliveries)
        }
    }

    /// `[[bus_seq,attempt],…]` with 1–1000 pairs in range, integers of 1–16 digits.
    private static func pairs(_ scan: inout PlainHeaderScan) -> [HeldDelivery]? {
        guard scan.take(UInt8(ascii: "[")) else { return nil }
        var pairs: [HeldDelivery] = []
        repeat {
            guard pairs.count < maximumCount, scan.take(UInt8(ascii: "[")),
                let busSeq = scan.integer(digits: 16, in: 1...FetchHeader.maximumSequence), scan.take(UInt8(ascii: ",")),
                let attempt = scan.integer(digits: 16, in: 1...Int64(SettleHeader.maximumAttempt)), scan.take(UInt8(ascii: "]"))
            else { return nil }
            pairs.append(HeldDelivery(busSeq: busSeq, attempt: Int(attempt)))
        } while scan.take(UInt8(ascii: ","))
        guard scan.take(UInt8(ascii: "]")) else { return nil }
        return pairs
    }
}
