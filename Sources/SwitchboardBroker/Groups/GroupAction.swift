import Foundation

/// A member of a consumer group: the ZeroMQ routing id of its connection to the broker's group
/// socket. Two connections never share one; a member that reconnects gets a new id unless it
/// sets its own (`ZMQ_ROUTING_ID`), in which case it rejoins as the same member.
struct GroupMemberID: Hashable, Sendable, CustomStringConvertible {
    let rawValue: Data

    init(_ rawValue: Data) {
        self.rawValue = rawValue
    }

    /// Hex, for logs and refusal messages (routing ids are binary).
    var description: String {
        rawValue.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}

/// An event the broker read from the journal that matches the group's topic filter.
struct GroupCandidate: Hashable, Sendable {
    /// The journal's dense sequence number, at least 1.
    var busSeq: Int64
    /// The ordering key (a person, say): events sharing one are delivered one at a time, in
    /// `busSeq` order. `nil`: no ordering constraint.
    var key: String?

    init(busSeq: Int64, key: String? = nil) {
        self.busSeq = busSeq
        self.key = key
    }
}

/// Why a delivery failed: a member's NACK or TERM, or the machine's own `ack-timeout`,
/// `member-lost` or `member-left`. The last one is kept per event and becomes the dead letter's
/// reason.
struct GroupFailure: Hashable, Sendable {
    var code: String
    var message: String

    init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    static let ackTimeoutCode = "ack-timeout"
    static let memberLostCode = "member-lost"
    static let memberLeftCode = "member-left"
    static let nackedCode = "nacked"
    static let terminatedCode = "terminated"
    /// A dead letter whose deliveries left no reason (its count came from before a restart).
    static let maxDeliverCode = "max-deliver"
}

/// An event the machine gave up on. The machine has settled it when it returns this (the
/// cursor moved past it if it could); the broker journals a `dlq.<group>` event for it in the
/// same transaction as the next `GroupChanges`.
struct DeadLetter: Hashable, Sendable {
    var busSeq: Int64
    /// The event's ordering key, for the `dlq.<group>` event and a later `reopen`.
    var key: String?
    /// Deliveries made (since its last reopen, for a replayed event).
    var attempts: Int
    var code: String
    var message: String
}

/// What the broker must do after an input. Actions come in the order they must be carried out.
enum GroupAction: Hashable, Sendable {
    /// Send event `busSeq` to `member` as delivery number `attempt` (1 for the first, counting
    /// from the last reopen for a replay). The member answers ACK, NACK, TERM or IN-PROGRESS
    /// naming `busSeq` and `attempt` before `deadline`, or the event is taken back.
    case deliver(member: GroupMemberID, busSeq: Int64, attempt: Int, deadline: ContinuousClock.Instant)
    /// Journal a `dlq.<group>` event.
    case deadLetter(DeadLetter)
    /// The member was silent for the liveness period and is no longer part of the group; the
    /// broker forgets it (a later message from it must join again).
    case memberExpired(GroupMemberID)
}

/// What the status command shows of one group.
struct GroupStatus: Hashable, Sendable {
    struct Member: Hashable, Sendable {
        var id: GroupMemberID
        var name: String
        var credit: Int
        var inFlight: Int
    }

    /// In the order they joined.
    var members: [Member]
    /// Events in flight to a member.
    var pending: Int
    /// Events waiting out a NACK back-off.
    var waiting: Int
    /// Unsettled events neither in flight nor backing off: eligible now, or queued behind an
    /// earlier event of their key, or waiting for a member's credit.
    var ready: Int
    /// Operator replays among the three counts above.
    var replays: Int
    var cursor: Int64
    var readThrough: Int64
    /// Deliveries with an attempt number above 1, since the machine was created.
    var redeliveries: Int
    /// Dead letters made since the machine was created.
    var deadLetters: Int
    /// Deliveries given back to a rejoining member that still held them (JOIN `holding`).
    var reclaimed: Int = 0
}
