import DequeModule
import HeapModule
import SwitchboardProtocol

// What members, operators and the broker's timer say to the machine. Every member input counts
// as a sign of life of a known member, refused or not; nothing else of a refused input sticks.

extension ConsumerGroupState {
    /// A member joins with `credit`, the most deliveries it holds at once (1…maxCredit). Joining
    /// again under the same id changes its name and credit (a lower credit takes nothing back:
    /// it only stops deliveries until the member is below it) and counts as a sign of life.
    ///
    /// `holding` names deliveries the member says it is still working on from an earlier
    /// connection (see `claim`); `held` returns those it holds now.
    mutating func join(
        member id: GroupMemberID, name: String, credit: Int, holding: [HeldDelivery] = [], held: inout [Int64], now: Instant
    ) throws(GroupRefusal) -> [GroupAction] {
        guard (1...settings.maxCredit).contains(credit) else {
            heard(from: id, now: now)
            throw GroupRefusal(
                code: .invalidCredit,
                message: "member \(name) (\(id)) asked group \(self.name) for credit \(credit); it must be 1...\(settings.maxCredit)")
        }
        if members[id] != nil {
            members[id]!.name = name
            members[id]!.credit = credit
            heard(from: id, now: now)
        } else {
            memberSerial += 1
            members[id] = Member(id: id, name: name, credit: credit, lastSeen: now, serial: memberSerial)
        }
        held = claim(holding, for: id, now: now)
        return finish(now: now, [])
    }

    /// `join` without claims.
    mutating func join(member id: GroupMemberID, name: String, credit: Int, now: Instant) throws(GroupRefusal) -> [GroupAction] {
        var held: [Int64] = []
        return try join(member: id, name: name, credit: credit, held: &held, now: now)
    }

    /// A rejoining member's claims: each delivery goes (back) to it, with a fresh deadline and
    /// the attempt it names, when no one else can be working on it:
    /// - in flight to it already under that attempt;
    /// - in flight under that attempt to another member of the same name (its earlier
    ///   connection, not yet expired);
    /// - held back after a restart for a holder to reclaim, or ready, with no delivery after
    ///   the one named (attempt ≥ the count the broker has) and its key free;
    /// - after a restart, not read back from the journal yet and not settled: claimed when it is.
    /// Anything else (settled, backing off after a NACK, in flight to someone else, a later
    /// delivery made) stays as it is. The member's credit bounds what it holds: the first two
    /// kinds are granted first (it surely works on them), then the others in bus_seq order while
    /// it holds less than its credit. A bus_seq named twice counts once, with its first attempt.
    /// Returns the bus_seqs the member holds now, ascending.
    mutating func claim(_ holding: [HeldDelivery], for id: GroupMemberID, now: Instant) -> [Int64] {
        guard let member = members[id] else { return [] }
        var seen: Set<Int64> = []
        let named = holding.filter { seen.insert($0.busSeq).inserted }.sorted { $0.busSeq < $1.busSeq }
        var held: [Int64] = []
        var waiting: [HeldDelivery] = []
        for delivery in named {
            let busSeq = delivery.busSeq
            guard let entry = entries[busSeq] else {
                waiting.append(delivery)
                continue
            }
            switch entry.phase {
            case .inFlight(let holder) where holder.attempt == delivery.attempt:
                if holder.member == id {
                    held.append(busSeq)
                } else if members[holder.member]?.name == member.name {
                    members[holder.member]!.inFlight.remove(busSeq)
                    members[id]!.inFlight.insert(busSeq)
                    let deadline = now + settings.ackWait
                    entries[busSeq]!.phase = .inFlight(Entry.Holder(member: id, attempt: holder.attempt, deadline: deadline))
                    ackDeadlines.insert(Timer(at: deadline, busSeq: busSeq, attempt: holder.attempt))
                    reclaimed += 1
                    held.append(busSeq)
                }
            case .backingOff where entry.awaitsReclaim, .ready:
                waiting.append(delivery)
            default:
                continue
            }
        }
        var pending = 0
        for delivery in waiting where members[id]!.inFlight.count + pending < member.credit {
            let busSeq = delivery.busSeq
            if let entry = entries[busSeq] {
                guard claimable(busSeq, attempt: delivery.attempt) else { continue }
                if entry.awaitsReclaim { backingOffCount -= 1 }
                hand(busSeq, to: id, attempt: delivery.attempt, now: now)
                held.append(busSeq)
            } else if let reclaim, busSeq > readThrough, busSeq <= reclaim.through, !settledAbove.contains(busSeq) {
                claims[busSeq] = (id, delivery.attempt)
                pending += 1
                held.append(busSeq)
            }
        }
        return held.sorted()
    }

    /// Whether a claim on unsettled, not-in-flight `busSeq` under `attempt` may be granted: no
    /// later delivery was made, and it is its key's next event with nothing of the key in flight.
    func claimable(_ busSeq: Int64, attempt: Int) -> Bool {
        guard let entry = entries[busSeq], attempt >= entry.attempts else { return false }
        switch entry.phase {
        case .inFlight: return false
        case .backingOff where !entry.awaitsReclaim: return false
        default: break
        }
        guard let key = entry.key else { return true }
        guard let queue = keys[key] else { return false }
        return queue.inFlight == nil && queue.pending.first == busSeq
    }

    /// Puts a claimed event in flight to `member` under `attempt` without a DELIVER (the member
    /// has it). The caller has checked `claimable` and taken it out of any back-off count.
    mutating func hand(_ busSeq: Int64, to member: GroupMemberID, attempt: Int, now: Instant) {
        guard members[member] != nil, var entry = entries[busSeq] else { return }
        let deadline = now + settings.ackWait
        entry.attempts = max(entry.attempts, attempt)
        entry.awaitsReclaim = false
        entry.isQueued = false
        entry.phase = .inFlight(Entry.Holder(member: member, attempt: attempt, deadline: deadline))
        entries[busSeq] = entry
        if let key = entry.key { keys[key]!.inFlight = busSeq }
        members[member]!.inFlight.insert(busSeq)
        inFlightCount += 1
        reclaimed += 1
        ackDeadlines.insert(Timer(at: deadline, busSeq: busSeq, attempt: attempt))
        changed.insert(busSeq)
    }

    /// Holds a restored, already-delivered event back until `until` (a back-off its holder can
    /// cut short by claiming it).
    mutating func holdForReclaim(_ busSeq: Int64, until: Instant) {
        entries[busSeq]!.phase = .backingOff(until: until)
        entries[busSeq]!.awaitsReclaim = true
        backingOffCount += 1
        backOffs.insert(Timer(at: until, busSeq: busSeq, attempt: entries[busSeq]!.attempts))
    }

    /// A member leaves gracefully: what it held is ready again at once, keeping its delivery
    /// count (last error `member-left`; an event that had its last delivery becomes a dead
    /// letter). An unknown member changes nothing.
    mutating func leave(member id: GroupMemberID, now: Instant) -> [GroupAction] {
        guard let member = members.removeValue(forKey: id) else { return [] }
        var actions: [GroupAction] = []
        for busSeq in member.inFlight.sorted() {
            let attempt = entries[busSeq].map(\.attempts) ?? 0
            takeBack(
                busSeq,
                failure: GroupFailure(
                    code: GroupFailure.memberLeftCode, message: "member \(member.name) left group \(name) holding attempt \(attempt)"),
                into: &actions)
        }
        return finish(now: now, actions)
    }

    /// Any message from a member (a heartbeat, say) shows it is alive. Unknown members are
    /// ignored: they must join.
    mutating func heard(from id: GroupMemberID, now: Instant) {
        guard let index = members.index(forKey: id) else { return }
        heard(at: index, now: now)
    }

    mutating func heard(at index: Dictionary<GroupMemberID, Member>.Index, now: Instant) {
        Self.heard(&members.values[index], now: now)
    }

    /// One access to the member for the whole change.
    static func heard(_ member: inout Member, now: Instant) {
        member.lastSeen = max(member.lastSeen, now)
        member.reachable = true
    }

    /// The member's connection is gone (the broker could not route a HEAD to it). Unlike a LEAVE,
    /// what it holds is not taken back now: the member may still be working on it (its process
    /// lives; the connection was dropped, by a network fault or by the broker re-binding after a
    /// revocation), and will claim it when it joins again on a new connection. It gets nothing
    /// new; if it stays silent for `liveness`, `tick` removes it and its deliveries go to the
    /// others (`member-lost`). Returns whether the member was reachable until now.
    mutating func unreachable(member id: GroupMemberID) -> Bool {
        guard members[id]?.reachable == true else { return false }
        members[id]!.reachable = false
        return true
    }

    /// The member processed the event: it is settled and never delivered again.
    mutating func ack(member id: GroupMemberID, busSeq: Int64, attempt: Int, now: Instant) throws(GroupRefusal) -> [GroupAction] {
        _ = try heldDelivery(busSeq, attempt: attempt, by: id, verb: "ACK", now: now)
        var actions: [GroupAction] = []
        settle(busSeq, deadLetter: nil, into: &actions)
        return finish(now: now, actions)
    }

    /// A member's ACKS: each delivery settled as `ack` would settle it, in order, and one dispatch
    /// for them all (the credit they free goes out in one round). A delivery the member does not
    /// hold under that attempt is refused on its own, with the refusal its ACK would get; the
    /// others are settled all the same.
    mutating func ack(
        member id: GroupMemberID, deliveries: [HeldDelivery], now: Instant
    ) -> (actions: [GroupAction], refused: [(busSeq: Int64, refusal: GroupRefusal)]) {
        var actions: [GroupAction] = []
        var refused: [(busSeq: Int64, refusal: GroupRefusal)] = []
        // One look-up of the member and one sign of life for the whole message (settling changes
        // the member's held set, so its index is looked up again for a refusal's text only).
        guard let memberIndex = members.index(forKey: id) else {
            for delivery in deliveries {
                do throws(GroupRefusal) {
                    _ = try heldDelivery(delivery.busSeq, attempt: delivery.attempt, by: id, verb: "ACK", now: now)
                } catch {
                    refused.append((delivery.busSeq, error))
                }
            }
            return (finish(now: now, actions), refused)
        }
        heard(at: memberIndex, now: now)
        for delivery in deliveries {
            do throws(GroupRefusal) {
                _ = try held(delivery.busSeq, attempt: delivery.attempt, by: id, verb: "ACK")
                settle(delivery.busSeq, deadLetter: nil, into: &actions)
            } catch {
                refused.append((delivery.busSeq, error))
            }
        }
        return (finish(now: now, actions), refused)
    }

    /// The member failed to process the event and it may be retried. If this was delivery
    /// number `maxDeliver`, the event becomes a dead letter with this code (default `nacked`)
    /// and message; otherwise it is delivered again after `delay`, or, without one, after the
    /// back-off for this delivery number (see `ConsumerGroupSettings.backoff`). A delay is cut
    /// to 0…maxNackDelay. While it waits, later events of its key wait too.
    mutating func nack(
        member id: GroupMemberID, busSeq: Int64, attempt: Int, delay: Duration? = nil, code: String? = nil, message: String? = nil,
        now: Instant
    ) throws(GroupRefusal) -> [GroupAction] {
        let holder = try heldDelivery(busSeq, attempt: attempt, by: id, verb: "NACK", now: now)
        var entry = entries[busSeq]!
        endFlight(of: busSeq, key: entry.key, holder: holder)
        let memberName = members[id]?.name ?? id.description
        let failure = GroupFailure(
            code: code ?? GroupFailure.nackedCode, message: message ?? "member \(memberName) NACKed attempt \(attempt)")
        entry.lastFailure = failure
        entry.phase = .ready
        changed.insert(busSeq)
        var actions: [GroupAction] = []
        if entry.attempts >= settings.maxDeliver {
            entries[busSeq] = entry
            settle(busSeq, deadLetter: failure, into: &actions)
            return finish(now: now, actions)
        }
        let wait = min(max(delay ?? settings.backoff(afterAttempt: holder.attempt), .zero), settings.maxNackDelay)
        if wait > .zero {
            entry.phase = .backingOff(until: now + wait)
            entries[busSeq] = entry
            backingOffCount += 1
            backOffs.insert(Timer(at: now + wait, busSeq: busSeq, attempt: entry.attempts))
        } else {
            entries[busSeq] = entry
            reconsider(key: entry.key, busSeq: busSeq)
        }
        return finish(now: now, actions)
    }

    /// The member says the event can never be processed: it becomes a dead letter at once,
    /// whatever its delivery count, with this code (default `terminated`) and message.
    mutating func term(
        member id: GroupMemberID, busSeq: Int64, attempt: Int, code: String? = nil, message: String? = nil, now: Instant
    ) throws(GroupRefusal) -> [GroupAction] {
        _ = try heldDelivery(busSeq, attempt: attempt, by: id, verb: "TERM", now: now)
        let memberName = members[id]?.name ?? id.description
        let failure = GroupFailure(
            code: code ?? GroupFailure.terminatedCode, message: message ?? "member \(memberName) terminated attempt \(attempt)")
        entries[busSeq]!.lastFailure = failure
        var actions: [GroupAction] = []
        settle(busSeq, deadLetter: failure, into: &actions)
        return finish(now: now, actions)
    }

    /// The member is still working on the event: its ack deadline becomes `now + ackWait`.
    /// It may say so any number of times; the delivery count does not change.
    mutating func inProgress(member id: GroupMemberID, busSeq: Int64, attempt: Int, now: Instant) throws(GroupRefusal) -> [GroupAction] {
        var holder = try heldDelivery(busSeq, attempt: attempt, by: id, verb: "IN-PROGRESS", now: now)
        holder.deadline = now + settings.ackWait
        entries[busSeq]!.phase = .inFlight(holder)
        ackDeadlines.insert(Timer(at: holder.deadline, busSeq: busSeq, attempt: holder.attempt))
        return finish(now: now, [])
    }

    /// Everything due at `now`, in this order: deliveries past their ack deadline come back
    /// (`ack-timeout`); members silent for `liveness` are removed (`.memberExpired`, their
    /// deliveries back with `member-lost`); back-offs that ended release their events; then
    /// dispatch. A delivery taken back after its last allowed attempt becomes a dead letter.
    mutating func tick(now: Instant) -> [GroupAction] {
        var actions: [GroupAction] = []
        while let timer = ackDeadlines.min, timer.at <= now {
            ackDeadlines.removeMin()
            guard isCurrentDeadline(timer), case .inFlight(let holder) = entries[timer.busSeq]?.phase else { continue }
            let memberName = members[holder.member]?.name ?? holder.member.description
            takeBack(
                timer.busSeq,
                failure: GroupFailure(
                    code: GroupFailure.ackTimeoutCode,
                    message: "no answer from \(memberName) to attempt \(holder.attempt) within \(settings.ackWait.groupDescription)"),
                into: &actions)
        }
        let silent = members.values.filter { now - $0.lastSeen >= settings.liveness }.sorted { $0.serial < $1.serial }
        for member in silent {
            members[member.id] = nil
            actions.append(.memberExpired(member.id))
            for busSeq in member.inFlight.sorted() {
                let attempt = entries[busSeq].map(\.attempts) ?? 0
                takeBack(
                    busSeq,
                    failure: GroupFailure(
                        code: GroupFailure.memberLostCode,
                        message:
                            "member \(member.name) was silent for \(settings.liveness.groupDescription) holding attempt \(attempt)"),
                    into: &actions)
            }
        }
        while let timer = backOffs.min, timer.at <= now {
            backOffs.removeMin()
            guard isCurrentBackOff(timer) else { continue }
            entries[timer.busSeq]!.phase = .ready
            entries[timer.busSeq]!.awaitsReclaim = false
            backingOffCount -= 1
            reconsider(key: entries[timer.busSeq]!.key, busSeq: timer.busSeq)
        }
        return finish(now: now, actions)
    }

    /// An operator replays a dead letter: the event is delivered again, counting from attempt
    /// 0. At or below the cursor it becomes a replay (the cursor stays); above it, it is
    /// unsettled again and holds the cursor back until settled. A replay takes its bus_seq's
    /// place among its key's events: it goes before the key's newer events (it is the oldest),
    /// but never while one of them is in flight. Reopening an event that is unsettled already,
    /// or above the cursor and not settled (not one of this group's events), changes nothing.
    mutating func reopen(busSeq: Int64, key: String?, now: Instant) -> [GroupAction] {
        guard busSeq >= 1, entries[busSeq] == nil else { return [] }
        let isReplay: Bool
        if busSeq <= cursor {
            isReplay = true
            replayCount += 1
        } else if settledAbove.remove(busSeq) != nil {
            reopenedAbove.insert(busSeq)
            changed.insert(busSeq)
            // Settled before a restart and not read again yet: it is read as unsettled.
            guard busSeq <= readThrough else { return [] }
            isReplay = false
            bufferedCount += 1
        } else {
            return []
        }
        entries[busSeq] = Entry(busSeq: busSeq, key: key, isReplay: isReplay, attempts: 0, lastFailure: nil)
        entries[busSeq]!.reopened = true
        changed.insert(busSeq)
        if let key {
            var queue = keys.removeValue(forKey: key) ?? KeyQueue()
            queue.pending.insert(busSeq, at: Self.insertionIndex(of: busSeq, in: queue.pending))
            keys[key] = queue
        }
        reconsider(key: key, busSeq: busSeq)
        return finish(now: now, [])
    }

    /// Where `value` goes in ascending `sorted`.
    static func insertionIndex(of value: Int64, in sorted: Deque<Int64>) -> Int {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The holder of `busSeq` if `id` is a member holding it under `attempt`; otherwise a
    /// refusal. Counts the sign of life either way.
    mutating func heldDelivery(
        _ busSeq: Int64, attempt: Int, by id: GroupMemberID, verb: String, now: Instant
    ) throws(GroupRefusal) -> Entry.Holder {
        guard let index = members.index(forKey: id) else {
            throw GroupRefusal(
                code: .notMember,
                message:
                    "\(verb) of bus_seq \(busSeq) attempt \(attempt) from \(id): not a member of group \(name) (never joined, left or expired)"
            )
        }
        heard(at: index, now: now)
        return try held(busSeq, attempt: attempt, by: id, verb: verb)
    }

    /// `heldDelivery` for a member known to be one, its sign of life counted by the caller.
    /// (Mutating only to read the entry in place: see `look`.)
    mutating func held(_ busSeq: Int64, attempt: Int, by id: GroupMemberID, verb: String) throws(GroupRefusal) -> Entry.Holder {
        // Written only for a refusal: a settle carried out (nearly all) makes no text.
        func refusal(_ why: String) -> GroupRefusal {
            let memberName = members[id]?.name ?? id.description
            return GroupRefusal(code: .notHeld, message: "\(verb) of bus_seq \(busSeq) attempt \(attempt) from \(memberName): \(why)")
        }
        guard let index = entries.index(forKey: busSeq) else {
            throw refusal("the event is not pending in group \(name) (settled, or never delivered)")
        }
        guard let holder = Self.holder(&entries.values[index]) else {
            throw refusal("the event is not in flight (taken back after attempt \(entries.values[index].attempts))")
        }
        guard holder.member == id else {
            throw refusal("the event is in flight to another member as attempt \(holder.attempt)")
        }
        guard holder.attempt == attempt else {
            throw refusal("stale attempt, the event was redelivered as attempt \(holder.attempt)")
        }
        return holder
    }

    /// The member an entry is in flight to, read where it lies (see `look`); nil if it is not.
    static func holder(_ entry: inout Entry) -> Entry.Holder? {
        guard case .inFlight(let holder) = entry.phase else { return nil }
        return holder
    }
}
