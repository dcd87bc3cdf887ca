// Consumer groups on the wire (protocol/README.md, section 15): a member joins a named group
// on the broker's groups endpoint, receives DELIVERs, and settles each with ACK, NACK, TERM or
// PROGRESS. Headers here are checked the way the event plane's are: the error names the field.

public import Foundation

/// Group names: 1–64 of `a–z 0–9 _ -`, starting with a letter (`filemaker`, `eto`).
public enum GroupName {
    public static func isValid(_ name: String) -> Bool {
        withUTF8Bytes(name) { bytes in
            guard let first = bytes.first, (97...122).contains(first), bytes.count <= 64 else { return false }
            return bytes.allSatisfy { c in (97...122).contains(c) || (48...57).contains(c) || c == 95 || c == 45 }
        }
    }

    public static func check(_ name: String, field: String = "group") throws(ProtocolError) {
        guard isValid(name) else {
            throw ProtocolError(
                .invalidHeader, "header: field '\(field)' must be 1–64 of a–z 0–9 _ - starting with a letter, got '\(name.prefix(64))'")
        }
    }
}

/// Where a new group starts reading the journal.
public enum GroupStart: Sendable, Hashable, CustomStringConvertible {
    /// The earliest event still journaled (nothing retained is skipped).
    case earliest
    /// After the current head: only events journaled from now on.
    case head
    /// At this `bus_seq` (events from it on).
    case sequence(Int64)

    public var description: String {
        switch self {
        case .earliest: "earliest"
        case .head: "head"
        case .sequence(let seq): "\(seq)"
        }
    }

    /// `earliest`, `head` or a `bus_seq` ≥ 1.
    public init?(_ text: String) {
        switch text {
        case "earliest": self = .earliest
        case "head": self = .head
        default:
            guard let seq = Int64(text), seq >= 1, seq <= FetchHeader.maximumSequence else { return nil }
            self = .sequence(seq)
        }
    }

    var json: JSONValue {
        switch self {
        case .earliest: .string("earliest")
        case .head: .string("head")
        case .sequence(let seq): .integer(seq)
        }
    }
}

/// JOIN (member → groups endpoint): join `group`, creating it if it does not exist.
public struct JoinHeader: Sendable, Hashable {
    public var group: String
    /// Type prefixes the group takes (1–32; the group's filter when it is created, and it must
    /// match the existing group's filter otherwise).
    public var topics: [String]
    /// Deliveries in flight to this member at once (1–1000).
    public var credit: Int
    /// A name for logs and status (the principal is used when absent).
    public var member: String?
    /// Where the group starts if this JOIN creates it; default `earliest`.
    public var start: GroupStart?
    /// Deliveries this member is still working on from an earlier connection (a rejoin after a
    /// reconnect or a broker restart): the broker gives each back to it if no one else has it.
    public var holding: [HeldDelivery]
    /// The most deliveries the member takes in one DELIVER (protocol 1.3, 1–1000; 1, the default,
    /// is a DELIVER per delivery). A broker honours it only in a JOIN written as 1.3 or later, and
    /// says what it will send in JOINED's `batch`.
    public var batch: Int

    public init(
        group: String, topics: [String], credit: Int, member: String? = nil, start: GroupStart? = nil, holding: [HeldDelivery] = [],
        batch: Int = 1
    ) {
        self.group = group
        self.topics = topics
        self.credit = credit
        self.member = member
        self.start = start
        self.holding = holding
        self.batch = batch
    }

    public static let maximumCredit = 1000
    /// The most deliveries one DELIVER carries.
    public static let maximumBatch = 1000

    /// The JOIN as a member sends it: written as 1.3 when it asks for several deliveries per
    /// DELIVER (an older broker ignores the field and answers a JOINED without `batch`).
    public func envelope() -> Envelope {
        Envelope(command: .join, header: wireJSON(), version: batch > 1 ? .deliverBatches : .current)
    }

    /// At most this many entries in `holding` (a member never holds more than its credit).
    public static let maximumHolding = 1000

    public init(wire fields: [String: JSONValue]) throws(ProtocolError) {
        let object = WireObject(fields: fields, frame: "header", code: .invalidHeader)
        group = try object.string("group")
        try GroupName.check(group)
        topics = try object.topics("topics")
        let credit = try object.integer("credit")
        guard (1...Int64(Self.maximumCredit)).contains(credit) else {
            throw object.fail("credit", "must be 1–\(Self.maximumCredit), got \(credit)")
        }
        self.credit = Int(credit)
        member = try object.optionalString("member")
        if let member, !Producer.isValid(member) { throw object.fail("member", "must be 1–64 characters of A–Z a–z 0–9 . _ : -") }
        switch fields["start"] {
        case nil: start = nil
        case .string(let text)? where text == "earliest" || text == "head": start = GroupStart(text)
        case .string?: throw object.fail("start", "must be \"earliest\", \"head\" or a bus_seq from 1 to 2^53")
        case .some:
            guard let seq = try? object.optionalInteger("start"), seq >= 1, seq <= FetchHeader.maximumSequence else {
                throw object.fail("start", "must be \"earliest\", \"head\" or a bus_seq from 1 to 2^53")
            }
            start = .sequence(seq)
        }
        holding = try Self.holding(fields["holding"], object)
        let batch = try object.optionalInteger("batch") ?? 1
        guard (1...Int64(Self.maximumBatch)).contains(batch) else {
            throw object.fail("batch", "must be 1–\(Self.maximumBatch), got \(batch)")
        }
        self.batch = Int(batch)
    }

    /// `holding`: absent, or an array of at most `maximumHolding` objects `{bus_seq, attempt}`.
    /// A bus_seq named twice counts once, with its first attempt.
    static func holding(_ value: JSONValue?, _ object: WireObject) throws(ProtocolError) -> [HeldDelivery] {
        guard let value else { return [] }
        guard case .array(let items) = value, items.count <= maximumHolding else {
            throw object.fail("holding", "must be an array of at most \(maximumHolding) {bus_seq, attempt} objects")
        }
        var seen = Set<Int64>()
        var held: [HeldDelivery] = []
        held.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            guard case .object(let fields) = item else {
                throw object.fail("holding", "must hold {bus_seq, attempt} objects; item \(index) is not an object")
            }
            let entry = WireObject(fields: fields, frame: object.frame, code: object.code)
            func number(_ key: String, _ range: ClosedRange<Int64>, _ rule: String) throws(ProtocolError) -> Int64 {
                let number: Int64?
                do throws(ProtocolError) { number = try entry.optionalInteger(key) } catch { number = nil }
                guard let number, range.contains(number) else {
                    let got = fields[key].map { String(decoding: $0.compactData, as: UTF8.self).prefix(40) } ?? "nothing"
                    throw object.fail("holding", "item \(index): '\(key)' must be an integer \(rule), got \(got)")
                }
                return number
            }
            let busSeq = try number("bus_seq", 1...FetchHeader.maximumSequence, "from 1 to 2^53")
            let attempt = try number("attempt", 1...Int64(SettleHeader.maximumAttempt), "from 1 to \(SettleHeader.maximumAttempt)")
            if seen.insert(busSeq).inserted { held.append(HeldDelivery(busSeq: busSeq, attempt: Int(attempt))) }
        }
        return held
    }

    public func wireJSON() -> Data {
        var fields: [String: JSONValue] = [
            "group": .string(group), "topics": .array(topics.map(JSONValue.string)), "credit": .integer(Int64(credit)),
        ]
        if let member { fields["member"] = .string(member) }
        if let start { fields["start"] = start.json }
        if !holding.isEmpty {
            fields["holding"] = .array(
                holding.map { .object(["bus_seq": .integer($0.busSeq), "attempt": .integer(Int64($0.attempt))]) })
        }
        if batch != 1 { fields["batch"] = .integer(Int64(batch)) }
        return JSONValue.object(fields).compactData
    }
}

/// One delivery a rejoining member says it still works on: the DELIVER's `bus_seq` and `attempt`.
public struct HeldDelivery: Sendable, Hashable {
    public var busSeq: Int64
    public var attempt: Int

    public init(busSeq: Int64, attempt: Int) {
        self.busSeq = busSeq
        self.attempt = attempt
    }
}

/// JOINED (broker → member): the member is in; the group's limits it must keep.
public struct JoinedHeader: Codable, Sendable, Hashable {
    public var group: String
    public var member: String
    public var credit: Int
    /// How long a delivery may stay unsettled before it is taken back.
    public var ackWaitMilliseconds: Int64
    /// How often the broker sends HEAD to members; a member sends HEARTBEAT as often when idle.
    public var heartbeatMilliseconds: Int64
    /// A member silent this long loses its deliveries; a broker silent this long is gone.
    public var livenessMilliseconds: Int64
    public var maxDeliver: Int
    public var backoffMilliseconds: [Int64]
    /// The group's cursor: every matching event up to it is settled.
    public var cursor: Int64
    public var head: Int64
    /// The bus_seqs of the JOIN's `holding` that this member now holds (sent by every broker of
    /// this version; nil from an older one, which gives nothing back).
    public var held: [Int64]?
    /// True from a broker that answers a HEARTBEAT's `echo` in its HEAD (every broker of this
    /// version); a member fences on the echoes only then (section 15.3, **Fencing**).
    public var echoes: Bool?
    /// True from a broker that takes a member's ACKS (protocol 1.2, every broker of this
    /// version); a member sends ACKS only then, and an ACK per delivery otherwise.
    public var takesAcks: Bool?
    /// The most deliveries this broker puts in one DELIVER to this member (protocol 1.3: the
    /// JOIN's `batch`, or 1 for a JOIN below 1.3). Nil from an older broker: one per DELIVER.
    public var batch: Int?

    enum CodingKeys: String, CodingKey {
        case group, member, credit, ackWaitMilliseconds = "ack_wait_ms", heartbeatMilliseconds = "heartbeat_ms",
            livenessMilliseconds = "liveness_ms", maxDeliver = "max_deliver", backoffMilliseconds = "backoff_ms", cursor, head, held,
            echoes, takesAcks = "takes_acks", batch
    }

    public init(
        group: String, member: String, credit: Int, ackWaitMilliseconds: Int64, heartbeatMilliseconds: Int64,
        livenessMilliseconds: Int64, maxDeliver: Int, backoffMilliseconds: [Int64], cursor: Int64, head: Int64, held: [Int64]? = nil,
        echoes: Bool? = nil, takesAcks: Bool? = nil, batch: Int? = nil
    ) {
        self.batch = batch
        self.held = held
        self.echoes = echoes
        self.takesAcks = takesAcks
        self.group = group
        self.member = member
        self.credit = credit
        self.ackWaitMilliseconds = ackWaitMilliseconds
        self.heartbeatMilliseconds = heartbeatMilliseconds
        self.livenessMilliseconds = livenessMilliseconds
        self.maxDeliver = maxDeliver
        self.backoffMilliseconds = backoffMilliseconds
        self.cursor = cursor
        self.head = head
    }
}

/// DELIVER (broker → member): one event, as delivery number `attempt`. The DELIVER's parent
/// frame is the event's journaled header (the DELIVER is caused by it); metadata and content are
/// the event's.
public struct DeliverHeader: Codable, Sendable, Hashable {
    public var group: String
    public var busSeq: Int64
    /// 1 for the first delivery of the event to this group.
    public var attempt: Int
    /// When the broker takes the event back if it is not settled (broker clock, RFC 3339).
    public var deadline: String
    public var ackWaitMilliseconds: Int64
    /// The broker knows that no member of the group was given this event before (section 15.2,
    /// DELIVER's `first`). False, or absent on the wire, says nothing: an earlier delivery may
    /// have been made and its effect may have happened.
    public var first: Bool

    enum CodingKeys: String, CodingKey {
        case group, busSeq = "bus_seq", attempt, deadline, ackWaitMilliseconds = "ack_wait_ms", first
    }

    public init(group: String, busSeq: Int64, attempt: Int, deadline: String, ackWaitMilliseconds: Int64, first: Bool = false) {
        self.group = group
        self.busSeq = busSeq
        self.attempt = attempt
        self.deadline = deadline
        self.ackWaitMilliseconds = ackWaitMilliseconds
        self.first = first
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        group = try container.decode(String.self, forKey: .group)
        busSeq = try container.decode(Int64.self, forKey: .busSeq)
        attempt = try container.decode(Int.self, forKey: .attempt)
        deadline = try container.decode(String.self, forKey: .deadline)
        ackWaitMilliseconds = try container.decode(Int64.self, forKey: .ackWaitMilliseconds)
        // A broker from before `first` sends none: nothing is known.
        first = try container.decodeIfPresent(Bool.self, forKey: .first) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(group, forKey: .group)
        try container.encode(busSeq, forKey: .busSeq)
        try container.encode(attempt, forKey: .attempt)
        try container.encode(deadline, forKey: .deadline)
        try container.encode(ackWaitMilliseconds, forKey: .ackWaitMilliseconds)
        if first { try container.encode(true, forKey: .first) }
    }

    /// The header frame, as the broker sends it with every delivery: the spelling of
    /// `DeliverHeaderFrames`, which the broker uses for a dispatch's deliveries at once.
    public func wireJSON() -> Data {
        DeliverHeaderFrames(group: group, deadline: deadline, ackWaitMilliseconds: ackWaitMilliseconds)
            .header(busSeq: busSeq, attempt: attempt, first: first)
    }
}

/// The header frames of deliveries that share their group, deadline and ack wait (the
/// deliveries of one dispatch): the text around `attempt` and `bus_seq` is written once, and each
/// header is then one allocation and three copies: keys sorted, no spaces, `first` only when
/// true, as `JSONValue.compactData` writes the same object (`DeliverHeaderTests`). Writing each
/// header whole was 4 % of the broker thread while a group consumed.
public struct DeliverHeaderFrames: Sendable {
    /// `{"ack_wait_ms":…,"attempt":`
    private let head: [UInt8]
    /// `,"bus_seq":`
    private static let middle = Array(#","bus_seq":"#.utf8)
    /// `,"deadline":"…","group":"…"}`, and the same with `"first":true` before the group.
    private let tail: [UInt8]
    private let firstTail: [UInt8]

    public init(group: String, deadline: String, ackWaitMilliseconds: Int64) {
        var head = JSONWriter(capacity: 40)
        head.raw("{")
        head.key("ack_wait_ms")
        head.integer(ackWaitMilliseconds)
        head.key("attempt")
        self.head = head.bytes
        func written(first: Bool) -> [UInt8] {
            var writer = JSONWriter(capacity: 96)
            writer.raw(#","deadline":"#)
            writer.string(deadline)
            if first {
                writer.key("first")
                writer.bool(true)
            }
            writer.key("group")
            writer.string(group)
            writer.raw("}")
            return writer.bytes
        }
        tail = written(first: false)
        firstTail = written(first: true)
    }

    /// The header of delivery `attempt` of `busSeq`.
    public func header(busSeq: Int64, attempt: Int, first: Bool) -> Data {
        let attemptValue = Int64(attempt)
        let tail = first ? firstTail : self.tail
        let attemptDigits = Self.digitCount(attemptValue)
        let busSeqDigits = Self.digitCount(busSeq)
        var data = Data(count: head.count + attemptDigits + Self.middle.count + busSeqDigits + tail.count)
        data.withUnsafeMutableBytes { buffer in
            var at = 0
            func copy(_ bytes: [UInt8]) {
                bytes.withUnsafeBytes { buffer.baseAddress!.advanced(by: at).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                at += bytes.count
            }
            func write(_ value: Int64, digits: Int) {
                var rest = value.magnitude
                var index = at + digits - 1
                if value < 0 { buffer[at] = UInt8(ascii: "-") }
                repeat {
                    buffer[index] = UInt8(truncatingIfNeeded: rest % 10) + 48
                    rest /= 10
                    index -= 1
                } while rest > 0
                at += digits
            }
            copy(head)
            write(attemptValue, digits: attemptDigits)
            copy(Self.middle)
            write(busSeq, digits: busSeqDigits)
            copy(tail)
        }
        return data
    }

    /// How many bytes `String(value)` has.
    static func digitCount(_ value: Int64) -> Int {
        var rest = value.magnitude
        var count = value < 0 ? 2 : 1
        while rest >= 10 {
            rest /= 10
            count += 1
        }
        return count
    }
}

/// ACK, NACK, TERM and PROGRESS (member → broker): how a member settles one delivery.
public struct SettleHeader: Sendable, Hashable {
    public enum Outcome: String, Sendable, Hashable {
        /// Done: the side effect succeeded; never delivered to this group again.
        case ack = "ACK"
        /// Failed for now: deliver again after `delay` (or the group's back-off).
        case nack = "NACK"
        /// Failed for good: make it a dead letter now.
        case term = "TERM"
        /// Still working: extend the deadline by the ack wait.
        case progress = "PROGRESS"
    }

    public var outcome: Outcome
    public var group: String
    public var busSeq: Int64
    public var attempt: Int
    /// NACK only: how long to wait before the next delivery, 0–86 400 000 ms.
    public var delayMilliseconds: Int64?
    /// NACK and TERM: why (lower-case word; TERM requires it).
    public var code: String?
    /// NACK and TERM: for people, at most 1000 characters; never a secret.
    public var message: String?

    public init(
        _ outcome: Outcome, group: String, busSeq: Int64, attempt: Int, delayMilliseconds: Int64? = nil, code: String? = nil,
        message: String? = nil
    ) {
        self.outcome = outcome
        self.group = group
        self.busSeq = busSeq
        self.attempt = attempt
        self.delayMilliseconds = delayMilliseconds
        self.code = code
        self.message = message
    }

    public static let maximumDelayMilliseconds: Int64 = 86_400_000
    /// The highest attempt number a settle (or a JOIN's `holding`) may name.
    public static let maximumAttempt = 1_000_000

    public init(_ outcome: Outcome, wire fields: [String: JSONValue]) throws(ProtocolError) {
        let object = WireObject(fields: fields, frame: "header", code: .invalidHeader)
        self.outcome = outcome
        group = try object.string("group")
        try GroupName.check(group)
        busSeq = try object.integer("bus_seq")
        guard busSeq >= 1 else { throw object.fail("bus_seq", "must be at least 1, got \(busSeq)") }
        let attempt = try object.integer("attempt")
        guard (1...Int64(Self.maximumAttempt)).contains(attempt) else {
            throw object.fail("attempt", "must be 1–\(Self.maximumAttempt), got \(attempt)")
        }
        self.attempt = Int(attempt)
        delayMilliseconds = outcome == .nack ? try object.optionalInteger("delay_ms") : nil
        if let delay = delayMilliseconds, !(0...Self.maximumDelayMilliseconds).contains(delay) {
            throw object.fail("delay_ms", "must be 0–\(Self.maximumDelayMilliseconds), got \(delay)")
        }
        if outcome == .nack || outcome == .term {
            code = try object.optionalString("code")
            message = try object.optionalString("message")
            if outcome == .term, code == nil { throw object.fail("code", "is required: a TERM says why") }
            if let code, !Self.isValidCode(code) {
                throw object.fail("code", "must be 1–64 of a–z 0–9 - starting with a letter, got '\(code.prefix(64))'")
            }
            if let message, message.unicodeScalars.count > 1000 { throw object.fail("message", "must be at most 1000 characters") }
        }
    }

    /// The settle a member's ACK, NACK or PROGRESS envelope carries when its header is plain:
    /// exactly `group`, `bus_seq` and `attempt`, in any order, written without spaces (a group
    /// name of a–z 0–9 _ -, integers of 1–18 digits with no leading zero), and `{}` for parent,
    /// metadata and content, as our members send them; nil for anything else (TERM, more fields,
    /// other spellings, values out of range), which the general parse and `init(_:wire:)` read
    /// and refuse as before. A settle it reads is the value `init(_:wire:)` gives for the same
    /// header (`SettleHeaderTests`), so the refusals do not change; it skips the dictionaries of
    /// the general parse, which took a third of the broker's time per settle while a group
    /// consumed (bench/RESULTS.md).
    public static func plain(_ envelope: Envelope) -> SettleHeader? {
        let outcome: Outcome
        switch envelope.command {
        case .ack: outcome = .ack
        case .nack: outcome = .nack
        case .progress: outcome = .progress
        default: return nil
        }
        guard envelope.parent == Envelope.emptyObject, envelope.metadata == Envelope.emptyObject,
            envelope.content == Envelope.emptyObject
        else { return nil }
        return envelope.header.withUnsafeBytes { raw -> SettleHeader? in
            var scan = PlainHeaderScan(raw.bindMemory(to: UInt8.self))
            var group: String?
            var busSeq: Int64?
            var attempt: Int64?
            guard scan.take(UInt8(ascii: "{")) else { return nil }
            for index in 0..<3 {
                if index > 0 { guard scan.take(UInt8(ascii: ",")) else { return nil } }
                guard let key = scan.key() else { return nil }
                if key.spells("group"), group == nil {
                    group = scan.name()
                    if group == nil { return nil }
                } else if key.spells("bus_seq"), busSeq == nil {
                    busSeq = scan.integer(digits: 18, in: 1...Int64.max)
                    if busSeq == nil { return nil }
                } else if key.spells("attempt"), attempt == nil {
                    attempt = scan.integer(digits: 18, in: 1...Int64(Self.maximumAttempt))
                    if attempt == nil { return nil }
                } else {
                    return nil
                }
            }
            guard scan.take(UInt8(ascii: "}")), scan.atEnd, let group, let busSeq, let attempt, GroupName.isValid(group) else { return nil }
            return SettleHeader(outcome, group: group, busSeq: busSeq, attempt: Int(attempt))
        }
    }

    /// Whether `code` is a settle code the broker takes: 1–64 of a–z 0–9 -, starting with a letter.
    public static func isValidCode(_ code: String) -> Bool {
        withUTF8Bytes(code) { bytes in
            guard let first = bytes.first, (97...122).contains(first), bytes.count <= 64 else { return false }
            return bytes.allSatisfy { c in (97...122).contains(c) || (48...57).contains(c) || c == 45 }
        }
    }

    public func wireJSON() -> Data {
        var fields: [String: JSONValue] = ["group": .string(group), "bus_seq": .integer(busSeq), "attempt": .integer(Int64(attempt))]
        if let delayMilliseconds { fields["delay_ms"] = .integer(delayMilliseconds) }
        if let code { fields["code"] = .string(code) }
        if let message { fields["message"] = .string(message) }
        return JSONValue.object(fields).compactData
    }

    public var command: Command {
        switch outcome {
        case .ack: .ack
        case .nack: .nack
        case .term: .term
        case .progress: .progress
        }
    }
}

/// LEAVE (member → broker): the member leaves `group`; what it holds goes to others at once.
public struct LeaveHeader: Codable, Sendable, Hashable {
    public var group: String

    public init(group: String) { self.group = group }
}

extension WireObject {
    /// A list of type prefixes: 1–32, each 1–128 bytes.
    func topics(_ key: String) throws(ProtocolError) -> [String] {
        guard case .array(let items)? = fields[key] else { throw fail(key, fields[key] == nil ? "is required" : "must be an array") }
        var topics: [String] = []
        for item in items {
            guard case .string(let topic) = item, !topic.isEmpty, topic.utf8.count <= Topic.maximumLength else {
                throw fail(key, "must hold 1–\(Topic.maximumLength)-byte type prefixes")
            }
            topics.append(topic)
        }
        guard (1...32).contains(topics.count) else { throw fail(key, "must hold 1–32 prefixes, got \(topics.count)") }
        return topics
    }
}

extension JSONValue {
    /// Compact JSON with sorted keys.
    public var compactData: Data {
        var writer = JSONWriter()
        writer.value(self)
        return writer.data
    }
}
