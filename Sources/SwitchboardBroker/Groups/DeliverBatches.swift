import Foundation
import SwitchboardProtocol

/// The deliveries one `perform` owes members that take several per DELIVER (protocol 1.3,
/// section 15.2), gathered per member in the order they were dispatched. A member's DELIVER goes
/// out when it holds `batch` deliveries, or before one more would take the message past `limit`
/// bytes; the rest go out when the caller drains it. A delivery alone always fits: its frames are
/// within section 4's frame limits, far below the whole-message limit.
///
/// Kept in an array searched from the front while a dispatch has served few members (hashing a
/// routing id for each delivery cost more than comparing a handful), and through a dictionary
/// of places once it has served more.
struct DeliverBatches {
    struct Owed {
        let member: GroupMemberID
        let batch: Int
        var frames: [Data] = []
        var bytes = 0
        var count = 0
    }

    /// The whole-message limit (section 4): frames 0 and 1 and every delivery's four frames.
    let limit: Int
    /// One per member, in the order each was first dispatched to.
    private var owed: [Owed] = []
    /// Places in `owed`, once it holds `indexedFrom` members or more.
    private var places: [GroupMemberID: Int] = [:]
    static let indexedFrom = 8

    /// Frames 0 and 1 of a DELIVER: the version and the command word.
    static let fixedBytes = 5 + Command.deliver.rawValue.utf8.count

    init(limit: Int) { self.limit = limit }

    /// `member`'s place, its batch asked of `lookup` the first time.
    mutating func slot(of member: GroupMemberID, _ lookup: () -> Int) -> Int {
        if owed.count < Self.indexedFrom {
            if let index = owed.firstIndex(where: { $0.member == member }) { return index }
        } else if let index = places[member] {
            return index
        }
        owed.append(Owed(member: member, batch: lookup()))
        if owed.count == Self.indexedFrom {
            for (index, entry) in owed.enumerated() { places[entry.member] = index }
        } else if owed.count > Self.indexedFrom {
            places[member] = owed.count - 1
        }
        return owed.count - 1
    }

    /// The batch of the member at `slot`.
    func batch(at slot: Int) -> Int { owed[slot].batch }

    /// Adds one delivery's four frames for the member at `slot`; returns a DELIVER that is due now
    /// (full, or full to the byte limit before this one), routing frame first, else nil.
    mutating func add(at slot: Int, _ frames: [Data]) -> [Data]? {
        let bytes = frames.reduce(0) { $0 + $1.count }
        var due: [Data]?
        if owed[slot].count > 0, Self.fixedBytes + owed[slot].bytes + bytes > limit {
            due = take(slot)
        }
        if owed[slot].frames.isEmpty {
            owed[slot].frames.reserveCapacity(3 + 4 * min(owed[slot].batch, 64))
            owed[slot].frames.append(contentsOf: [owed[slot].member.rawValue, Self.versionFrame, Self.commandFrame])
        }
        owed[slot].frames.append(contentsOf: frames)
        owed[slot].bytes += bytes
        owed[slot].count += 1
        if due == nil, owed[slot].count >= owed[slot].batch { due = take(slot) }
        return due
    }

    private mutating func take(_ slot: Int) -> [Data] {
        defer {
            owed[slot].frames = []
            owed[slot].bytes = 0
            owed[slot].count = 0
        }
        return owed[slot].frames
    }

    /// What is still owed, a DELIVER per member (routing frame first); empties the batches.
    mutating func drain() -> [[Data]] {
        defer {
            owed.removeAll()
            places.removeAll()
        }
        return owed.compactMap { $0.count > 0 ? $0.frames : nil }
    }

    /// Frame 0 of a DELIVER of several deliveries (it is 1.3), and frame 1.
    static let versionFrame = Envelope.versionFrame(.deliverBatches)
    static let commandFrame = Envelope.deliverCommandFrame
}
