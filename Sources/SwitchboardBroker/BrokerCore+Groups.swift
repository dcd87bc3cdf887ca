// Consumer groups on the broker thread (protocol/README.md, section 15).
//
// The rules (who gets which event, when it comes back, when it is dead) are the value-type
// `ConsumerGroupState`, one per group; this file is the I/O around it: it reads members'
// commands from the groups endpoint, feeds the machines, reads the events they want from the
// journal, sends DELIVERs, turns dead letters into `dlq.<group>` events, and commits what the
// machines changed in one transaction with those events: dead letters, creations and operators'
// changes at the end of the loop iteration that made them, settling and delivery counts within
// `groups.commit_interval` (10 ms by default). An ACK is therefore durable a few milliseconds
// after it is read; a broker that dies before that commit delivers the event again, which
// at-least-once allows.

import CoreMetrics
import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardStorage
import ZeroMQ

/// One group: its filter and its machine.
struct GroupRuntime {
    var name: String
    var topics: [String]
    var createdAt: Int64
    var start: String
    var state: ConsumerGroupState
    /// What each member sent in JOIN (its principal and name), for status and re-joins.
    var members: [GroupMemberID: (name: String, principal: String?, credit: Int, batch: Int)] = [:]
}

/// Every group and the state the broker thread keeps around them. Not `Sendable`: broker thread only.
struct GroupBook {
    var groups: [String: GroupRuntime] = [:]
    let settings: ConsumerGroupSettings
    /// The groups each connection has joined (HEAD goes to these every heartbeat).
    var connections: [Data: Set<String>] = [:]
    /// Events read for delivery, by bus_seq; bounded, refilled from the journal.
    var cache = EventCache()
    /// Writes and `dlq.<group>` events waiting for the iteration's commit.
    var writes: [GroupWrite] = []
    var letters: [(event: PendingEvent, record: DeadLetterRecord)] = []
    /// `groups.changed` events of operators' changes, committed with the rest.
    var audits: [PendingEvent] = []
    var refusalLog = LogLimiter(perInterval: 20)

    init(journal: any JournalStore, settings: ConsumerGroupSettings, logger: Logger) throws {
        self.settings = settings
        // Events journaled before the restart wait one liveness period for members still working
        // on them to rejoin and claim them (protocol section 15.3, Restart and Rejoining).
        let reclaim = (until: ContinuousClock.now + settings.liveness, through: journal.head)
        for stored in try journal.loadGroups() {
            // A group whose cursor retention has passed starts at what is still journaled.
            var snapshot = stored.snapshot
            if snapshot.cursor < journal.first - 1 {
                logger.warning(
                    "retention removed events a group had not settled",
                    metadata: ["group": "\(stored.name)", "cursor": "\(snapshot.cursor)", "first": "\(journal.first)"])
                snapshot.cursor = journal.first - 1
            }
            groups[stored.name] = GroupRuntime(
                name: stored.name, topics: stored.topics, createdAt: stored.createdAt, start: stored.start,
                state: ConsumerGroupState(
                    name: stored.name, settings: settings, restoring: snapshot, reclaim: reclaim, earlierThrough: reclaim.through))
        }
    }

    /// The earliest instant a group's timers want attention.
    var nextDeadline: ContinuousClock.Instant? { groups.values.compactMap(\.state.nextDeadline).min() }

    /// Writes that are committed at once: operators' changes, group creations, dead letters.
    var hasWritesDue: Bool { !writes.isEmpty || !letters.isEmpty || !audits.isEmpty }

    /// Whether anything at all waits for a commit.
    var hasUncommitted: Bool { hasWritesDue || groups.values.contains { $0.state.hasChanges } }

    /// Keeps the event cache in its bounds (`EventCache`): what every group has settled goes.
    mutating func trimCache() {
        cache.trim(settledThrough: groups.values.map(\.state.cursor).min() ?? 0)
    }

    /// Runs `body` on group `name` where it lies in the book; nil if there is no such group.
    /// Reached in place (`values[index]`'s modify accessor), the group's state has no other
    /// reference, so changing it changes its tables in place: changed through a copy (`var
    /// runtime = groups[name]`, change, store back), every ACK copied the whole table of the
    /// group's buffered events, which was most of the broker's time (bench/RESULTS.md, issue 11).
    /// Reads go through it too: the book's getter (`groups[name]?.state.room`) copies the whole
    /// group first, retaining and releasing each of its tables. `body` must not touch the book.
    mutating func withGroup<Result, Failure: Error>(
        _ name: String, _ body: (inout GroupRuntime) throws(Failure) -> Result
    ) throws(Failure) -> Result? {
        guard let index = groups.index(forKey: name) else { return nil }
        return try body(&groups.values[index])
    }
}

extension BrokerCore {
    // MARK: Reading commands

    func serveGroups() {
        var served = 0
        while served < configuration.batchLimit, let message = try? groupSocket.receive(dontWait: true) {
            served += 1
            let frames = message.frames
            guard let identity = frames.first else { continue }
            var command = Envelope.readableCommand(frames.dropFirst())
            var ref: String?
            let now = ContinuousClock.now
            for name in groups.connections[identity] ?? [] { groups.groups[name]?.state.heard(from: GroupMemberID(identity), now: now) }
            do {
                let envelope = try Envelope.check(frames.dropFirst(), minimumVersion: configuration.minimumVersion, limits: .groups)
                command = envelope.command.rawValue
                // Section 2's order: whether this endpoint takes the command, then the JSON frames.
                let taken: Set<Command> = [.join, .ack, .acks, .nack, .term, .progress, .leave, .heartbeat, .request]
                guard taken.contains(envelope.command), envelope.command != .acks || envelope.version >= .memberAcks else {
                    throw ProtocolError(
                        .unknownCommand,
                        envelope.command == .acks
                            ? "a member's ACKS is protocol \(ProtocolVersion.memberAcks) or later; this message is \(envelope.version)"
                            : "command \(envelope.command.rawValue) is not accepted on the groups endpoint (JOIN, ACK, ACKS, NACK, TERM, PROGRESS, LEAVE, HEARTBEAT, REQUEST)"
                    )
                }
                // A plain ACK, NACK, PROGRESS or ACKS (nearly every message while a group consumes)
                // is read without the general parse; anything else as before.
                if let plain = SettleHeader.plain(envelope) {
                    try settle(identity, plain, ref: &ref, now: now)
                    continue
                }
                if let plain = GroupAcks.plain(envelope) {
                    try settle(identity, plain, ref: &ref, now: now)
                    continue
                }
                let parsed = try envelope.parsed(reference: &ref)
                switch envelope.command {
                case .join:
                    try join(identity, JoinHeader(wire: parsed.header), version: envelope.version, principal: message.userID, now: now)
                case .ack: try settle(identity, SettleHeader(.ack, wire: parsed.header), ref: &ref, now: now)
                case .acks: try settle(identity, GroupAcks(wire: parsed.header), ref: &ref, now: now)
                case .nack: try settle(identity, SettleHeader(.nack, wire: parsed.header), ref: &ref, now: now)
                case .term: try settle(identity, SettleHeader(.term, wire: parsed.header), ref: &ref, now: now)
                case .progress: try settle(identity, SettleHeader(.progress, wire: parsed.header), ref: &ref, now: now)
                case .leave:
                    let header = try envelope.decodeHeader(LeaveHeader.self)
                    try GroupName.check(header.group)
                    ref = header.group
                    try leave(identity, header, now: now)
                case .heartbeat:
                    // A member that the broker no longer knows (a broker restart, a reconnection
                    // under a new routing id, an expiry) learns it here and joins again.
                    let echo = try HeartbeatHeader(wire: parsed.header).echo
                    guard groups.connections[identity] != nil else {
                        throw ProtocolError(.notMember, "this connection has joined no group: JOIN again")
                    }
                    // The echo tells the member this HEARTBEAT was read: its fence (15.3) is
                    // measured from when it sent it.
                    let head = HeadHeader(head: journal.head, first: journal.first, broker: journal.brokerID, echo: echo)
                    reply(identity, try Envelope(command: .head, header: head), on: groupSocket)
                case .request: groupRequest(identity, parsed, principal: message.userID, now: now)
                default: break
                }
            } catch let error as ProtocolError {
                refuse(identity, error, command: command, ref: ref, socket: groupSocket)
            } catch {
                refuse(identity, ProtocolError(.internalError, "\(error)"), command: command, ref: ref, socket: groupSocket)
            }
        }
    }

    /// A JOIN; its `batch` counts only when it is written as 1.3 or later (section 3: a receiver
    /// relies on a newer minor's fields only then).
    func join(_ identity: Data, _ join: JoinHeader, version: ProtocolVersion, principal: String?, now: ContinuousClock.Instant) throws {
        let batch = version >= .deliverBatches ? join.batch : 1
        if let security = broker.security {
            guard let role = security.role(of: principal) else {
                security.refused("revoked", principal: principal, endpoint: .groups, reason: "principal is no longer allowed")
                throw ProtocolError(.forbidden, "principal '\(principal ?? "?")' is no longer allowed")
            }
            if let reason = Policy.join(role, group: join.group) {
                security.refused("group", principal: principal, endpoint: .groups, reason: reason)
                throw ProtocolError(.forbidden, reason)
            }
        }
        if groups.groups[join.group] == nil {
            let start = join.start ?? .earliest
            groups.create(join.group, topics: join.topics, start: start, journal: journal)
            logger.notice("group created", metadata: ["group": "\(join.group)", "topics": "\(join.topics)", "start": "\(start)"])
            audit(
                GroupAudit(
                    action: "created", group: join.group, by: principal ?? "-",
                    extra: ["topics": .array(join.topics.map(JSONValue.string)), "start": .string(start.description)]))
        }
        let member = GroupMemberID(identity)
        let name = join.member ?? principal ?? member.description
        let joinedAt = try groups.withGroup(join.group) {
            runtime throws(ProtocolError) -> (actions: [GroupAction], cursor: Int64, held: [Int64]) in
            guard Set(runtime.topics) == Set(join.topics) else {
                throw ProtocolError(
                    .groupConflict,
                    "group '\(join.group)' takes \(runtime.topics), not \(join.topics); an admin can delete the group to change it")
            }
            let actions: [GroupAction]
            var held: [Int64] = []
            do throws(GroupRefusal) {
                actions = try runtime.state.join(
                    member: member, name: name, credit: join.credit, holding: join.holding, held: &held, now: now)
            } catch {
                throw ProtocolError(.invalidHeader, "header: field 'credit' \(error.message)")
            }
            runtime.members[member] = (name, principal, join.credit, batch)
            return (actions, runtime.state.cursor, held)
        }
        guard let (actions, cursor, held) = joinedAt else { return }
        groups.connections[identity, default: []].insert(join.group)
        let settings = groups.settings
        let joined = JoinedHeader(
            group: join.group, member: name, credit: join.credit, ackWaitMilliseconds: settings.ackWait.milliseconds,
            heartbeatMilliseconds: configuration.heartbeat.milliseconds, livenessMilliseconds: settings.liveness.milliseconds,
            maxDeliver: settings.maxDeliver, backoffMilliseconds: settings.backoff.map(\.milliseconds), cursor: cursor,
            head: journal.head, held: held, echoes: true, takesAcks: true, batch: batch)
        reply(identity, try Envelope(command: .joined, header: joined), on: groupSocket)
        logger.info(
            "group member joined",
            metadata: ["group": "\(join.group)", "member": "\(name)", "credit": "\(join.credit)", "batch": "\(batch)"])
        if !join.holding.isEmpty {
            logger.notice(
                "a rejoining member claimed the deliveries it still works on",
                metadata: ["group": "\(join.group)", "member": "\(name)", "claimed": "\(join.holding.count)", "held": "\(held.count)"])
        }
        try perform(actions, group: join.group, now: now)
    }

    func settle(_ identity: Data, _ settle: SettleHeader, ref: inout String?, now: ContinuousClock.Instant) throws {
        ref = "\(settle.group)/\(settle.busSeq)"
        let member = GroupMemberID(identity)
        let settled = try groups.withGroup(settle.group) { runtime throws(ProtocolError) -> [GroupAction] in
            guard runtime.members[member] != nil else { throw Self.notMember(of: settle.group) }
            do throws(GroupRefusal) {
                switch settle.outcome {
                case .ack: return try runtime.state.ack(member: member, busSeq: settle.busSeq, attempt: settle.attempt, now: now)
                case .nack:
                    return try runtime.state.nack(
                        member: member, busSeq: settle.busSeq, attempt: settle.attempt,
                        delay: settle.delayMilliseconds.map { .milliseconds($0) }, code: settle.code ?? GroupFailure.nackedCode,
                        message: settle.message ?? "the member asked for a later delivery", now: now)
                case .term:
                    return try runtime.state.term(
                        member: member, busSeq: settle.busSeq, attempt: settle.attempt, code: settle.code ?? GroupFailure.terminatedCode,
                        message: settle.message ?? "the member gave up", now: now)
                case .progress:
                    return try runtime.state.inProgress(member: member, busSeq: settle.busSeq, attempt: settle.attempt, now: now)
                }
            } catch {
                throw ProtocolError(error.code == .notMember ? .notMember : .notHeld, error.message)
            }
        }
        guard let actions = settled else { throw Self.notMember(of: settle.group) }
        if settle.outcome == .ack { metrics.group(settle.group).acked.increment() }
        try perform(actions, group: settle.group, now: now)
    }

    /// A member's ACKS: one look-up of the group and one dispatch for every pair. Each pair the
    /// member does not hold gets the ERROR its own ACK would (`not-held`, ref `<group>/<bus_seq>`);
    /// the others are settled all the same. Not a member: one ERROR `not-member`, ref the group.
    func settle(_ identity: Data, _ acks: GroupAcks, ref: inout String?, now: ContinuousClock.Instant) throws {
        ref = acks.group
        let member = GroupMemberID(identity)
        let settled = try groups.withGroup(acks.group) {
            runtime throws(ProtocolError) -> (actions: [GroupAction], refused: [(busSeq: Int64, refusal: GroupRefusal)]) in
            guard runtime.members.index(forKey: member) != nil else { throw Self.notMember(of: acks.group) }
            return runtime.state.ack(member: member, deliveries: acks.deliveries, now: now)
        }
        guard let (actions, refused) = settled else { throw Self.notMember(of: acks.group) }
        metrics.group(acks.group).acked.increment(by: Int64(acks.deliveries.count - refused.count))
        try perform(actions, group: acks.group, now: now)
        for (busSeq, refusal) in refused {
            let code: ProtocolError.Code = refusal.code == .notMember ? .notMember : .notHeld
            refuse(
                identity, ProtocolError(code, refusal.message), command: Command.acks.rawValue, ref: "\(acks.group)/\(busSeq)",
                socket: groupSocket)
        }
    }

    static func notMember(of group: String) -> ProtocolError {
        ProtocolError(.notMember, "this connection is not a member of group '\(group)': JOIN first")
    }

    func leave(_ identity: Data, _ leave: LeaveHeader, now: ContinuousClock.Instant) throws {
        let member = GroupMemberID(identity)
        let left = groups.withGroup(leave.group) { runtime -> [GroupAction]? in
            guard runtime.members.removeValue(forKey: member) != nil else { return nil }
            return runtime.state.leave(member: member, now: now)
        }
        guard let actions = left ?? nil else {
            throw ProtocolError(.notMember, "this connection is not a member of group '\(leave.group)'")
        }
        groups.connections[identity]?.remove(leave.group)
        if groups.connections[identity]?.isEmpty == true { groups.connections[identity] = nil }
        try perform(actions, group: leave.group, now: now)
    }

    // MARK: Timers, reading the journal, committing

    func tickGroups(now: ContinuousClock.Instant) {
        guard let due = groups.nextDeadline, due <= now else { return }
        for name in groups.groups.keys.sorted() {
            guard let deadline = groups.withGroup(name, { $0.state.nextDeadline }) ?? nil, deadline <= now,
                let actions = groups.withGroup(name, { $0.state.tick(now: now) })
            else { continue }
            do {
                try perform(actions, group: name, now: now)
            } catch {
                logger.error("group timers failed", metadata: ["group": "\(name)", "error": "\(error)"])
            }
        }
    }

    /// Offers every group the journaled events it wants (from its `readThrough` up to the head),
    /// a bounded batch per group per call, so one lagging group cannot stall the loop.
    func pumpGroups(now: ContinuousClock.Instant) throws {
        for name in groups.groups.keys.sorted() {
            for _ in 0..<4 {
                // Only what the read needs: a copy of the group held across the offer below
                // would make its change copy the group's tables.
                guard let (wants, room, topics) = groups.withGroup(name, { ($0.state.wantsEvents, $0.state.room, $0.topics) }),
                    let from = wants, from <= journal.head
                else { break }
                if from < journal.first, let suppressed = groups.refusalLog.admit("retention", at: now) {
                    logger.error(
                        "retention removed events a group had not read (journal size limit)",
                        metadata: withSuppressed(suppressed, ["group": "\(name)", "from": "\(from)", "first": "\(journal.first)"]))
                }
                let limit = max(1, min(1000, room))
                // Just journaled: from memory, with the key the producer sent; else the journal.
                var candidates: [GroupCandidate] = []
                candidates.reserveCapacity(limit)
                func take(_ entry: borrowing RecentEvents.Entry) {
                    candidates.append(GroupCandidate(busSeq: entry.event.busSeq, key: entry.key))
                    if !groups.cache.isFull { groups.cache[entry.event.busSeq] = entry.event }
                }
                let recent = recentEvents.visit(
                    from: from, topics: topics, limit: limit, head: journal.head, journalFirst: journal.first, take)
                let through: Int64
                if let recent {
                    through = recent
                } else {
                    let (entries, read) = Self.entries(try journal.read(from: from, to: nil, topics: topics, limit: limit))
                    for entry in entries { take(entry) }
                    through = read
                }
                let actions = groups.withGroup(name) { $0.state.offer(candidates, through: max(through, from - 1), now: now) } ?? []
                try perform(actions, group: name, now: now)
                if through < from { break }
            }
        }
    }

    /// One transaction: the `dlq.<group>` events of this iteration and every group's changes.
    func flushGroups() throws {
        for name in groups.groups.keys.sorted() {
            guard let changes = groups.groups[name]?.state.takeChanges(), !changes.isEmpty else { continue }
            groups.writes.append(.changes(group: name, changes))
        }
        guard !groups.writes.isEmpty || !groups.letters.isEmpty || !groups.audits.isEmpty else { return }
        let letters = groups.letters
        var writes = groups.writes
        for (index, letter) in letters.enumerated() { writes.append(.deadLetter(letter.record, eventIndex: index)) }
        let events = letters.map(\.event) + groups.audits
        let outcomes: [AppendOutcome]
        do {
            outcomes = try journal.commit(events: events, groups: writes)
        } catch {
            // Nothing of it is on disk (a full disk, an I/O error). Keep every write and try again
            // next iteration: the broker goes on delivering, and a crash before a commit only
            // brings back what at-least-once allows.
            groupCommitOutage.failed(
                StorageFault.classify(error, path: journal.location, queue: nil), count: writes.count, at: .now, logger: logger)
            return
        }
        groupCommitOutage.succeeded(at: .now, logger: logger)
        groups.writes = []
        groups.letters = []
        groups.audits = []
        for (index, outcome) in outcomes.enumerated() {
            if case .stored(let busSeq, let header) = outcome {
                publish(busSeq: busSeq, header: header, event: events[index])
            }
        }
        groups.trimCache()
        broker.update {
            $0.head = journal.head
            $0.journalCount = journal.count
            $0.journalBytes = journal.storedBytes
        }
    }

    /// Every heartbeat: HEAD to each member connection, so it knows the broker is alive. A
    /// connection that is gone (ROUTER_MANDATORY says so) gets nothing new, but keeps what it
    /// holds until it has been silent for `liveness`: its member may still be working on it, and
    /// claims it back when it joins again (protocol section 15.3).
    func heartbeatMembers() {
        guard !groups.connections.isEmpty,
            let envelope = try? Envelope(
                command: .head, header: HeadHeader(head: journal.head, first: journal.first, broker: journal.brokerID))
        else { return }
        for (identity, names) in groups.connections {
            do {
                _ = try groupSocket.send([identity] + envelope.frames(), dontWait: true)
            } catch let error where error.isHostUnreachable {
                for name in names {
                    let member = GroupMemberID(identity)
                    guard groups.groups[name]?.state.unreachable(member: member) == true else { continue }
                    logger.notice(
                        "group member disconnected; what it holds waits for it to join again, until it has been silent for the liveness period",
                        metadata: ["group": "\(name)", "member": "\(groups.groups[name]?.members[member]?.name ?? member.description)"])
                }
            } catch {
                logger.debug("HEAD to a group member not sent", metadata: ["error": "\(error)"])
            }
        }
    }

    // MARK: Carrying out the machines' actions

    func perform(_ actions: [GroupAction], group: String, now: ContinuousClock.Instant) throws {
        guard !actions.isEmpty else { return }
        // Read what is to be delivered and not cached, in one query.
        let missing = actions.compactMap { action -> Int64? in
            if case .deliver(_, let seq, _, _) = action, !groups.cache.contains(seq) { return seq }
            if case .deadLetter(let letter) = action, !groups.cache.contains(letter.busSeq) { return letter.busSeq }
            return nil
        }
        for event in try journal.events(missing) { groups.cache[event.busSeq] = event }
        let wallNow = Date()
        let counters = metrics.group(group)
        // Per call rather than per delivery: which deliveries are first (one look-up of the
        // group), the deadline's text (the deliveries of one call share their deadline), and the
        // counters.
        let firsts = groups.withGroup(group) { $0.state.firstDeliveries(in: actions) }
        // The deliveries of one deadline share their header's text but for attempt and bus_seq,
        // and every DELIVER its first two frames.
        var headers: (at: ContinuousClock.Instant, frames: DeliverHeaderFrames)?
        let versionFrame = Envelope.versionFrame()
        let commandFrame = Envelope.deliverCommandFrame
        // Members that take several deliveries per DELIVER (protocol 1.3): what each is owed, in
        // the order the machine dispatched it, sent when it reaches the member's batch or the
        // message limit, and the rest after the last action.
        var batches = DeliverBatches(limit: SizeLimits.groups.message)
        var delivered = 0
        var redelivered = 0
        defer {
            for message in batches.drain() { sendDeliver(message, group: group) }
            if delivered > 0 { counters.delivered.increment(by: Int64(delivered)) }
            if redelivered > 0 { counters.redeliveries.increment(by: Int64(redelivered)) }
        }
        for (index, action) in actions.enumerated() {
            switch action {
            case .deliver(let member, let busSeq, let attempt, let deadline):
                guard let event = groups.cache[busSeq] else {
                    // Retention removed it after it was offered: settle it as a dead letter
                    // would be wrong (nothing to replay); say so and let the time-out retry.
                    logger.error("an event to deliver is no longer journaled", metadata: ["group": "\(group)", "bus_seq": "\(busSeq)"])
                    continue
                }
                let frames: DeliverHeaderFrames
                if let current = headers, current.at == deadline {
                    frames = current.frames
                } else {
                    let text = Timestamp.format(wallNow.addingTimeInterval(Double(now.duration(to: deadline).milliseconds) / 1000))
                    frames = DeliverHeaderFrames(group: group, deadline: text, ackWaitMilliseconds: groups.settings.ackWait.milliseconds)
                    headers = (deadline, frames)
                }
                let header = frames.header(busSeq: busSeq, attempt: attempt, first: firsts?[index] ?? false)
                delivered += 1
                if attempt > 1 { redelivered += 1 }
                let slot = batches.slot(of: member) { groups.withGroup(group) { $0.members[member]?.batch ?? 1 } ?? 1 }
                guard batches.batch(at: slot) > 1 else {
                    sendDeliver(
                        [member.rawValue, versionFrame, commandFrame, header, event.header, event.metadata, event.content], group: group)
                    continue
                }
                if let full = batches.add(at: slot, [header, event.header, event.metadata, event.content]) {
                    sendDeliver(full, group: group)
                }
            case .deadLetter(let letter):
                counters.deadLetters.increment()
                deadLetter(letter, group: group)
            case .memberExpired(let member):
                let name = groups.groups[group]?.members[member]?.name ?? member.description
                groups.groups[group]?.members[member] = nil
                groups.connections[member.rawValue]?.remove(group)
                if groups.connections[member.rawValue]?.isEmpty == true { groups.connections[member.rawValue] = nil }
                logger.warning(
                    "group member fell silent; its deliveries go to the others",
                    metadata: ["group": "\(group)", "member": "\(name)", "connection": "\(member)"])
            }
        }
    }

    /// Sends a DELIVER, routing frame first. One not sent is taken back when its ack wait passes,
    /// or claimed back by its member when it joins again.
    func sendDeliver(_ message: [Data], group: String) {
        do {
            if try groupSocket.send(message, dontWait: true) { return }
            logger.debug("DELIVER not sent; the time-out gives it to another member", metadata: ["group": "\(group)"])
        } catch let error where error.isHostUnreachable {
            logger.debug("DELIVER not sent: the member's connection is gone", metadata: ["group": "\(group)"])
        } catch {
            logger.debug("DELIVER not sent", metadata: ["group": "\(group)", "error": "\(error)"])
        }
    }

    /// Journals a `dlq.<group>` event (with the next commit) naming the event the group gave up on.
    func deadLetter(_ letter: DeadLetter, group: String) {
        let event = groups.cache[letter.busSeq]
        let fields = event.flatMap { JSONValue.parse($0.header)?.object } ?? [:]
        var eventID = ""
        if case .string(let id)? = fields["event_id"] { eventID = id }
        let nowMillis = Int64(Date().timeIntervalSince1970 * 1000)
        var content: [String: JSONValue] = [
            "group": .string(group), "bus_seq": .integer(letter.busSeq), "event_id": .string(eventID),
            "type": .string(event?.type ?? ""), "attempts": .integer(Int64(letter.attempts)), "code": .string(letter.code),
            "message": .string(String(letter.message.prefix(1000))), "at": .string(Timestamp.format(milliseconds: nowMillis)),
        ]
        if let key = letter.key { content["key"] = .string(key) }
        let record = DeadLetterRecord(
            group: group, busSeq: letter.busSeq, dlqSeq: nil, eventID: eventID, type: event?.type ?? "", key: letter.key,
            attempts: letter.attempts, code: letter.code, message: letter.message, at: nowMillis, state: .dead)
        guard let pending = brokerEvent(type: "dlq.\(group)", schema: "dlq.\(group)/1", content: content, key: letter.key) else { return }
        groups.letters.append((pending, record))
        logger.warning(
            "dead letter",
            metadata: [
                "group": "\(group)", "bus_seq": "\(letter.busSeq)", "attempts": "\(letter.attempts)", "code": "\(letter.code)",
            ])
    }

    /// An event the broker itself publishes (producer `broker`; `producer_seq` follows the clock).
    func brokerEvent(type: String, schema: String, content: [String: JSONValue], key: String? = nil) -> PendingEvent? {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        brokerSeq = max(brokerSeq + 1, now * 1000)
        let header = EventHeader(type: type, producer: "broker", producerSeq: brokerSeq, schema: schema, session: brokerSession, key: key)
        let raw = header.wireJSON()
        guard case .object(let fields)? = JSONValue.parse(raw) else { return nil }
        return PendingEvent(
            header: header, headerFields: fields, rawHeader: raw, parent: Envelope.emptyObject, metadata: Envelope.emptyObject,
            content: JSONValue.object(content).compactData, receivedAt: now)
    }

    /// A journal read as `RecentEvents` answers one: each event with its header's ordering key.
    static func entries(
        _ read: (events: [JournaledEvent], through: Int64)
    ) -> (events: [RecentEvents.Entry], through: Int64) {
        (read.events.map { RecentEvents.Entry(event: $0, key: orderingKey($0.header)) }, read.through)
    }

    static func orderingKey(_ header: Data) -> String? {
        guard case .string(let key)? = JSONValue.parse(header)?.object?["key"] else { return nil }
        return key
    }
}
