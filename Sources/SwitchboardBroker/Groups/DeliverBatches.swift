import Foundation
import SwitchboardProtocol

/// The deliveries one `perform` owes members that take several per DELIVER (protocol 1.3,
/// section 15.2), gathered per member in the order they were dispatched. A member's DELIVER goes
/// out when it holds `batch` deliveries, or before one more would take the message past `limit`
/// bytes; the rest go out when the caller drains it. A delivery alone always fits: its frames are
/// within section 4's frame limits, far below the whole-message limit.
struct DeliverBatches {
    /// The whole-message limit (section 4): frames 0 and 1 and every delivery's four frames.
    let limit: Int
    private var owed: [GroupMemberID: (frames: [Data], bytes: Int, count: Int)] = [:]
    /// Members in the order they were first owed something, so drains go out in a fixed order.
    private var order: [GroupMemberID] = []
    private var batches: [GroupMemberID: Int] = [:]

    /// Frames 0 and 1 of a DELIVER: the version and the command word.
    static let fixedBytes = 5 + Command.deliver.rawValue.utf8.count

    init(limit: Int) { self.limit = limit }

    /// `member`'s batch, asked of `lookup` once per member.
    mutating func size(of member: GroupMemberID, _ lookup: () -> Int) -> Int {
        if let batch = batches[member] { return batch }
        let batch = lookup()
        batches[member] = batch
        return batch
    }

    /// Adds one delivery's four frames for `member`; returns the deliveries' frames of a DELIVER
    /// that is due now (full, or full to the byte limit before this one), else nil.
    mutating func add(_ member: GroupMemberID, batch: Int, _ frames: [Data]) -> [Data]? {
        let bytes = frames.reduce(0) { $0 + $1.count }
        var due: [Data]?
        if let current = owed[member], Self.fixedBytes + current.bytes + bytes > limit {
            due = current.frames
            owed[member] = nil
        }
        if owed[member] == nil {
            if !order.contains(member) { order.append(member) }
            var fresh: [Data] = []
            fresh.reserveCapacity(4 * batch)
            owed[member] = (fresh, 0, 0)
        }
        owed[member]!.frames.append(contentsOf: frames)
        owed[member]!.bytes += bytes
        owed[member]!.count += 1
        if due == nil, owed[member]!.count >= batch {
            due = owed[member]!.frames
            owed[member] = nil
        }
        return due
    }

    /// What is still owed, member by member (routing id, deliveries' frames); empties the batches.
    mutating func drain() -> [(identity: Data, frames: [Data])] {
        defer {
            owed.removeAll()
            order.removeAll()
        }
        return order.compactMap { member in owed[member].map { (member.rawValue, $0.frames) } }
    }
}
