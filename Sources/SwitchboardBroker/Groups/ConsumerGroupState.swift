import DequeModule
import HeapModule

// The bookkeeping of one consumer group, as a value type with no I/O: the broker owns one per
// group, feeds it what it read from the journal (`offer`) and what members said (`join`, `ack`,
// `nack`, …), calls `tick` when `nextDeadline` comes, and carries out the `GroupAction`s it gets
// back: deliveries to send, dead letters to journal, members to forget. Durable state leaves
// through `takeChanges()` (written with the broker's next group commit) and comes back through
// `init(name:settings:restoring:)`. Time is always passed in, never read, so tests drive it
// with a manual clock.
//
// The delivery contract is NATS JetStream's explicit-ack pull consumer with Pulsar Key_Shared's
// ordering: at least once, a delivery counts towards `maxDeliver` when it is made, an event
// whose key has an earlier unsettled event waits for it (through its back-offs too), and a dead
// letter releases its key and lets the cursor pass.
//
// Inputs live in `ConsumerGroupState+Inputs.swift`, the dispatch rules, settling and the cursor
// in `ConsumerGroupState+Dispatch.swift`; the stored properties below are internal only so those
// siblings can reach them, and nothing outside them mutates them.

/// The per-group delivery rules of the broker's consumer groups.
///
/// Promises, whatever the sequence of inputs:
/// - Every event offered is eventually acked or dead-lettered exactly once while some member
///   takes deliveries, and an acked event is never delivered again (until an operator reopens it).
/// - Two events with the same non-nil key are never in flight at once, and a key's events are
///   delivered in bus_seq order: only the key's lowest unsettled event is eligible.
/// - A member never holds more deliveries than its credit.
/// - `cursor` never moves back, and `cursor ≤ readThrough`.
/// - A refused input changes nothing but the member's last sign of life.
/// - Dispatch costs O(log n) per delivery (plus O(members)), never a scan of the buffer.
struct ConsumerGroupState: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// One unsettled event: above the cursor (in the buffer) or at or below it (a replay).
    struct Entry: Sendable {
        enum Phase: Equatable, Sendable {
            /// Deliverable once its key allows and a member has credit.
            case ready
            /// Waiting out a NACK's back-off.
            case backingOff(until: Instant)
            case inFlight(Holder)
        }

        /// The member a delivery went to, its number and the instant it is taken back.
        struct Holder: Equatable, Sendable {
            var member: GroupMemberID
            var attempt: Int
            var deadline: Instant
        }

        let busSeq: Int64
        let key: String?
        /// Put back at or below the cursor by an operator: never moves the cursor.
        let isReplay: Bool
        /// Deliveries made; the next delivery's attempt number is this plus one.
        var attempts: Int
        var lastFailure: GroupFailure?
        var phase: Phase = .ready
        /// A copy of `busSeq` sits in `eligible`. Keeps that heap free of duplicates.
        var isQueued = false
        /// Journaled before a broker restart and held back (`backingOff` until `reclaim.until`)
        /// so a member still working on it can claim it when it rejoins.
        var awaitsReclaim = false
        /// Reopened by an operator (a dead letter replayed above the cursor): its count starts
        /// again at 0, but it was delivered before.
        var reopened = false
    }

    /// A member and what it holds.
    struct Member: Sendable {
        let id: GroupMemberID
        var name: String
        var credit: Int
        var inFlight: Set<Int64> = []
        var lastSeen: Instant
        /// False once its connection is found gone (a HEAD could not be routed): it gets nothing
        /// new, and keeps what it holds until it is silent for `liveness`, so that the same
        /// member, connecting again, can claim it back (protocol section 15.3).
        var reachable = true
        /// When it last got a delivery, on the machine's delivery counter (0: never).
        var lastDelivery: UInt64 = 0
        /// Join order, the last tie-break between members.
        let serial: UInt64
    }

    /// The unsettled events of one key, lowest first, and which of them is in flight.
    struct KeyQueue: Sendable {
        var pending: Deque<Int64> = []
        var inFlight: Int64?
    }

    /// An instant at which `tick` has something to do for event `busSeq`'s delivery `attempt`
    /// (its ack deadline, or its back-off end). Stale timers are skipped, never removed early.
    struct Timer: Comparable, Sendable {
        var at: Instant
        var busSeq: Int64
        var attempt: Int

        static func < (lhs: Timer, rhs: Timer) -> Bool {
            (lhs.at, lhs.busSeq, lhs.attempt) < (rhs.at, rhs.busSeq, rhs.attempt)
        }
    }

    /// The group's name, for messages.
    let name: String
    let settings: ConsumerGroupSettings

    /// Every matching event with bus_seq ≤ cursor is settled, replays aside.
    var cursor: Int64
    /// Every matching event with bus_seq ≤ readThrough has been offered.
    var readThrough: Int64

    /// The unsettled events, buffered and replayed.
    var entries: [Int64: Entry] = [:]
    /// How many of `entries` are buffered (not replays): what `bufferLimit` limits.
    var bufferedCount = 0
    /// Every buffered bus_seq and every settled one above the cursor; settled ones are popped
    /// as the cursor passes them, so its minimum gives the cursor.
    var order = Heap<Int64>()
    /// Settled bus_seqs above the cursor.
    var settledAbove: Set<Int64> = []
    /// Attempt counts from the snapshot for events not offered again yet, and their bus_seqs in
    /// ascending order (to drop those the broker reads past without offering).
    var restoredAttempts: [Int64: GroupAttempts] = [:]
    var restoredOrder: Deque<Int64> = []

    var keys: [String: KeyQueue] = [:]
    /// Events that may be eligible, lowest bus_seq first (so replays first). Checked when taken.
    var eligible = Heap<Int64>()
    var ackDeadlines = DeadlineQueue<Timer>()
    var backOffs = Heap<Timer>()

    /// After a restart: until `until`, unsettled events up to `through` (the journal's head at
    /// the restart: any of them may be in a member's hands) wait for such a member to rejoin and
    /// claim them (JOIN `holding`).
    var reclaim: (until: Instant, through: Int64)?
    /// Claims on events not offered again yet (read back from the journal later), by bus_seq.
    var claims: [Int64: (member: GroupMemberID, attempt: Int)] = [:]
    var reclaimed = 0

    /// Events up to here were journaled before this machine was made (the broker's start, the
    /// group's creation or its reset): an earlier broker, or an earlier life of the group, may
    /// have delivered them without a count on disk to show it. Their attempt 1 is not known to
    /// be their first delivery (`isFirstDelivery`).
    let earlierThrough: Int64

    var members: [GroupMemberID: Member] = [:]
    var memberSerial: UInt64 = 0
    var deliveryCounter: UInt64 = 0

    var inFlightCount = 0
    var backingOffCount = 0
    var replayCount = 0
    var redeliveries = 0
    var deadLetters = 0
    /// Candidates dispatch has looked at since the machine was made: a measure of its work
    /// that tests hold against the number of deliveries.
    var dispatchExaminations = 0

    // What `takeChanges()` reports: the cursor last reported, the bus_seqs touched since, and
    // which attempts and replay rows exist on disk (so deletes are only named when needed).
    var persistedCursor: Int64
    var changed: Set<Int64> = []
    var reopenedAbove: Set<Int64> = []
    var attemptRows: Set<Int64> = []
    var replayRows: Set<Int64> = []

    /// A group rebuilt from what it had on disk (an empty snapshot for a new group, which then
    /// starts at bus_seq 1; the broker may start a new group at the journal head instead with
    /// `GroupSnapshot(cursor: head)`).
    ///
    /// Nothing is in flight afterwards: replays are deliverable at once, and so is every
    /// unsettled event above the cursor as soon as the broker offers it again, each keeping its
    /// delivery count and last failure. `readThrough` starts at the cursor.
    ///
    /// With `reclaim` (a broker restarting), every unsettled event up to `reclaim.through` (the
    /// journal's head) is held back until `reclaim.until` instead, so that a member still working
    /// on one can rejoin and claim it (`join(…holding:)`) rather than see it go to another member
    /// at the same time; unclaimed ones are delivered when it passes. The count on disk cannot
    /// tell which were delivered: one made within a commit interval of a crash has none.
    ///
    /// `earlierThrough` is the journal's head when the machine is made; events up to it are never
    /// called a first delivery (default: none is).
    init(
        name: String, settings: ConsumerGroupSettings = ConsumerGroupSettings(), restoring snapshot: GroupSnapshot = GroupSnapshot(),
        reclaim: (until: Instant, through: Int64)? = nil, earlierThrough: Int64 = .max
    ) {
        precondition(settings.maxDeliver >= 1, "maxDeliver must be at least 1")
        precondition(settings.bufferLimit >= 1, "bufferLimit must be at least 1")
        precondition(settings.maxCredit >= 1, "maxCredit must be at least 1")
        precondition(snapshot.cursor >= 0, "a cursor is never negative")
        self.name = name
        self.settings = settings
        cursor = snapshot.cursor
        readThrough = snapshot.cursor
        persistedCursor = snapshot.cursor
        self.reclaim = reclaim
        self.earlierThrough = earlierThrough

        settledAbove = snapshot.settled.filter { $0 > snapshot.cursor }
        order = Heap(settledAbove)

        var replayed: Set<Int64> = []
        for replay in snapshot.replays.sorted(by: { $0.busSeq < $1.busSeq }) {
            replayRows.insert(replay.busSeq)
            guard replay.busSeq >= 1, replay.busSeq <= cursor, replayed.insert(replay.busSeq).inserted else {
                changed.insert(replay.busSeq)
                continue
            }
            let attempts = snapshot.attempts[replay.busSeq]
            entries[replay.busSeq] = Entry(
                busSeq: replay.busSeq, key: replay.key, isReplay: true, attempts: max(0, attempts?.count ?? 0),
                lastFailure: attempts?.lastFailure)
            replayCount += 1
            if let key = replay.key { keys[key, default: KeyQueue()].pending.append(replay.busSeq) }
            if let reclaim { holdForReclaim(replay.busSeq, until: reclaim.until) }
        }
        for (busSeq, attempts) in snapshot.attempts {
            attemptRows.insert(busSeq)
            if busSeq > cursor, !settledAbove.contains(busSeq) {
                restoredAttempts[busSeq] = GroupAttempts(count: max(0, attempts.count), lastFailure: attempts.lastFailure)
            } else if !replayed.contains(busSeq) {
                changed.insert(busSeq)
            }
        }
        restoredOrder = Deque(restoredAttempts.keys.sorted())
        for busSeq in replayed.sorted() { makeEligibleIfAllowed(busSeq) }
    }

    /// The bus_seq from which the broker should read more of the journal (`readThrough + 1`),
    /// or nil while `bufferLimit` unsettled events are held.
    var wantsEvents: Int64? {
        bufferedCount < settings.bufferLimit ? readThrough + 1 : nil
    }

    /// How many more matching events the buffer takes: the most the broker should put in one
    /// `offer`. More are accepted (the limit is soft), but `wantsEvents` stays nil until the
    /// buffer drains below the limit again.
    var room: Int {
        max(0, settings.bufferLimit - bufferedCount)
    }

    /// The earliest instant at which `tick` would do something: an ack deadline, a member's
    /// liveness running out, a back-off ending. Nil when nothing is timed. The broker polls with
    /// a time-out that ends there.
    var nextDeadline: Instant? {
        var earliest: Instant? = nil
        func consider(_ instant: Instant?) {
            guard let instant else { return }
            if let current = earliest, current <= instant { return }
            earliest = instant
        }
        consider(ackDeadlines.min?.at)
        consider(backOffs.min?.at)
        for member in members.values { consider(member.lastSeen + settings.liveness) }
        return earliest
    }

    /// Counts for the status command.
    var status: GroupStatus {
        GroupStatus(
            members: members.values.sorted { $0.serial < $1.serial }.map {
                GroupStatus.Member(id: $0.id, name: $0.name, credit: $0.credit, inFlight: $0.inFlight.count)
            },
            pending: inFlightCount, waiting: backingOffCount, ready: entries.count - inFlightCount - backingOffCount,
            replays: replayCount, cursor: cursor, readThrough: readThrough, redeliveries: redeliveries, deadLetters: deadLetters,
            reclaimed: reclaimed)
    }

    /// Whether delivery `attempt` of `busSeq` is surely the event's first to any member (DELIVER's
    /// `first`, protocol section 15.2): attempt 1, neither replayed nor reopened, and journaled
    /// after this machine was made. Attempt numbers alone cannot say it: a crash can lose a
    /// delivery's count, and a replay, a reset or a group made again counts from 1 anew.
    /// (Mutating only to read the entry in place: see `look`.)
    mutating func isFirstDelivery(_ busSeq: Int64, attempt: Int) -> Bool {
        guard attempt == 1, busSeq > earlierThrough, let index = entries.index(forKey: busSeq) else { return false }
        return Self.isNew(&entries.values[index])
    }

    /// `isFirstDelivery` of each action's delivery, false for any other action: what the broker
    /// asks of each batch of actions it carries out (asked through a closure over the state, it
    /// copied the whole state).
    mutating func firstDeliveries(in actions: [GroupAction]) -> [Bool] {
        var firsts: [Bool] = []
        firsts.reserveCapacity(actions.count)
        for action in actions {
            if case .deliver(_, let busSeq, let attempt, _) = action {
                firsts.append(isFirstDelivery(busSeq, attempt: attempt))
            } else {
                firsts.append(false)
            }
        }
        return firsts
    }

    /// Neither replayed nor reopened, read in place.
    static func isNew(_ entry: inout Entry) -> Bool { !entry.isReplay && !entry.reopened }

    /// The unsettled events, buffered and replayed, lowest first. For status and tests: O(n).
    var unsettled: [Int64] {
        entries.keys.sorted()
    }

    /// Journal events read by the broker, in order: the matching ones in `events` (strictly
    /// increasing, all above `readThrough` and at most `through`), and `through`, the last
    /// bus_seq it read, matching or not. Afterwards `readThrough == through`.
    ///
    /// Events settled before a restart are skipped; events delivered before it keep their
    /// attempt counts. Offering events out of order or beyond `through` is a programming error
    /// in the broker, and traps.
    mutating func offer(_ events: [GroupCandidate], through: Int64, now: Instant) -> [GroupAction] {
        precondition(through >= readThrough, "offer through \(through) is below readThrough \(readThrough)")
        var previous = readThrough
        for event in events {
            precondition(
                event.busSeq > previous && event.busSeq <= through,
                "offered bus_seq \(event.busSeq) is not increasing within \(readThrough + 1)...\(through)")
            previous = event.busSeq
            guard !settledAbove.contains(event.busSeq) else { continue }
            let restored = restoredAttempts.removeValue(forKey: event.busSeq)
            entries[event.busSeq] = Entry(
                busSeq: event.busSeq, key: event.key, isReplay: false, attempts: restored?.count ?? 0,
                lastFailure: restored?.lastFailure)
            bufferedCount += 1
            order.insert(event.busSeq)
            if let key = event.key { keys[key, default: KeyQueue()].pending.append(event.busSeq) }
            if let claim = claims.removeValue(forKey: event.busSeq), members[claim.member] != nil,
                claimable(event.busSeq, attempt: claim.attempt)
            {
                hand(event.busSeq, to: claim.member, attempt: claim.attempt, now: now)
            } else if let reclaim, reclaim.until > now, event.busSeq <= reclaim.through {
                holdForReclaim(event.busSeq, until: reclaim.until)
            } else {
                makeEligibleIfAllowed(event.busSeq)
            }
        }
        // Claims on events read past without being offered: not this group's, or settled.
        if !claims.isEmpty { claims = claims.filter { $0.key > through } }
        readThrough = through
        // Attempts of events the broker read past without offering (they no longer match).
        while let busSeq = restoredOrder.first, busSeq <= through {
            restoredOrder.removeFirst()
            if restoredAttempts.removeValue(forKey: busSeq) != nil { changed.insert(busSeq) }
        }
        advanceCursor()
        return finish(now: now, [])
    }

    /// Whether `takeChanges()` may have something to write (it can still come out empty: an
    /// event delivered and acked since the last call leaves nothing to write).
    var hasChanges: Bool { cursor != persistedCursor || !changed.isEmpty || !reopenedAbove.isEmpty }

    /// What must be written durably since the last call (see `GroupChanges` for how), and
    /// forgets it. Call it for every group commit, after the inputs the commit covers.
    mutating func takeChanges() -> GroupChanges {
        var changes = GroupChanges()
        if cursor != persistedCursor {
            changes.cursor = cursor
            persistedCursor = cursor
        }
        for busSeq in changed {
            if let index = entries.index(forKey: busSeq) {
                let entry = Self.written(&entries.values[index])
                if entry.attempts > 0 || entry.lastFailure != nil {
                    changes.attempts[busSeq] = GroupAttempts(count: entry.attempts, lastFailure: entry.lastFailure)
                    attemptRows.insert(busSeq)
                } else if attemptRows.remove(busSeq) != nil {
                    changes.attemptsRemoved.insert(busSeq)
                }
                if entry.isReplay {
                    if replayRows.insert(busSeq).inserted { changes.replaysAdded.append(GroupCandidate(busSeq: busSeq, key: entry.key)) }
                } else if replayRows.remove(busSeq) != nil {
                    changes.replaysRemoved.insert(busSeq)
                }
            } else {
                if attemptRows.remove(busSeq) != nil { changes.attemptsRemoved.insert(busSeq) }
                if replayRows.remove(busSeq) != nil { changes.replaysRemoved.insert(busSeq) }
                if settledAbove.contains(busSeq) { changes.settledAdded.insert(busSeq) }
            }
        }
        for busSeq in reopenedAbove where busSeq > cursor && !settledAbove.contains(busSeq) {
            changes.settledRemoved.insert(busSeq)
        }
        changes.replaysAdded.sort { $0.busSeq < $1.busSeq }
        changed.removeAll(keepingCapacity: true)
        reopenedAbove.removeAll()
        return changes
    }

    /// What `takeChanges` writes of an entry, read where it lies (see `look`).
    static func written(_ entry: inout Entry) -> (attempts: Int, lastFailure: GroupFailure?, isReplay: Bool, key: String?) {
        (entry.attempts, entry.lastFailure, entry.isReplay, entry.key)
    }
}
