// What a consumer group keeps on disk, as four kinds of rows per group:
//
//   cursor    one row: every matching event with bus_seq ≤ cursor is settled (or a replay row
//             says it is pending again)
//   settled   one row per bus_seq above the cursor that is settled (acked or dead-lettered out
//             of order)
//   attempts  one row per unsettled event (above the cursor, or a replay) that was delivered
//             at least once: its delivery count and last failure
//   replays   one row per event at or below the cursor that an operator put back, with its key
//
// The machine hands out `GroupChanges` (row upserts and deletes) and is rebuilt from a
// `GroupSnapshot` (all rows). Applying every `GroupChanges` in order to an empty store and
// loading that store gives a machine that holds the same unsettled events with the same
// attempt counts and last failures; nothing is in flight after a restart.

/// The delivery count and last failure of one unsettled event: one `attempts` row.
struct GroupAttempts: Hashable, Sendable {
    /// Deliveries made (since the last reopen, for a replay).
    var count: Int
    var lastFailure: GroupFailure?

    init(count: Int, lastFailure: GroupFailure? = nil) {
        self.count = count
        self.lastFailure = lastFailure
    }
}

/// Everything a group had on disk, to rebuild its machine after a restart.
///
/// Rows that contradict the cursor are tolerated and dropped (the next `GroupChanges` deletes
/// the attempts and replay rows among them): settled numbers at or below the cursor, attempts
/// of events neither above the cursor nor replayed, replays above the cursor (those events are
/// read from the journal again like any other).
struct GroupSnapshot: Hashable, Sendable {
    var cursor: Int64
    /// Settled bus_seqs above the cursor.
    var settled: Set<Int64>
    /// Unsettled events delivered before: count and last failure.
    var attempts: [Int64: GroupAttempts]
    /// Events at or below the cursor put back by an operator, with their keys.
    var replays: [GroupCandidate]

    init(cursor: Int64 = 0, settled: Set<Int64> = [], attempts: [Int64: GroupAttempts] = [:], replays: [GroupCandidate] = []) {
        self.cursor = cursor
        self.settled = settled
        self.attempts = attempts
        self.replays = replays
    }
}

/// What must be written durably since the last `takeChanges()`, as idempotent row operations.
/// The broker writes them, with the `dlq.<group>` events of the dead letters it was handed, in
/// one transaction with its next group commit. Apply them in this order:
///
/// 1. `cursor`, if set: write it, then delete every `settled` row ≤ it (and only those: the
///    `attempts` and `replays` rows at or below the cursor are deleted one by one below).
/// 2. Delete the `settled` rows in `settledRemoved`, insert (or ignore) those in `settledAdded`.
/// 3. Delete the `attempts` rows in `attemptsRemoved`, upsert those in `attempts`.
/// 4. Delete the `replays` rows in `replaysRemoved`, insert (or replace) those in `replaysAdded`.
///
/// A bus_seq is in at most one of each added/removed pair. Deletes may name rows that were never
/// written (an event settled and reopened between two calls): deleting nothing is fine.
struct GroupChanges: Hashable, Sendable {
    /// The new cursor, when it moved.
    var cursor: Int64?
    /// Settled numbers above the new cursor, settled since the last call.
    var settledAdded: Set<Int64> = []
    /// Settled numbers above the cursor that a reopen made unsettled again.
    var settledRemoved: Set<Int64> = []
    /// Delivery counts and last failures that changed.
    var attempts: [Int64: GroupAttempts] = [:]
    /// Events whose attempts row must go: settled, reopened from 0, or no longer read.
    var attemptsRemoved: Set<Int64> = []
    /// New replays.
    var replaysAdded: [GroupCandidate] = []
    /// Replays settled (acked or dead-lettered again).
    var replaysRemoved: Set<Int64> = []

    /// Nothing to write.
    var isEmpty: Bool {
        cursor == nil && settledAdded.isEmpty && settledRemoved.isEmpty && attempts.isEmpty && attemptsRemoved.isEmpty
            && replaysAdded.isEmpty && replaysRemoved.isEmpty
    }
}
