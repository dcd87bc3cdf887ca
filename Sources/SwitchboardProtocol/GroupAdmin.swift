// Operators' requests on the groups endpoint (protocol/README.md, 15.6), as types: the nine
// operation names (spelt here only), each request's content, and each result. The broker reads
// requests with `GroupAdminRequest(_:content:)` and writes results with `WireJSON`; the client
// writes requests with `content` and reads results with `JSONDecoder`; `Policy` asks the
// operation whether it only reads.
//
// Requests are read with the protocol's own field reader (`WireObject`), as JOIN is, so a refusal
// names its field in the words section 15.6 promises (`content: field 'group' is required`).

public import Foundation

/// An operation of the groups endpoint (15.6).
public enum GroupOperation: String, Sendable, Hashable, CaseIterable {
    case listGroups = "groups.list"
    case createGroup = "groups.create"
    case resetGroup = "groups.reset"
    case deleteGroup = "groups.delete"
    case listDeadLetters = "dlq.list"
    case showDeadLetter = "dlq.show"
    case replayDeadLetters = "dlq.replay"
    case dropDeadLetters = "dlq.drop"
    case listProducers = "producers.list"

    /// Counts and names, no event content: open to every role that reaches the endpoint (13.3).
    public var onlyReads: Bool { self == .listGroups || self == .listDeadLetters || self == .listProducers }

    /// Whether it changes something: its REPLY 200 means "on disk" (15.3).
    public var changes: Bool {
        switch self {
        case .createGroup, .resetGroup, .deleteGroup, .replayDeadLetters, .dropDeadLetters: true
        case .listGroups, .listDeadLetters, .showDeadLetter, .listProducers: false
        }
    }
}

/// One operator's request: the operation with its content, checked.
public enum GroupAdminRequest: Sendable, Hashable {
    case listGroups
    /// Makes `group` reading `topics` from `start` (nil: the broker's default, earliest).
    case createGroup(group: String, topics: [String], start: GroupStart?)
    /// Starts `group` again at `start` (nil: earliest).
    case resetGroup(group: String, start: GroupStart?)
    case deleteGroup(group: String)
    case listDeadLetters(DeadLetterQuery)
    case showDeadLetter(group: String, busSeq: Int64)
    case replayDeadLetters(group: String, DeadLetterSelection)
    case dropDeadLetters(group: String, DeadLetterSelection)
    case listProducers

    public var operation: GroupOperation {
        switch self {
        case .listGroups: .listGroups
        case .createGroup: .createGroup
        case .resetGroup: .resetGroup
        case .deleteGroup: .deleteGroup
        case .listDeadLetters: .listDeadLetters
        case .showDeadLetter: .showDeadLetter
        case .replayDeadLetters: .replayDeadLetters
        case .dropDeadLetters: .dropDeadLetters
        case .listProducers: .listProducers
        }
    }

    /// Reads the content of a REQUEST for `operation`.
    /// - Throws: a `schema-violation` naming the field (the broker's 422 `invalid-content`).
    public init(_ operation: GroupOperation, content fields: [String: JSONValue]) throws(ProtocolError) {
        let object = WireObject(fields: fields, frame: "content", code: .schemaViolation)
        switch operation {
        case .listGroups: self = .listGroups
        case .listProducers: self = .listProducers
        case .createGroup:
            self = .createGroup(group: try object.groupName(), topics: try object.topics("topics"), start: try object.start())
        case .resetGroup: self = .resetGroup(group: try object.groupName(), start: try object.start())
        case .deleteGroup: self = .deleteGroup(group: try object.groupName())
        case .listDeadLetters: self = .listDeadLetters(try DeadLetterQuery(object))
        case .showDeadLetter:
            let group = try object.groupName()
            guard let busSeq = try object.busSeq() else { throw object.fail("bus_seq", "is required") }
            self = .showDeadLetter(group: group, busSeq: busSeq)
        case .replayDeadLetters: self = .replayDeadLetters(group: try object.groupName(), try DeadLetterSelection(object))
        case .dropDeadLetters: self = .dropDeadLetters(group: try object.groupName(), try DeadLetterSelection(object))
        }
    }

    /// The REQUEST's content.
    public var content: JSONValue {
        var fields: [String: JSONValue] = [:]
        switch self {
        case .listGroups, .listProducers: break
        case .createGroup(let group, let topics, let start):
            fields = ["group": .string(group), "topics": .array(topics.map(JSONValue.string))]
            if let start { fields["start"] = start.json }
        case .resetGroup(let group, let start):
            fields = ["group": .string(group)]
            if let start { fields["start"] = start.json }
        case .deleteGroup(let group): fields = ["group": .string(group)]
        case .listDeadLetters(let query): fields = query.fields
        case .showDeadLetter(let group, let busSeq): fields = ["group": .string(group), "bus_seq": .integer(busSeq)]
        case .replayDeadLetters(let group, let selection), .dropDeadLetters(let group, let selection):
            fields = selection.fields
            fields["group"] = .string(group)
        }
        return .object(fields)
    }
}

/// `dlq.list`'s content: which dead letters, in which order, from where.
public struct DeadLetterQuery: Sendable, Hashable {
    /// Every group's when nil.
    public var group: String?
    /// Every state when nil.
    public var state: DeadLetterInfo.State?
    /// 1–1000.
    public var limit: Int
    /// Newest first (else oldest first).
    public var newest: Bool
    /// A page's `next`: the page after it.
    public var after: String?

    public static let maximumLimit = 1000

    public init(group: String? = nil, state: DeadLetterInfo.State? = .dead, limit: Int = 100, newest: Bool = false, after: String? = nil) {
        self.group = group
        self.state = state
        self.limit = limit
        self.newest = newest
        self.after = after
    }

    init(_ object: WireObject) throws(ProtocolError) {
        if object.fields["group"] != nil { group = try object.groupName() } else { group = nil }
        state = .dead
        if let given = object.fields["state"] {
            guard case .string(let text) = given, text == "all" || DeadLetterInfo.State(rawValue: text) != nil else {
                throw object.fail("state", "must be dead, replayed, dropped or all")
            }
            state = DeadLetterInfo.State(rawValue: text)
        }
        limit = 100
        if let given = object.fields["limit"] {
            guard case .integer(let value) = given, (1...Int64(Self.maximumLimit)).contains(value) else {
                throw object.fail("limit", "must be an integer from 1 to \(Self.maximumLimit)")
            }
            limit = Int(value)
        }
        newest = false
        if let given = object.fields["order"] {
            guard case .string(let text) = given, text == "oldest" || text == "newest" else {
                throw object.fail("order", "must be oldest or newest")
            }
            newest = text == "newest"
        }
        after = nil
        if let given = object.fields["after"] {
            // Whether this broker gave it is the broker's to say.
            guard case .string(let text) = given else { throw object.fail("after", "must be a 'next' this broker gave") }
            after = text
        }
    }

    var fields: [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "state": .string(state?.rawValue ?? "all"), "limit": .integer(Int64(limit)), "order": .string(newest ? "newest" : "oldest"),
        ]
        if let group { fields["group"] = .string(group) }
        if let after { fields["after"] = .string(after) }
        return fields
    }
}

/// Which of a group's waiting dead letters `dlq.replay` and `dlq.drop` act on.
public enum DeadLetterSelection: Sendable, Hashable {
    /// The one for this event.
    case busSeq(Int64)
    /// Every one waiting (state `dead`).
    case all
    /// The waiting ones of `code` (any when nil) recorded before `before` (RFC 3339; any when
    /// nil), at most `limit` (1–10 000; when nil, all) in this call.
    case matching(code: String?, before: String?, limit: Int?)

    public static let maximumLimit = 10_000

    init(_ object: WireObject) throws(ProtocolError) {
        let busSeq = try object.busSeq()
        let all: Bool
        if case .bool(true)? = object.fields["all"] { all = true } else { all = false }
        guard (busSeq != nil) != all else {
            throw ProtocolError(.schemaViolation, "content: give either 'bus_seq' or \"all\": true")
        }
        let fields = object.fields
        if let busSeq {
            guard fields["code"] == nil, fields["before"] == nil, fields["limit"] == nil else {
                throw ProtocolError(.schemaViolation, "content: 'code', 'before' and 'limit' go with \"all\": true, not with 'bus_seq'")
            }
            self = .busSeq(busSeq)
            return
        }
        var code: String?
        if let given = fields["code"] {
            guard case .string(let text) = given, !text.isEmpty, text.count <= 64 else {
                throw object.fail("code", "must be a dead letter's code (1-64 characters)")
            }
            code = text
        }
        var before: String?
        if let given = fields["before"] {
            guard case .string(let text) = given, Timestamp.parse(text) != nil else {
                throw object.fail("before", "must be an RFC 3339 time")
            }
            before = text
        }
        var limit: Int?
        if let given = fields["limit"] {
            guard case .integer(let value) = given, (1...Int64(Self.maximumLimit)).contains(value) else {
                throw object.fail("limit", "must be an integer from 1 to \(Self.maximumLimit)")
            }
            limit = Int(value)
        }
        self = code == nil && before == nil && limit == nil ? .all : .matching(code: code, before: before, limit: limit)
    }

    var fields: [String: JSONValue] {
        switch self {
        case .busSeq(let seq): return ["bus_seq": .integer(seq)]
        case .all: return ["all": .bool(true)]
        case .matching(let code, let before, let limit):
            var fields: [String: JSONValue] = ["all": .bool(true)]
            if let code { fields["code"] = .string(code) }
            if let before { fields["before"] = .string(before) }
            if let limit { fields["limit"] = .integer(Int64(limit)) }
            return fields
        }
    }
}

extension WireObject {
    fileprivate func groupName() throws(ProtocolError) -> String {
        let name = try string("group")
        guard GroupName.isValid(name) else { throw fail("group", "must be 1–64 of a–z 0–9 _ - starting with a letter") }
        return name
    }

    fileprivate func start() throws(ProtocolError) -> GroupStart? {
        switch fields["start"] {
        case nil: return nil
        case .string(let text)? where text == "earliest" || text == "head": return GroupStart(text)
        case .integer(let seq)?: if let start = GroupStart(String(seq)) { return start }
        default: break
        }
        throw fail("start", "must be \"earliest\", \"head\" or a bus_seq from 1 to 2^53")
    }

    fileprivate func busSeq() throws(ProtocolError) -> Int64? {
        guard let seq = try optionalInteger("bus_seq") else { return nil }
        guard seq >= 1 else { throw fail("bus_seq", "must be at least 1, got \(seq)") }
        return seq
    }
}

// MARK: Results

/// `groups.list`'s result.
public struct GroupList: Codable, Sendable, Hashable {
    /// Sorted by name.
    public var groups: [GroupInfo]

    public init(groups: [GroupInfo]) { self.groups = groups }
}

/// `groups.delete`'s result.
public struct GroupDeleted: Codable, Sendable, Hashable {
    public var deleted: String

    public init(deleted: String) { self.deleted = deleted }
}

/// `producers.list`'s result.
public struct ProducerList: Codable, Sendable, Hashable {
    /// Sorted by name.
    public var producers: [ProducerInfo]

    public init(producers: [ProducerInfo]) { self.producers = producers }
}

/// `dlq.replay`'s and `dlq.drop`'s result: the bus_seqs acted on, and with `"all"` how many
/// still match.
public struct DeadLetterSettled: Codable, Sendable, Hashable {
    public var replayed: [Int64]?
    public var dropped: [Int64]?
    public var remaining: Int?

    public init(replayed: [Int64]? = nil, dropped: [Int64]? = nil, remaining: Int? = nil) {
        self.replayed = replayed
        self.dropped = dropped
        self.remaining = remaining
    }
}

/// One producer of `producers.list` (protocol/README.md, 15.6).
public struct ProducerInfo: Codable, Sendable, Hashable {
    public var name: String
    /// RFC 3339: its last HEARTBEAT or EVENT.
    public var lastSeen: String
    /// RFC 3339: its last event newly journaled, if any since the broker started.
    public var lastEvent: String?
    /// Events waiting in its outbox, from its last HEARTBEAT.
    public var outbox: Int64?
    /// RFC 3339: its last ACK, from its last HEARTBEAT.
    public var lastAck: String?

    public init(name: String, lastSeen: String, lastEvent: String? = nil, outbox: Int64? = nil, lastAck: String? = nil) {
        self.name = name
        self.lastSeen = lastSeen
        self.lastEvent = lastEvent
        self.outbox = outbox
        self.lastAck = lastAck
    }

    enum CodingKeys: String, CodingKey {
        case name, outbox, lastSeen = "last_seen", lastEvent = "last_event", lastAck = "last_ack"
    }
}

/// A consumer group as `groups.list`, `groups.create` and `groups.reset` describe it.
public struct GroupInfo: Codable, Sendable, Hashable {
    /// A member connection and what it holds.
    public struct Member: Codable, Sendable, Hashable {
        public var name: String
        public var credit: Int
        public var inFlight: Int

        public init(name: String, credit: Int, inFlight: Int) {
            self.name = name
            self.credit = credit
            self.inFlight = inFlight
        }

        enum CodingKeys: String, CodingKey { case name, credit, inFlight = "in_flight" }
    }

    /// The group's dead letters by state.
    public struct DeadLetterCounts: Codable, Sendable, Hashable {
        public var dead: Int
        public var replayed: Int
        public var dropped: Int

        public init(dead: Int, replayed: Int, dropped: Int) {
            self.dead = dead
            self.replayed = replayed
            self.dropped = dropped
        }
    }

    public var name: String
    /// The type prefixes it takes.
    public var topics: [String]
    /// Where it was created (or last reset) to start: `earliest`, `head` or a bus_seq.
    public var start: String
    /// Every matching event up to here is settled.
    public var cursor: Int64
    /// The journal's head when the broker answered.
    public var head: Int64
    /// Matching events journaled after the cursor.
    public var lag: Int64
    /// In flight to members.
    public var pending: Int
    /// Waiting out a NACK's back-off.
    public var waiting: Int
    /// Unsettled and deliverable once a member has credit (and its key allows).
    public var ready: Int
    /// Deliveries after the first, since the broker started.
    public var redeliveries: Int
    public var deadLetters: DeadLetterCounts
    /// In the order they joined.
    public var members: [Member]

    public init(
        name: String, topics: [String], start: String, cursor: Int64, head: Int64, lag: Int64, pending: Int, waiting: Int, ready: Int,
        redeliveries: Int, deadLetters: DeadLetterCounts, members: [Member]
    ) {
        self.name = name
        self.topics = topics
        self.start = start
        self.cursor = cursor
        self.head = head
        self.lag = lag
        self.pending = pending
        self.waiting = waiting
        self.ready = ready
        self.redeliveries = redeliveries
        self.deadLetters = deadLetters
        self.members = members
    }

    enum CodingKeys: String, CodingKey {
        case name, topics, start, cursor, head, lag, pending, waiting, ready, redeliveries, deadLetters = "dead_letters", members
    }
}

/// A dead letter as `dlq.list` describes it: which event, why, and what became of it.
public struct DeadLetterInfo: Codable, Sendable, Hashable {
    public enum State: String, Codable, Sendable, Hashable, CaseIterable {
        /// Waiting for an operator.
        case dead
        /// Put back to its group (a later failure makes it dead again).
        case replayed
        /// The group will not see it again.
        case dropped
    }

    public var group: String
    public var busSeq: Int64
    public var eventID: String
    public var type: String
    public var key: String?
    /// Deliveries made before the group gave up.
    public var attempts: Int
    /// Why, as the last failure said (`bad-data`, `ack-timeout`, …).
    public var code: String
    public var message: String
    /// When it became a dead letter (RFC 3339).
    public var at: String
    public var state: State
    /// The `dlq.<group>` event that reported it.
    public var dlqSeq: Int64?

    public init(
        group: String, busSeq: Int64, eventID: String, type: String, key: String? = nil, attempts: Int, code: String, message: String,
        at: String, state: State, dlqSeq: Int64? = nil
    ) {
        self.group = group
        self.busSeq = busSeq
        self.eventID = eventID
        self.type = type
        self.key = key
        self.attempts = attempts
        self.code = code
        self.message = message
        self.at = at
        self.state = state
        self.dlqSeq = dlqSeq
    }

    enum CodingKeys: String, CodingKey {
        case group, busSeq = "bus_seq", eventID = "event_id", type, key, attempts, code, message, at, state, dlqSeq = "dlq_seq"
    }
}

/// One page of `dlq.list`: its dead letters, the counts of every page, and where the next starts.
public struct DeadLetterPage: Codable, Sendable, Hashable {
    public var deadLetters: [DeadLetterInfo]
    /// Dead letters the filter selects, on every page.
    public var total: Int
    /// Those of every page by code (`participant-unmatched`, `ack-timeout`, …).
    public var byCode: [String: Int]
    /// The `after` of the next page; nil on the last.
    public var next: String?

    public init(deadLetters: [DeadLetterInfo], total: Int, byCode: [String: Int], next: String? = nil) {
        self.deadLetters = deadLetters
        self.total = total
        self.byCode = byCode
        self.next = next
    }

    enum CodingKeys: String, CodingKey {
        case deadLetters = "dead_letters", total, byCode = "by_code", next
    }
}

/// `dlq.show`'s result: one dead letter's record with, as `event`, the event it names.
public struct DeadLetterDetail: Codable, Sendable, Hashable {
    public var letter: DeadLetterInfo
    /// The event's journaled header, raw JSON; nil when retention has removed the event.
    public var eventHeader: Data?
    /// The event's content, raw JSON; nil when retention has removed the event.
    public var eventContent: Data?

    public init(letter: DeadLetterInfo, eventHeader: Data? = nil, eventContent: Data? = nil) {
        self.letter = letter
        self.eventHeader = eventHeader
        self.eventContent = eventContent
    }

    private enum CodingKeys: String, CodingKey { case event }
    private enum EventKeys: String, CodingKey { case header, content }

    /// The record's fields and `event` side by side in one object.
    public init(from decoder: any Decoder) throws {
        letter = try DeadLetterInfo(from: decoder)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard container.contains(.event) else { return }
        let event = try container.nestedContainer(keyedBy: EventKeys.self, forKey: .event)
        eventHeader = try event.decodeIfPresent(JSONValue.self, forKey: .header)?.compactData
        eventContent = try event.decodeIfPresent(JSONValue.self, forKey: .content)?.compactData
    }

    public func encode(to encoder: any Encoder) throws {
        try letter.encode(to: encoder)
        guard eventHeader != nil || eventContent != nil else { return }
        var container = encoder.container(keyedBy: CodingKeys.self)
        var event = container.nestedContainer(keyedBy: EventKeys.self, forKey: .event)
        try event.encode(eventHeader.flatMap { JSONValue.parse($0) } ?? .null, forKey: .header)
        try event.encode(eventContent.flatMap { JSONValue.parse($0) } ?? .null, forKey: .content)
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
