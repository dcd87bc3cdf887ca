public import Foundation

// Protocol 1.3 (section 15.2): a member may ask in its JOIN for several deliveries per DELIVER
// (`batch`). Such a DELIVER is written as 1.3 and has 2 + 4n frames: frames 0 and 1 as always,
// then four frames per delivery — its DELIVER header, the event's journaled header, metadata and
// content — each group of four exactly frames 2–5 of a DELIVER of that one delivery. It carries
// no signature frame, and the whole message stays within section 4's limit.

extension ProtocolVersion {
    /// The minor that adds a member's `batch` and the DELIVER of several deliveries.
    public static let deliverBatches = ProtocolVersion(major: 1, minor: 3)
}

extension Envelope {
    /// The envelopes of one message from the groups endpoint, as a member reads it: a DELIVER of
    /// several deliveries (1.3, 2 + 4n frames, n ≥ 2) as one DELIVER envelope per delivery, in
    /// order, each checked as `decode` checks a message; any other message as `decode` reads it.
    /// The first failure refuses the whole message, as for any message.
    public static func decodeDeliveries(
        _ frames: [Data], minimumVersion: ProtocolVersion = .current, limits: SizeLimits = .groups
    ) throws(ProtocolError) -> [Envelope] {
        guard frames.count >= 10, (frames.count - 2) % 4 == 0, frames[1] == deliverWord, frames[0].count == 5,
            frames[0].starts(with: signature)
        else { return [try decode(frames, minimumVersion: minimumVersion, limits: limits)] }
        let version = ProtocolVersion(major: frames[0][frames[0].startIndex + 3], minor: frames[0][frames[0].startIndex + 4])
        guard version.major != ProtocolVersion.current.major || version >= .deliverBatches else {
            throw ProtocolError(
                .malformed, "a DELIVER of several deliveries is protocol \(ProtocolVersion.deliverBatches) or later; this one is \(version)"
            )
        }
        var total = 0
        for frame in frames { total += frame.count }
        guard total <= limits.message else { throw ProtocolError(.tooLarge, "message is \(total) bytes; the limit is \(limits.message)") }
        var envelopes: [Envelope] = []
        envelopes.reserveCapacity((frames.count - 2) / 4)
        var at = 2
        while at < frames.count {
            envelopes.append(
                try decode(
                    [frames[0], frames[1], frames[at], frames[at + 1], frames[at + 2], frames[at + 3]], minimumVersion: minimumVersion,
                    limits: limits))
            at += 4
        }
        return envelopes
    }

    static let deliverWord = Data(Command.deliver.rawValue.utf8)
}
