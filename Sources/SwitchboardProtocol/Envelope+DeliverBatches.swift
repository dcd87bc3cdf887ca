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
    /// order; any other message as `decode` reads it. Checked in section 2's order: signature,
    /// major and minimum version, the frame count (2 + 4n needs 1.3), the whole message's size,
    /// then each delivery's frames as `decode` checks a message's. The first failure refuses the
    /// whole message. A DELIVER's parent frame (the event's journaled header, `bus_seq` added to
    /// what the producer sent) is held to the whole-message limit only (section 15.2).
    public static func decodeDeliveries(
        _ frames: [Data], minimumVersion: ProtocolVersion = .current, limits: SizeLimits = .groups
    ) throws(ProtocolError) -> [Envelope] {
        guard frames.count >= 2, frames[1] == deliverCommandFrame else {
            return [try decode(frames, minimumVersion: minimumVersion, limits: limits)]
        }
        var deliverLimits = limits
        deliverLimits.parent = limits.message
        guard frames.count >= 10, (frames.count - 2) % 4 == 0 else {
            return [try decode(frames, minimumVersion: minimumVersion, limits: deliverLimits)]
        }
        let version = try checkVersion(frames[0], minimumVersion: minimumVersion)
        guard version >= .deliverBatches else {
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
                    limits: deliverLimits))
            at += 4
        }
        return envelopes
    }

    /// Frame 1 of a DELIVER.
    public static let deliverCommandFrame = Data(Command.deliver.rawValue.utf8)
}
