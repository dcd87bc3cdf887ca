// Operators' requests on the groups endpoint (protocol/README.md, 15.6), without the endpoint:
// a checked `GroupAdminRequest` in, the result and what the broker thread must then do out.
//
// The coordinator changes the group book (creations, resets, deletions, dead letters reopened),
// reads the journal for what it describes, and never sends or commits anything: the deliveries
// the group machines ask for, the `groups.changed` events and the metrics of a deleted group
// come back as `GroupAdminAction`s for `BrokerCore` to carry out, and the core commits before it
// answers (a 200 means on disk, 15.3). What holds whatever the request:
//
// - A refused request (`GroupRequestFailure`: 404, 409, 422) changes nothing, in the book or in
//   what it will write.
// - Every change is audited: one `groups.changed` action per group created, reset or deleted
//   and per dead letter replayed or dropped, naming who asked.
// - `dlq.replay` is all or nothing: when retention removed one of the events, nothing changes.
//
// Tests drive it with a real journal in a temporary directory and instants, no socket.

import Foundation
import SwitchboardProtocol

/// A refusal of an operator's request, with the REPLY status and code it becomes.
struct GroupRequestFailure: Error, Hashable {
    var status: Int
    var code: String
    var message: String

    static func badRequest(_ message: String) -> Self { Self(status: 422, code: "invalid-content", message: message) }
    static func notFound(_ message: String) -> Self { Self(status: 404, code: "not-found", message: message) }
    static func conflict(_ message: String) -> Self { Self(status: 409, code: "conflict", message: message) }
}

/// What the broker thread does after an operator's request, in order.
enum GroupAdminAction: Hashable {
    /// Carry out what group `group`'s machine asked for (deliveries to its members).
    case perform([GroupAction], group: String)
    /// Journal a `groups.changed` event with the next commit.
    case audit(GroupAudit)
    /// Group `group` is gone: so are its metrics.
    case forget(group: String)
}

/// One `groups.changed` event (15.6): who changed which group how.
struct GroupAudit: Hashable {
    /// `created`, `reset`, `deleted`, `dlq-replayed`, `dlq-dropped`.
    var action: String
    var group: String
    /// The principal that asked; `-` without security.
    var by: String
    /// The action's own fields (`topics` and `start`, `bus_seq`).
    var extra: [String: JSONValue] = [:]
}

/// The result of a request, as its REPLY's content.
enum GroupAdminResult: Hashable {
    case groups(GroupList)
    case group(GroupInfo)
    case deleted(GroupDeleted)
    case deadLetters(DeadLetterPage)
    case deadLetter(DeadLetterDetail)
    case settled(DeadLetterSettled)
    case producers(ProducerList)

    func encoded() throws -> Data {
        switch self {
        case .groups(let value): try WireJSON.encode(value)
        case .group(let value): try WireJSON.encode(value)
        case .deleted(let value): try WireJSON.encode(value)
        case .deadLetters(let value): try WireJSON.encode(value)
        case .deadLetter(let value): try WireJSON.encode(value)
        case .settled(let value): try WireJSON.encode(value)
        case .producers(let value): try WireJSON.encode(value)
        }
    }
}

/// Runs operators' requests against the group book and the journal. Broker thread only (the
/// journal is its).
struct GroupCoordinator {
    let journal: any JournalStore

    /// The most a `dlq.list` page's records take, encoded: well under section 4's 256 KiB of
    /// content, with room for the counts beside them.
    static let deadLetterPageBytes = 192 << 10

    /// Runs `request` for `admin` (a principal, `-` without security).
    /// - Throws: `GroupRequestFailure` for a refusal (nothing changed); any other error is the
    ///   journal's (500).
    func run(
        _ request: GroupAdminRequest, by admin: String, book: inout GroupBook, producers: ProducerTable, now: ContinuousClock.Instant
    ) throws -> (GroupAdminResult, [GroupAdminAction]) {
        switch request {
        case .listProducers:
            let list = producers.entries.keys.sorted().compactMap { name in producers.entries[name].map { describe(name, $0) } }
            return (.producers(ProducerList(producers: list)), [])
        case .listGroups:
            return (.groups(GroupList(groups: try book.groups.keys.sorted().compactMap { try describe(group: $0, in: book) })), [])
        case .createGroup(let name, let topics, let start):
            if let runtime = book.groups[name] {
                guard Set(runtime.topics) == Set(topics) else {
                    throw GroupRequestFailure.conflict("group '\(name)' exists with topics \(runtime.topics)")
                }
                return (.group(try describe(group: name, in: book)!), [])
            }
            let start = start ?? .earliest
            book.create(name, topics: topics, start: start, journal: journal)
            let audit = GroupAudit(
                action: "created", group: name, by: admin,
                extra: ["topics": .array(topics.map(JSONValue.string)), "start": .string(start.description)])
            return (.group(try describe(group: name, in: book)!), [.audit(audit)])
        case .resetGroup(let name, let start):
            let runtime = try existing(name, in: book)
            let start = start ?? .earliest
            let cursor = book.cursor(for: start, journal: journal)
            // Attempt numbers go on for the deliveries in flight now: a member's late settle of
            // one of them never matches the event's next delivery (it is `not-held`, 15.5).
            var inFlight: [Int64: GroupAttempts] = [:]
            for (busSeq, entry) in runtime.state.entries {
                if case .inFlight = entry.phase { inFlight[busSeq] = GroupAttempts(count: entry.attempts, lastFailure: nil) }
            }
            var fresh = runtime
            fresh.state = ConsumerGroupState(
                name: name, settings: book.settings, restoring: GroupSnapshot(cursor: cursor, attempts: inFlight),
                earlierThrough: journal.head)
            fresh.start = start.description
            var deliveries: [GroupAction] = []
            // Members stay: they join the new machine with their credit; what they held is stale.
            for (member, info) in runtime.members {
                deliveries += (try? fresh.state.join(member: member, name: info.name, credit: info.credit, now: now)) ?? []
            }
            _ = fresh.state.takeChanges()
            book.groups[name] = fresh
            book.writes.append(.reset(group: name, cursor: cursor, start: start.description))
            let audit = GroupAudit(action: "reset", group: name, by: admin, extra: ["start": .string(start.description)])
            return (.group(try describe(group: name, in: book)!), [.audit(audit), .perform(deliveries, group: name)])
        case .deleteGroup(let name):
            let runtime = try existing(name, in: book)
            for member in runtime.members.keys {
                book.connections[member.rawValue]?.remove(name)
                if book.connections[member.rawValue]?.isEmpty == true { book.connections[member.rawValue] = nil }
            }
            book.groups[name] = nil
            book.writes.append(.delete(group: name))
            let audit = GroupAudit(action: "deleted", group: name, by: admin)
            return (.deleted(GroupDeleted(deleted: name)), [.audit(audit), .forget(group: name)])
        case .listDeadLetters(let query):
            return (.deadLetters(try page(query, in: book)), [])
        case .showDeadLetter(let name, let busSeq):
            _ = try existing(name, in: book)
            guard let record = try journal.deadLetter(group: name, busSeq: busSeq) else {
                throw GroupRequestFailure.notFound("group '\(name)' has no dead letter for bus_seq \(busSeq)")
            }
            var detail = DeadLetterDetail(letter: Self.describe(record))
            if let event = try journal.events([busSeq]).first {
                detail.eventHeader = event.header
                detail.eventContent = event.content
            }
            return (.deadLetter(detail), [])
        case .replayDeadLetters(let name, let selection):
            return try settle(name, selection, replay: true, by: admin, book: &book, now: now)
        case .dropDeadLetters(let name, let selection):
            return try settle(name, selection, replay: false, by: admin, book: &book, now: now)
        }
    }

    private func existing(_ name: String, in book: GroupBook) throws(GroupRequestFailure) -> GroupRuntime {
        guard let runtime = book.groups[name] else { throw GroupRequestFailure.notFound("group '\(name)' not found") }
        return runtime
    }

    /// One `dlq.list` page.
    private func page(_ query: DeadLetterQuery, in book: GroupBook) throws -> DeadLetterPage {
        var cursor: DeadLetterCursor?
        if let after = query.after {
            guard let parsed = DeadLetterCursor(text: after) else {
                throw GroupRequestFailure.badRequest("content: field 'after' must be a 'next' this broker gave")
            }
            cursor = parsed
        }
        // A group that does not exist has no dead letters (deleting a group deletes them): say so.
        if let group = query.group { _ = try existing(group, in: book) }
        let state = query.state.flatMap { DeadLetterRecord.State(rawValue: $0.rawValue) }
        // One more than the page, to know whether another follows; and the page stops before
        // its content passes what a REPLY may carry (section 4), whatever the messages' length.
        let records = try journal.deadLetterPage(
            group: query.group, state: state, after: cursor, newest: query.newest, limit: query.limit + 1)
        var letters: [DeadLetterInfo] = []
        var bytes = 0
        var last: DeadLetterRecord?
        for record in records.prefix(query.limit) {
            let letter = Self.describe(record)
            bytes += (try WireJSON.encode(letter)).count + 1
            if bytes > Self.deadLetterPageBytes && !letters.isEmpty { break }
            letters.append(letter)
            last = record
        }
        let codes = try journal.deadLetterCodes(group: query.group, state: state)
        var next: String?
        if let last, letters.count < records.count {
            next = DeadLetterCursor(at: last.at, group: last.group, busSeq: last.busSeq).text
        }
        return DeadLetterPage(deadLetters: letters, total: codes.values.reduce(0, +), byCode: codes, next: next)
    }

    /// `dlq.replay` (`replay`) or `dlq.drop`.
    private func settle(
        _ name: String, _ selection: DeadLetterSelection, replay: Bool, by admin: String, book: inout GroupBook,
        now: ContinuousClock.Instant
    ) throws -> (GroupAdminResult, [GroupAdminAction]) {
        _ = try existing(name, in: book)
        // With a filter: optionally only one code's, only those older than a moment, and at most
        // `limit` in this call (`remaining` says how many more match), so a tool can act on ten
        // thousand in steps and show its progress.
        var filter = DeadLetterFilter(group: name, state: .dead)
        var limit = 100_000
        switch selection {
        case .busSeq(let seq): filter.busSeq = seq
        case .all: break
        case .matching(let code, let before, let most):
            filter.code = code
            filter.before = before.flatMap { Timestamp.parse($0) }
            limit = most ?? limit
        }
        let letters = try journal.deadLetterPage(filter, after: nil, newest: false, limit: limit)
        guard !letters.isEmpty else {
            throw GroupRequestFailure.notFound(
                "group '\(name)' has no dead letter waiting\(filter.busSeq.map { " for bus_seq \($0)" } ?? "")")
        }
        if replay {
            // All or nothing: a replay that cannot be done changes nothing.
            let retained = Set(try journal.events(letters.map(\.busSeq)).map(\.busSeq))
            if let gone = letters.first(where: { !retained.contains($0.busSeq) }) {
                throw GroupRequestFailure.conflict("bus_seq \(gone.busSeq) is no longer journaled (retention): it cannot be replayed")
            }
        }
        var actions: [GroupAdminAction] = []
        for letter in letters {
            if replay, let deliveries = book.withGroup(name, { $0.state.reopen(busSeq: letter.busSeq, key: letter.key, now: now) }) {
                actions.append(.perform(deliveries, group: name))
            }
            book.writes.append(.deadLetterState(group: name, busSeq: letter.busSeq, state: replay ? .replayed : .dropped))
            actions.append(
                .audit(
                    GroupAudit(
                        action: replay ? "dlq-replayed" : "dlq-dropped", group: name, by: admin, extra: ["bus_seq": .integer(letter.busSeq)]
                    )))
        }
        let seqs = letters.map(\.busSeq)
        var result = replay ? DeadLetterSettled(replayed: seqs) : DeadLetterSettled(dropped: seqs)
        if case .busSeq = selection {
        } else {
            // What still matches once these are settled (they leave state dead with this commit).
            result.remaining = max(0, try journal.deadLetterCodes(filter).values.reduce(0, +) - letters.count)
        }
        return (.settled(result), actions)
    }

    // MARK: Describing

    /// A group as results show it; nil when there is no such group.
    func describe(group name: String, in book: GroupBook) throws -> GroupInfo? {
        guard let runtime = book.groups[name] else { return nil }
        let status = runtime.state.status
        let lag = try journal.count(after: status.cursor, topics: runtime.topics)
        let counts = try journal.deadLetterCounts()[name] ?? [:]
        return GroupInfo(
            name: name, topics: runtime.topics, start: runtime.start, cursor: status.cursor, head: journal.head, lag: lag,
            pending: status.pending, waiting: status.waiting, ready: status.ready, redeliveries: status.redeliveries,
            deadLetters: GroupInfo.DeadLetterCounts(
                dead: counts[.dead] ?? 0, replayed: counts[.replayed] ?? 0, dropped: counts[.dropped] ?? 0),
            members: status.members.map { GroupInfo.Member(name: $0.name, credit: $0.credit, inFlight: $0.inFlight) })
    }

    func describe(_ name: String, _ health: ProducerHealth) -> ProducerInfo {
        ProducerInfo(
            name: name, lastSeen: Timestamp.format(health.lastSeen), lastEvent: health.lastEvent.map { Timestamp.format($0) },
            outbox: health.outbox, lastAck: health.lastDelivery.map { Timestamp.format($0) })
    }

    static func describe(_ letter: DeadLetterRecord) -> DeadLetterInfo {
        DeadLetterInfo(
            group: letter.group, busSeq: letter.busSeq, eventID: letter.eventID, type: letter.type, key: letter.key,
            attempts: letter.attempts, code: letter.code, message: letter.message, at: Timestamp.format(milliseconds: letter.at),
            state: DeadLetterInfo.State(rawValue: letter.state.rawValue) ?? .dead, dlqSeq: letter.dlqSeq)
    }
}

extension GroupBook {
    /// Where a group starting at `start` has its cursor: the sequence before its first event.
    func cursor(for start: GroupStart, journal: any JournalStore) -> Int64 {
        switch start {
        case .earliest: journal.first - 1
        case .head: journal.head
        case .sequence(let seq): max(seq - 1, journal.first - 1)
        }
    }

    /// Makes group `name` at `start`, to be written with the next commit.
    mutating func create(_ name: String, topics: [String], start: GroupStart, journal: any JournalStore) {
        let cursor = cursor(for: start, journal: journal)
        let createdAt = Int64(Date().timeIntervalSince1970 * 1000)
        groups[name] = GroupRuntime(
            name: name, topics: topics, createdAt: createdAt, start: start.description,
            state: ConsumerGroupState(
                name: name, settings: settings, restoring: GroupSnapshot(cursor: cursor), earlierThrough: journal.head))
        writes.append(.create(name: name, topics: topics, cursor: cursor, createdAt: createdAt, start: start.description))
    }
}
