import DequeModule
import HeapModule

// Dispatch, settling and the cursor. The eligible set is a min-heap of bus_seqs, checked when
// taken rather than kept exact: an event goes in when it becomes ready and its key allows it
// (`makeEligibleIfAllowed`, called on every transition that can make one eligible), and a
// taken one that is no longer eligible is dropped. So a delivery costs O(log n) however many
// events wait behind a few keys, and a key's waiting events cost nothing until their turn.

extension ConsumerGroupState {
    /// The tail of every input: deliver what can go, then drop stale timers from the tops of
    /// their heaps so `nextDeadline` is exact.
    mutating func finish(now: Instant, _ actions: [GroupAction]) -> [GroupAction] {
        var actions = actions
        dispatch(now: now, into: &actions)
        pruneTimers()
        return actions
    }

    /// Whether event `busSeq` of `key` may go out now (rule 1): no key, or none of the key's
    /// events is in flight and this is the key's lowest unsettled event.
    func keyAllows(key: String?, busSeq: Int64) -> Bool {
        guard let key else { return true }
        guard let queue = keys[key] else { return false }
        return queue.inFlight == nil && queue.pending.first == busSeq
    }

    /// What the dispatch rules read of an entry.
    struct Look {
        var ready: Bool
        var queued: Bool
        var key: String?
        var attempts: Int
    }

    /// Reads `entry` where it lies, through `entries.values[index]`'s modify accessor: its getter
    /// copies the whole entry to read one field (each reference in it retained, then released),
    /// a few percent of the broker thread while a group consumed.
    static func look(_ entry: inout Entry) -> Look {
        let ready = if case .ready = entry.phase { true } else { false }
        return Look(ready: ready, queued: entry.isQueued, key: entry.key, attempts: entry.attempts)
    }

    /// Puts `busSeq` among the eligible if it is ready, its key allows it and it is not there.
    /// (Entries are found once by their index here and on the other paths every event takes,
    /// read once in place (`look`), and changed in place through the index.)
    mutating func makeEligibleIfAllowed(_ busSeq: Int64) {
        guard let index = entries.index(forKey: busSeq) else { return }
        let entry = Self.look(&entries.values[index])
        guard entry.ready, !entry.queued, keyAllows(key: entry.key, busSeq: busSeq) else { return }
        entries.values[index].isQueued = true
        eligible.insert(busSeq)
    }

    /// After an event of `key` came back, settled or arrived: the key's lowest event may go now
    /// (for no key, the event itself).
    mutating func reconsider(key: String?, busSeq: Int64) {
        if let key {
            if let head = keys[key]?.pending.first { makeEligibleIfAllowed(head) }
        } else {
            makeEligibleIfAllowed(busSeq)
        }
    }

    /// Rules 2 and 3: eligible events in bus_seq order (replays, all at or below the cursor,
    /// first), each to the member with free credit and the fewest in flight; an event that had
    /// its last delivery becomes a dead letter instead. Stops when no member has credit, before
    /// looking at a candidate, so an input that frees no credit costs no heap work. (Events
    /// taken back after their last delivery are dead-lettered at once by `takeBack`; only counts
    /// restored from a snapshot wait here for a member with credit.)
    mutating func dispatch(now: Instant, into actions: inout [GroupAction]) {
        while let busSeq = eligible.min, let member = memberForNextDelivery() {
            dispatchExaminations += 1
            guard let index = entries.index(forKey: busSeq) else {
                // A copy left from an earlier life of this bus_seq (settled, then reopened).
                eligible.removeMin()
                continue
            }
            let entry = Self.look(&entries.values[index])
            guard entry.queued else {
                eligible.removeMin()
                continue
            }
            guard entry.ready, keyAllows(key: entry.key, busSeq: busSeq) else {
                eligible.removeMin()
                entries.values[index].isQueued = false
                continue
            }
            if entry.attempts >= settings.maxDeliver {
                eligible.removeMin()
                entries.values[index].isQueued = false
                let failure =
                    entries.values[index].lastFailure
                    ?? GroupFailure(
                        code: GroupFailure.maxDeliverCode,
                        message: "bus_seq \(busSeq) was delivered \(entry.attempts) times (maxDeliver \(settings.maxDeliver))")
                settle(busSeq, deadLetter: failure, into: &actions)
                continue
            }
            eligible.removeMin()
            deliver(busSeq, at: index, key: entry.key, to: member, now: now, into: &actions)
        }
    }

    /// The member with free credit and the fewest events in flight; ties go to the one that
    /// least recently got a delivery, then to the one that joined first. O(members): a group
    /// has a handful.
    /// Returns the member's index in `members` (valid until `members` changes), so the delivery
    /// changes it without looking it up again. Members are read in place (`rank`).
    mutating func memberForNextDelivery() -> Dictionary<GroupMemberID, Member>.Index? {
        var best: Dictionary<GroupMemberID, Member>.Index?
        var bestRank: (Int, UInt64, UInt64) = (0, 0, 0)
        var index = members.startIndex
        while index != members.endIndex {
            defer { index = members.index(after: index) }
            guard let rank = Self.rank(&members.values[index]) else { continue }
            if best != nil, bestRank <= rank { continue }
            best = index
            bestRank = rank
        }
        return best
    }

    /// A member's place in the order above (fewest in flight, least recently served, first
    /// joined), nil if it takes nothing now; read where it lies, as `look` reads an entry.
    static func rank(_ member: inout Member) -> (Int, UInt64, UInt64)? {
        guard member.reachable, member.inFlight.count < member.credit else { return nil }
        return (member.inFlight.count, member.lastDelivery, member.serial)
    }

    /// Delivers the entry at `index` (bus_seq `busSeq`, ordering key `key`) to the member at
    /// `memberIndex`.
    mutating func deliver(
        _ busSeq: Int64, at index: Dictionary<Int64, Entry>.Index, key: String?, to memberIndex: Dictionary<GroupMemberID, Member>.Index,
        now: Instant, into actions: inout [GroupAction]
    ) {
        let member = members.keys[memberIndex]
        let deadline = now + settings.ackWait
        let attempt = Self.markDelivered(&entries.values[index], to: member, deadline: deadline)
        if let key { keys[key]!.inFlight = busSeq }
        deliveryCounter += 1
        members.values[memberIndex].inFlight.insert(busSeq)
        members.values[memberIndex].lastDelivery = deliveryCounter
        inFlightCount += 1
        if attempt > 1 { redeliveries += 1 }
        ackDeadlines.insert(Timer(at: deadline, busSeq: busSeq, attempt: attempt))
        changed.insert(busSeq)
        actions.append(.deliver(member: member, busSeq: busSeq, attempt: attempt, deadline: deadline))
    }

    /// One access to the entry for the whole change: returns the delivery's attempt number.
    static func markDelivered(_ entry: inout Entry, to member: GroupMemberID, deadline: Instant) -> Int {
        entry.isQueued = false
        entry.attempts += 1
        entry.phase = .inFlight(Entry.Holder(member: member, attempt: entry.attempts, deadline: deadline))
        return entry.attempts
    }

    /// Takes an event's flight off its member's and key's books; the caller sets its phase.
    mutating func endFlight(of busSeq: Int64, key: String?, holder: Entry.Holder) {
        if let index = members.index(forKey: holder.member) { members.values[index].inFlight.remove(busSeq) }
        if let key, keys[key]?.inFlight == busSeq { keys[key]!.inFlight = nil }
        inFlightCount -= 1
    }

    /// A delivery taken back without an answer (ack time-out, lost or departed member): the
    /// event is ready again at once with `failure` as its last error, or, if that was its last
    /// delivery (rule 3), a dead letter now rather than at its next turn.
    mutating func takeBack(_ busSeq: Int64, failure: GroupFailure, into actions: inout [GroupAction]) {
        guard var entry = entries[busSeq], case .inFlight(let holder) = entry.phase else { return }
        endFlight(of: busSeq, key: entry.key, holder: holder)
        entry.phase = .ready
        entry.lastFailure = failure
        entries[busSeq] = entry
        changed.insert(busSeq)
        if entry.attempts >= settings.maxDeliver {
            settle(busSeq, deadLetter: failure, into: &actions)
        } else {
            reconsider(key: entry.key, busSeq: busSeq)
        }
    }

    /// Acked (`failure` nil) or dead-lettered: the event leaves the machine, its key's next
    /// event may go, and the cursor moves past it if it can (rule 4). A replay leaves the
    /// cursor alone.
    mutating func settle(_ busSeq: Int64, deadLetter failure: GroupFailure?, into actions: inout [GroupAction]) {
        guard let entry = entries.removeValue(forKey: busSeq) else { return }
        switch entry.phase {
        case .inFlight(let holder): endFlight(of: busSeq, key: entry.key, holder: holder)
        case .backingOff: backingOffCount -= 1
        case .ready: break
        }
        // Taken out of the dictionary while changed, so the deque is not copied.
        if let key = entry.key, var queue = keys.removeValue(forKey: key) {
            if queue.pending.first == busSeq {
                queue.pending.removeFirst()
            } else if let index = queue.pending.firstIndex(of: busSeq) {
                queue.pending.remove(at: index)
            }
            if !queue.pending.isEmpty || queue.inFlight != nil {
                keys[key] = queue
                if let head = queue.pending.first { makeEligibleIfAllowed(head) }
            }
        }
        changed.insert(busSeq)
        if let failure {
            deadLetters += 1
            actions.append(
                .deadLetter(
                    DeadLetter(busSeq: busSeq, key: entry.key, attempts: entry.attempts, code: failure.code, message: failure.message)))
        }
        if entry.isReplay {
            replayCount -= 1
        } else {
            bufferedCount -= 1
            settledAbove.insert(busSeq)
            advanceCursor()
        }
    }

    /// Moves the cursor to just below the lowest unsettled buffered event, or to `readThrough`
    /// when none is held, forgetting the settled numbers it passes.
    mutating func advanceCursor() {
        while let busSeq = order.min, busSeq <= readThrough, entries.index(forKey: busSeq) == nil {
            order.removeMin()
            settledAbove.remove(busSeq)
        }
        let next = min(readThrough, (order.min ?? .max) - 1)
        if next > cursor { cursor = next }
    }

    /// Whether an ack-deadline timer still belongs to the delivery in flight.
    func isCurrentDeadline(_ timer: Timer) -> Bool {
        guard case .inFlight(let holder) = entries[timer.busSeq]?.phase else { return false }
        return holder.attempt == timer.attempt && holder.deadline == timer.at
    }

    /// Whether a back-off timer still belongs to the event's current back-off.
    func isCurrentBackOff(_ timer: Timer) -> Bool {
        guard let entry = entries[timer.busSeq] else { return false }
        return entry.phase == .backingOff(until: timer.at) && entry.attempts == timer.attempt
    }

    mutating func pruneTimers() {
        while let timer = ackDeadlines.min, !isCurrentDeadline(timer) { ackDeadlines.removeMin() }
        while let timer = backOffs.min, !isCurrentBackOff(timer) { backOffs.removeMin() }
    }
}

extension Duration {
    /// "30 s", "250 ms": for messages.
    var groupDescription: String {
        let (seconds, attoseconds) = components
        if attoseconds == 0 { return "\(seconds) s" }
        return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
    }
}
