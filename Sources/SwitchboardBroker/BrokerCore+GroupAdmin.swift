// Operators' requests on the groups endpoint (protocol/README.md, 15.6): list, create, reset and
// delete groups; list, show, replay and drop dead letters. REQUEST and REPLY envelopes as on
// the service plane (12.3). Every change is journaled as a `groups.changed` event naming who
// asked, so the journal is the audit trail.

import CoreMetrics
import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardStorage
import ZeroMQ

/// A refusal of an operator's request, with the REPLY status and code it becomes.
struct GroupRequestFailure: Error {
    var status: Int
    var code: String
    var message: String

    static func badRequest(_ message: String) -> Self { Self(status: 422, code: "invalid-content", message: message) }
    static func notFound(_ message: String) -> Self { Self(status: 404, code: "not-found", message: message) }
}

extension BrokerCore {
    /// The operations that change something: their REPLY 200 means "on disk" (15.3).
    static let changingOperations: Set<String> = ["groups.create", "groups.reset", "groups.delete", "dlq.replay", "dlq.drop"]

    func groupRequest(_ identity: Data, _ parsed: ParsedEnvelope, principal: String?, now: ContinuousClock.Instant) {
        let envelope = parsed.envelope
        let header: RequestHeader
        do {
            header = try envelope.decodeHeader(RequestHeader.self)
            try header.validate()
        } catch {
            let reply = ReplyHeader(
                requestID: parsed.reference, status: 400,
                error: ServiceFailure(code: "bad-request", message: error.message))
            answer(identity, reply, parent: envelope.header, content: Envelope.emptyObject)
            return
        }
        do {
            if let security = broker.security {
                guard let role = security.role(of: principal) else {
                    security.refused("revoked", principal: principal, endpoint: .groups, reason: "principal is no longer allowed")
                    throw GroupRequestFailure(
                        status: 403, code: "forbidden", message: "principal '\(principal ?? "?")' is no longer allowed")
                }
                if let reason = Policy.groupOperation(role, operation: header.operation) {
                    security.refused("group", principal: principal, endpoint: .groups, reason: reason)
                    throw GroupRequestFailure(status: 403, code: "forbidden", message: reason)
                }
            }
            guard case .object(let input) = parsed.content else { throw GroupRequestFailure.badRequest("content must be a JSON object") }
            let result = try runGroupOperation(header.operation, input, by: principal ?? "-", now: now)
            // The change is on disk before the operator hears it is done.
            try flushGroups()
            if Self.changingOperations.contains(header.operation), groups.hasWritesDue {
                // The commit failed (flushGroups keeps what it could not commit): say so, not 200.
                let cause = groupCommitOutage.lastFault?.cause.rawValue ?? "an error"
                throw GroupRequestFailure(
                    status: 503, code: "unavailable",
                    message:
                        "done, but not on disk: the journal could not store it (\(cause)); it is committed with the next commit that succeeds, and lost if the broker stops before"
                )
            }
            answer(identity, ReplyHeader(requestID: header.requestID, status: 200), parent: envelope.header, content: result.compactData)
        } catch let failure as GroupRequestFailure {
            let reply = ReplyHeader(
                requestID: header.requestID, status: failure.status, error: ServiceFailure(code: failure.code, message: failure.message))
            answer(identity, reply, parent: envelope.header, content: Envelope.emptyObject)
        } catch {
            logger.error("group request failed", metadata: ["operation": "\(header.operation)", "error": "\(error)"])
            let reply = ReplyHeader(
                requestID: header.requestID, status: 500,
                error: ServiceFailure(code: "internal", message: "the broker could not do it: \(error)", retryable: true))
            answer(identity, reply, parent: envelope.header, content: Envelope.emptyObject)
        }
    }

    func answer(_ identity: Data, _ header: ReplyHeader, parent: Data, content: Data) {
        guard let data = try? WireJSON.encode(header) else { return }
        reply(identity, Envelope(command: .reply, header: data, parent: parent, content: content), on: groupSocket)
    }

    func runGroupOperation(
        _ operation: String, _ input: [String: JSONValue], by admin: String, now: ContinuousClock.Instant
    ) throws
        -> JSONValue
    {
        func groupName() throws -> String {
            guard case .string(let name)? = input["group"] else {
                throw GroupRequestFailure.badRequest("content: field 'group' is required")
            }
            guard GroupName.isValid(name) else {
                throw GroupRequestFailure.badRequest("content: field 'group' must be 1–64 of a–z 0–9 _ - starting with a letter")
            }
            return name
        }
        func existing() throws -> (String, GroupRuntime) {
            let name = try groupName()
            guard let runtime = groups.groups[name] else { throw GroupRequestFailure.notFound("group '\(name)' not found") }
            return (name, runtime)
        }
        func start() throws -> GroupStart {
            switch input["start"] {
            case nil: return .earliest
            case .string(let text)? where text == "earliest" || text == "head": return GroupStart(text)!
            case .integer(let seq)?: if let start = GroupStart(String(seq)) { return start }
            default: break
            }
            throw GroupRequestFailure.badRequest("content: field 'start' must be \"earliest\", \"head\" or a bus_seq from 1 to 2^53")
        }
        func busSeq() throws -> Int64? {
            do {
                guard let seq = try GroupFields.integer(input, "bus_seq") else { return nil }
                guard seq >= 1 else { throw GroupRequestFailure.badRequest("content: field 'bus_seq' must be at least 1, got \(seq)") }
                return seq
            } catch let error as ProtocolError {
                throw GroupRequestFailure.badRequest(error.message)
            }
        }
        switch operation {
        case "producers.list":
            return .object([
                "producers": .array(
                    producers.entries.keys.sorted().compactMap { name in
                        producers.entries[name].map { describeProducer(name, $0) }
                    })
            ])
        case "groups.list":
            // Dead letters made earlier in this loop iteration are counted only once committed.
            try flushGroups()
            return .object(["groups": .array(try groups.groups.keys.sorted().map { try describeGroup($0) })])
        case "groups.create":
            let name = try groupName()
            let topics: [String]
            do { topics = try GroupFields.topics(input) } catch { throw GroupRequestFailure.badRequest(error.message) }
            let start = try start()
            if let runtime = groups.groups[name] {
                guard Set(runtime.topics) == Set(topics) else {
                    throw GroupRequestFailure(
                        status: 409, code: "conflict", message: "group '\(name)' exists with topics \(runtime.topics)")
                }
                return try describeGroup(name)
            }
            try createGroup(name, topics: topics, start: start)
            audit(
                "created", group: name, by: admin,
                extra: ["topics": .array(topics.map(JSONValue.string)), "start": .string(start.description)])
            return try describeGroup(name)
        case "groups.reset":
            let (name, runtime) = try existing()
            let start = try start()
            let cursor: Int64
            switch start {
            case .earliest: cursor = journal.first - 1
            case .head: cursor = journal.head
            case .sequence(let seq): cursor = max(seq - 1, journal.first - 1)
            }
            // Attempt numbers go on for the deliveries in flight now: a member's late settle of
            // one of them never matches the event's next delivery (it is `not-held`, 15.5).
            var inFlight: [Int64: GroupAttempts] = [:]
            for (busSeq, entry) in runtime.state.entries {
                if case .inFlight = entry.phase { inFlight[busSeq] = GroupAttempts(count: entry.attempts, lastFailure: nil) }
            }
            var fresh = runtime
            fresh.state = ConsumerGroupState(
                name: name, settings: groups.settings, restoring: GroupSnapshot(cursor: cursor, attempts: inFlight))
            fresh.start = start.description
            var actions: [GroupAction] = []
            // Members stay: they join the new machine with their credit; what they held is stale.
            for (member, info) in runtime.members {
                actions += (try? fresh.state.join(member: member, name: info.name, credit: info.credit, now: now)) ?? []
            }
            _ = fresh.state.takeChanges()
            groups.groups[name] = fresh
            groups.writes.append(.reset(group: name, cursor: cursor, start: start.description))
            audit("reset", group: name, by: admin, extra: ["start": .string(start.description)])
            try perform(actions, group: name, now: now)
            return try describeGroup(name)
        case "groups.delete":
            let (name, runtime) = try existing()
            for member in runtime.members.keys {
                groups.connections[member.rawValue]?.remove(name)
                if groups.connections[member.rawValue]?.isEmpty == true { groups.connections[member.rawValue] = nil }
            }
            groups.groups[name] = nil
            metrics.dropGroup(name)
            groups.writes.append(.delete(group: name))
            audit("deleted", group: name, by: admin, extra: [:])
            return .object(["deleted": .string(name)])
        case "dlq.list":
            // A group that does not exist has no dead letters (deleting a group deletes them): say so.
            let name: String? = input["group"] == nil ? nil : try existing().0
            var state: DeadLetterRecord.State? = .dead
            if let given = input["state"] {
                guard case .string(let text) = given, text == "all" || DeadLetterRecord.State(rawValue: text) != nil else {
                    throw GroupRequestFailure.badRequest("content: field 'state' must be dead, replayed, dropped or all")
                }
                state = DeadLetterRecord.State(rawValue: text)
            }
            var limit = 100
            if let given = input["limit"] {
                guard case .integer(let value) = given, (1...1000).contains(value) else {
                    throw GroupRequestFailure.badRequest("content: field 'limit' must be an integer from 1 to 1000")
                }
                limit = Int(value)
            }
            var newest = false
            if let given = input["order"] {
                guard case .string(let text) = given, text == "oldest" || text == "newest" else {
                    throw GroupRequestFailure.badRequest("content: field 'order' must be oldest or newest")
                }
                newest = text == "newest"
            }
            var cursor: Journal.DeadLetterCursor?
            if let given = input["after"] {
                guard case .string(let text) = given, let parsed = Journal.DeadLetterCursor(text: text) else {
                    throw GroupRequestFailure.badRequest("content: field 'after' must be a 'next' this broker gave")
                }
                cursor = parsed
            }
            try flushGroups()
            // One more than the page, to know whether another follows; and the page stops before
            // its content passes what a REPLY may carry (section 4), whatever the messages' length.
            let records = try journal.deadLetterPage(group: name, state: state, after: cursor, newest: newest, limit: limit + 1)
            var page: [JSONValue] = []
            var bytes = 0
            var last: DeadLetterRecord?
            for record in records.prefix(limit) {
                let described = describe(record)
                bytes += described.compactData.count + 1
                if bytes > Self.deadLetterPageBytes && !page.isEmpty { break }
                page.append(described)
                last = record
            }
            let codes = try journal.deadLetterCodes(group: name, state: state)
            var result: [String: JSONValue] = [
                "dead_letters": .array(page), "total": .integer(Int64(codes.values.reduce(0, +))),
                "by_code": .object(codes.mapValues { .integer(Int64($0)) }),
            ]
            if let last, page.count < records.count {
                result["next"] = .string(Journal.DeadLetterCursor(at: last.at, group: last.group, busSeq: last.busSeq).text)
            }
            return .object(result)
        case "dlq.show":
            let (name, _) = try existing()
            guard let seq = try busSeq() else { throw GroupRequestFailure.badRequest("content: field 'bus_seq' is required") }
            try flushGroups()
            guard let letter = try journal.deadLetter(group: name, busSeq: seq) else {
                throw GroupRequestFailure.notFound("group '\(name)' has no dead letter for bus_seq \(seq)")
            }
            var result = describe(letter).object ?? [:]
            if let event = try journal.events([seq]).first {
                result["event"] = .object([
                    "header": JSONValue.parse(event.header) ?? .null, "content": JSONValue.parse(event.content) ?? .null,
                ])
            }
            return .object(result)
        case "dlq.replay", "dlq.drop":
            let (name, _) = try existing()
            let seq = try busSeq()
            let all: Bool
            if case .bool(true)? = input["all"] { all = true } else { all = false }
            guard (seq != nil) != all else {
                throw GroupRequestFailure.badRequest("content: give either 'bus_seq' or \"all\": true")
            }
            // With "all": optionally only one code's, only those older than a moment, and at most
            // `limit` in this call (`remaining` says how many more match), so a tool can act on
            // ten thousand in steps and show its progress.
            var filter = Journal.DeadLetterFilter(group: name, state: .dead, busSeq: seq)
            var limit = 100_000
            if all {
                if let given = input["code"] {
                    guard case .string(let code) = given, !code.isEmpty, code.count <= 64 else {
                        throw GroupRequestFailure.badRequest("content: field 'code' must be a dead letter's code (1-64 characters)")
                    }
                    filter.code = code
                }
                if let given = input["before"] {
                    guard case .string(let text) = given, let milliseconds = Timestamp.parse(text) else {
                        throw GroupRequestFailure.badRequest("content: field 'before' must be an RFC 3339 time")
                    }
                    filter.before = milliseconds
                }
                if let given = input["limit"] {
                    guard case .integer(let value) = given, (1...10_000).contains(value) else {
                        throw GroupRequestFailure.badRequest("content: field 'limit' must be an integer from 1 to 10000")
                    }
                    limit = Int(value)
                }
            } else if input["code"] != nil || input["before"] != nil || input["limit"] != nil {
                throw GroupRequestFailure.badRequest("content: 'code', 'before' and 'limit' go with \"all\": true, not with 'bus_seq'")
            }
            try flushGroups()
            let letters = try journal.deadLetterPage(filter, after: nil, newest: false, limit: limit)
            guard !letters.isEmpty else {
                throw GroupRequestFailure.notFound("group '\(name)' has no dead letter waiting\(seq.map { " for bus_seq \($0)" } ?? "")")
            }
            let replay = operation == "dlq.replay"
            if replay {
                // All or nothing: a replay that cannot be done changes nothing.
                let retained = Set(try journal.events(letters.map(\.busSeq)).map(\.busSeq))
                if let gone = letters.first(where: { !retained.contains($0.busSeq) }) {
                    throw GroupRequestFailure(
                        status: 409, code: "conflict",
                        message: "bus_seq \(gone.busSeq) is no longer journaled (retention): it cannot be replayed")
                }
            }
            for letter in letters {
                if replay {
                    if let actions = groups.withGroup(name, { $0.state.reopen(busSeq: letter.busSeq, key: letter.key, now: now) }) {
                        try perform(actions, group: name, now: now)
                    }
                }
                groups.writes.append(.deadLetterState(group: name, busSeq: letter.busSeq, state: replay ? .replayed : .dropped))
                audit(replay ? "dlq-replayed" : "dlq-dropped", group: name, by: admin, extra: ["bus_seq": .integer(letter.busSeq)])
            }
            var result: [String: JSONValue] = [replay ? "replayed" : "dropped": .array(letters.map { .integer($0.busSeq) })]
            if all {
                // What still matches once these are settled (they leave state dead with this commit).
                result["remaining"] = .integer(Int64(max(0, try journal.deadLetterCodes(filter).values.reduce(0, +) - letters.count)))
            }
            return .object(result)
        default:
            throw GroupRequestFailure(
                status: 404, code: "unknown-operation",
                message:
                    "the groups endpoint has no operation '\(operation)' (groups.list, groups.create, groups.reset, groups.delete, dlq.list, dlq.show, dlq.replay, dlq.drop, producers.list)"
            )
        }
    }

    /// A `groups.changed` event: who changed which group how (journaled with the next commit).
    func audit(_ action: String, group: String, by admin: String, extra: [String: JSONValue]) {
        var content = extra
        content["action"] = .string(action)
        content["group"] = .string(group)
        content["by"] = .string(admin)
        content["at"] = .string(Timestamp.now())
        guard let event = brokerEvent(type: "groups.changed", schema: "groups.changed/1", content: content) else { return }
        groups.audits.append(event)
        logger.notice("group changed", metadata: ["action": "\(action)", "group": "\(group)", "by": "\(admin)"])
    }

    func describeGroup(_ name: String) throws -> JSONValue {
        guard let runtime = groups.groups[name] else { return .null }
        let status = runtime.state.status
        let lag = try journal.count(after: status.cursor, topics: runtime.topics)
        let counts = try journal.deadLetterCounts()[name] ?? [:]
        return .object([
            "name": .string(name), "topics": .array(runtime.topics.map(JSONValue.string)), "start": .string(runtime.start),
            "cursor": .integer(status.cursor), "head": .integer(journal.head), "lag": .integer(lag),
            "pending": .integer(Int64(status.pending)), "waiting": .integer(Int64(status.waiting)), "ready": .integer(Int64(status.ready)),
            "redeliveries": .integer(Int64(status.redeliveries)),
            "dead_letters": .object([
                "dead": .integer(Int64(counts[.dead] ?? 0)), "replayed": .integer(Int64(counts[.replayed] ?? 0)),
                "dropped": .integer(Int64(counts[.dropped] ?? 0)),
            ]),
            "members": .array(
                status.members.map { member in
                    .object([
                        "name": .string(member.name), "credit": .integer(Int64(member.credit)),
                        "in_flight": .integer(Int64(member.inFlight)),
                    ])
                }),
        ])
    }

    func describeProducer(_ name: String, _ health: ProducerHealth) -> JSONValue {
        var fields: [String: JSONValue] = ["name": .string(name), "last_seen": .string(Timestamp.format(health.lastSeen))]
        if let at = health.lastEvent { fields["last_event"] = .string(Timestamp.format(at)) }
        if let at = health.lastDelivery { fields["last_ack"] = .string(Timestamp.format(at)) }
        if let outbox = health.outbox { fields["outbox"] = .integer(outbox) }
        return .object(fields)
    }

    /// The most a `dlq.list` page's records take, encoded: well under section 4's 256 KiB of
    /// content, with room for the counts beside them.
    static let deadLetterPageBytes = 192 << 10

    func describe(_ letter: DeadLetterRecord) -> JSONValue {
        var fields: [String: JSONValue] = [
            "group": .string(letter.group), "bus_seq": .integer(letter.busSeq), "event_id": .string(letter.eventID),
            "type": .string(letter.type), "attempts": .integer(Int64(letter.attempts)), "code": .string(letter.code),
            "message": .string(letter.message), "at": .string(Timestamp.format(milliseconds: letter.at)),
            "state": .string(letter.state.rawValue),
        ]
        if let seq = letter.dlqSeq { fields["dlq_seq"] = .integer(seq) }
        if let key = letter.key { fields["key"] = .string(key) }
        return .object(fields)
    }
}
