public import Foundation

/// Typed access to a parsed JSON object, with errors that name the frame and the field the way
/// the rest of the protocol does (`header: field 'producer_seq' must be an integer`).
struct WireObject {
    let fields: [String: JSONValue]
    let frame: String
    let code: ProtocolError.Code
    /// `participant.` for nested objects.
    var path = ""

    func fail(_ key: String, _ rule: String) -> ProtocolError {
        ProtocolError(code, "\(frame): field '\(path)\(key)' \(rule)")
    }

    func string(_ key: String) throws(ProtocolError) -> String {
        guard let value = try optionalString(key) else { throw fail(key, "is required") }
        return value
    }

    func optionalString(_ key: String) throws(ProtocolError) -> String? {
        switch fields[key] {
        case nil: return nil
        case .string(let text)?: return text
        default: throw fail(key, "must be a string")
        }
    }

    func integer(_ key: String) throws(ProtocolError) -> Int64 {
        guard let value = try optionalInteger(key) else { throw fail(key, "is required") }
        return value
    }

    func optionalInteger(_ key: String) throws(ProtocolError) -> Int64? {
        switch fields[key] {
        case nil: return nil
        case .integer(let number)?: return number
        // JSON Schema counts 12.0 as an integer; so do we, within the same signed 64-bit range
        // (−2^63 inclusive to 2^63 exclusive; both bounds are exact as doubles).
        case .double(let number)? where number == number.rounded() && number >= -0x1p63 && number < 0x1p63:
            return Int64(number)
        case .double(let number)? where number == number.rounded():
            throw fail(key, "must be an integer from -2^63 to 2^63-1")
        default: throw fail(key, "must be an integer")
        }
    }

    /// Refuses a number beyond ±1.8e308 anywhere in `fields` (only a header parsed with
    /// `keepingHugeNumbers` can hold one), naming the field: valid JSON, but out of range for
    /// every number the protocol has, and never to be journaled or forwarded.
    static func refuseHugeNumbers(_ fields: [String: JSONValue], frame: String, code: ProtocolError.Code) throws(ProtocolError) {
        guard let path = JSONValue.object(fields).hugeNumberPath else { return }
        throw ProtocolError(code, "\(frame): field '\(path)' is a number out of range (integers: -2^63 to 2^63-1)")
    }

    func double(_ key: String) throws(ProtocolError) -> Double {
        switch fields[key] {
        case nil: throw fail(key, "is required")
        case .integer(let number)?: return Double(number)
        case .double(let number)? where number.isFinite: return number
        default: throw fail(key, "must be a number")
        }
    }

    func optionalBool(_ key: String) throws(ProtocolError) -> Bool? {
        switch fields[key] {
        case nil: return nil
        case .bool(let value)?: return value
        default: throw fail(key, "must be true or false")
        }
    }

    func optionalObject(_ key: String) throws(ProtocolError) -> WireObject? {
        switch fields[key] {
        case nil: return nil
        case .object(let object)?: return WireObject(fields: object, frame: frame, code: code, path: "\(path)\(key).")
        default: throw fail(key, "must be an object")
        }
    }
}

/// An envelope with its JSON frames parsed once: what the broker's hot path works from.
public struct ParsedEnvelope: Sendable {
    public var envelope: Envelope
    /// Frame 2 as a JSON object.
    public var header: [String: JSONValue]
    /// Frame 5.
    public var content: JSONValue
}

extension Envelope {
    /// `decode`, keeping the parsed header and content. Same checks, same order, same errors.
    public static func parse<Frames: Collection<Data>>(
        _ frames: Frames, minimumVersion: ProtocolVersion = .current, limits: SizeLimits = .v1
    ) throws(ProtocolError) -> ParsedEnvelope {
        var reference: String?
        return try check(frames, minimumVersion: minimumVersion, limits: limits).parsed(reference: &reference)
    }

    /// The checks before the JSON frames: count, signature, versions, sizes, command word.
    /// A receiver then checks that the command is one its endpoint takes, and calls `parsed`.
    public static func check<Frames: Collection<Data>>(
        _ frames: Frames, minimumVersion: ProtocolVersion = .current, limits: SizeLimits = .v1
    ) throws(ProtocolError) -> Envelope {
        try checkFrames(Array(frames), minimumVersion: minimumVersion, limits: limits)
    }

    /// `check` of a received message's frames after its routing frame, read in place (the
    /// generic one copies them into an array first).
    public static func check(
        _ frames: ArraySlice<Data>, minimumVersion: ProtocolVersion = .current, limits: SizeLimits = .v1
    ) throws(ProtocolError) -> Envelope {
        try checkFrames(frames, minimumVersion: minimumVersion, limits: limits)
    }

    /// Parses the JSON frames (header, parent, metadata, content, in that order).
    /// - Parameter reference: set to the header's `event_id` or `request_id` as soon as the
    ///   header parses, so an error about a later frame can still name the message.
    public func parsed(reference: inout String?) throws(ProtocolError) -> ParsedEnvelope {
        let (header, content) = try jsonFrames(reference: &reference, buildingContent: true)
        return ParsedEnvelope(envelope: self, header: header, content: content ?? .null)
    }

    /// `parsed`'s checks, the same and in the same order, giving the header's fields only: the
    /// content is checked but not built (a service request's or reply's, which its reader takes
    /// as bytes).
    public func headerFields(reference: inout String?) throws(ProtocolError) -> [String: JSONValue] {
        try jsonFrames(reference: &reference, buildingContent: false).header
    }

    private func jsonFrames(
        reference: inout String?, buildingContent: Bool
    ) throws(ProtocolError) -> (header: [String: JSONValue], content: JSONValue?) {
        let headerFields = try WireObject.fields(of: header, frame: "header", keepingHugeNumbers: true)
        reference = ParsedEnvelope.reference(in: headerFields)
        // Parent and metadata are checked, never read here: nothing is built of them.
        if parent != Envelope.emptyObject { try WireObject.checkObject(parent, frame: "parent") }
        if metadata != Envelope.emptyObject { try WireObject.checkObject(metadata, frame: "metadata") }
        let contentValue: JSONValue?
        if buildingContent {
            guard let value = JSONValue.parse(content) else { throw ProtocolError(.invalidJSON, "content frame is not valid JSON") }
            contentValue = value
        } else {
            // Any JSON value will do: nil is the only refusal.
            guard JSONValue.isObject(content) != nil else { throw ProtocolError(.invalidJSON, "content frame is not valid JSON") }
            contentValue = nil
        }
        // After every frame's JSON check, before the header's own rules (section 2).
        try WireObject.refuseHugeNumbers(headerFields, frame: "header", code: .invalidHeader)
        return (headerFields, contentValue)
    }
}

extension EventHeader {
    /// Reads an EVENT header from its parsed JSON (unknown fields ignored); `validate()` checks
    /// the formats.
    public init(wire fields: [String: JSONValue]) throws(ProtocolError) {
        let object = WireObject(fields: fields, frame: "header", code: .invalidHeader)
        self.init(
            eventID: try object.string("event_id"), type: try object.string("type"), producer: try object.string("producer"),
            // A producer's `bus_seq` is ignored (the broker sets it); readers of the fan-out and
            // replay use the Codable reader.
            producerSeq: try object.integer("producer_seq"), busSeq: nil,
            time: try object.string("time"), schema: try object.string("schema"), session: try object.string("session"),
            key: try object.optionalString("key"))
        try Self.checkProducerBusSeq(fields)
    }

    /// A producer's `bus_seq` (section 6): absent or null, or an integer ≥ 1 as the schema says;
    /// anything else is refused. A valid one is replaced by the broker's own number.
    static func checkProducerBusSeq(_ fields: [String: JSONValue]) throws(ProtocolError) {
        switch fields["bus_seq"] {
        case nil, .null?:
            return
        default:
            let object = WireObject(fields: fields, frame: "header", code: .invalidHeader)
            let value = try object.integer("bus_seq")
            guard value >= 1 else { throw object.fail("bus_seq", "must be at least 1 (or left out: the broker sets it), got \(value)") }
        }
    }

    /// The header as compact JSON with sorted keys (what the journal stores and the fan-out sends).
    public func wireJSON() -> Data {
        var writer = JSONWriter()
        writer.raw("{")
        if let busSeq {
            writer.key("bus_seq")
            writer.integer(busSeq)
        }
        writer.key("event_id")
        writer.string(eventID)
        if let key {
            writer.key("key")
            writer.string(key)
        }
        writer.key("producer")
        writer.string(producer)
        writer.key("producer_seq")
        writer.integer(producerSeq)
        writer.key("schema")
        writer.string(schema)
        writer.key("session")
        writer.string(session)
        writer.key("time")
        writer.string(time)
        writer.key("type")
        writer.string(type)
        writer.raw("}")
        return writer.data
    }
}

extension AckHeader {
    public func wireJSON() -> Data {
        var writer = JSONWriter(capacity: 160)
        writer.raw("{")
        writer.key("bus_seq")
        writer.integer(busSeq)
        writer.key("duplicate")
        writer.bool(duplicate)
        writer.key("event_id")
        writer.string(eventID)
        writer.key("producer")
        writer.string(producer)
        writer.key("producer_seq")
        writer.integer(producerSeq)
        writer.raw("}")
        return writer.data
    }
}

extension CheckIn {
    /// Reads a check-in from parsed content (unknown fields ignored); call `validate()` after.
    public init(wire value: JSONValue) throws(ProtocolError) {
        guard case .object(let fields) = value else { throw ProtocolError(.schemaViolation, "content must be a JSON object") }
        let object = WireObject(fields: fields, frame: "content", code: .schemaViolation)
        guard let participant = try object.optionalObject("participant") else { throw object.fail("participant", "is required") }
        var location: Location?
        if let place = try object.optionalObject("location") {
            location = Location(
                latitude: try place.double("latitude"), longitude: try place.double("longitude"),
                accuracyMeters: try place.double("accuracy_m"))
        }
        self.init(
            participant: Participant(
                etoParticipantID: try participant.optionalInteger("eto_participant_id"),
                firstName: try participant.optionalString("first_name"),
                lastName: try participant.optionalString("last_name"), dateOfBirth: try participant.optionalString("date_of_birth"),
                isNew: try participant.optionalBool("new"), gender: try participant.optionalString("gender")),
            siteID: try object.integer("site_id"), programID: try object.integer("program_id"), kioskID: try object.string("kiosk_id"),
            checkedInAt: try object.string("checked_in_at"), location: location, notes: try object.optionalString("notes"),
            bed: try object.optionalString("bed"), recordedBy: try object.optionalString("recorded_by"))
    }
}

extension CheckInVoid {
    /// Reads a void from parsed content (unknown fields ignored); call `validate()` after.
    public init(wire value: JSONValue) throws(ProtocolError) {
        guard case .object(let fields) = value else { throw ProtocolError(.schemaViolation, "content must be a JSON object") }
        let object = WireObject(fields: fields, frame: "content", code: .schemaViolation)
        self.init(
            checkInEventID: try object.string("checkin_event_id"), siteID: try object.integer("site_id"),
            programID: try object.integer("program_id"), kioskID: try object.string("kiosk_id"),
            voidedAt: try object.string("voided_at"), reason: try object.string("reason"),
            recordedBy: try object.optionalString("recorded_by"))
    }
}

extension Payloads {
    /// `validate(schema:type:content:)` on already-parsed content.
    public static func validate(schema: String, type: String, content: JSONValue) throws(ProtocolError) {
        switch schema {
        case CheckIn.schema:
            guard type == CheckIn.type else {
                throw ProtocolError(.schemaViolation, "schema '\(schema)' is for events of type '\(CheckIn.type)', not '\(type)'")
            }
            try CheckIn(wire: content).validate()
        case CheckInVoid.schema:
            guard type == CheckInVoid.type else {
                throw ProtocolError(.schemaViolation, "schema '\(schema)' is for events of type '\(CheckInVoid.type)', not '\(type)'")
            }
            try CheckInVoid(wire: content).validate()
        default:
            guard case .object = content else { throw ProtocolError(.schemaViolation, "content: an event's content must be a JSON object") }
        }
    }
}

extension ParsedEnvelope {
    /// Every check a receiver makes of an EVENT after the envelope: the header's fields and
    /// formats, then the content against its schema. Returns the header.
    public func checkedEvent() throws(ProtocolError) -> EventHeader {
        let event = try EventHeader(wire: header)
        try event.validate()
        try Payloads.validate(schema: event.schema, type: event.type, content: content)
        return event
    }

    /// `checkedEvent()` for an EVENT a peer publishes on ingest: also refuses the domains only
    /// the broker writes (`forbidden`, section 5), whether or not the broker runs with security.
    public func checkedPublishedEvent() throws(ProtocolError) -> EventHeader {
        let event = try checkedEvent()
        if let domain = Topic.brokerDomain(of: event.type) {
            throw ProtocolError(
                .forbidden, "event type '\(event.type)' is in the domain '\(domain)', which only the broker publishes in")
        }
        return event
    }

    /// The header's `event_id` or `request_id` when it is a string, for ERROR's `ref`.
    public var reference: String? { Self.reference(in: header) }

    static func reference(in header: [String: JSONValue]) -> String? {
        if case .string(let id)? = header["event_id"] { return String(id.prefix(64)) }
        if case .string(let id)? = header["request_id"] { return String(id.prefix(64)) }
        return nil
    }
}

extension WireObject {
    /// The fields of the JSON object a frame holds; `frame` names it in the errors.
    static func fields(of data: Data, frame: String, keepingHugeNumbers: Bool = false) throws(ProtocolError) -> [String: JSONValue] {
        guard let (value, _) = JSONValue.parse(data, keepingHugeNumbers: keepingHugeNumbers) else {
            throw ProtocolError(.invalidJSON, "\(frame) frame is not valid JSON")
        }
        guard case .object(let fields) = value else { throw ProtocolError(.invalidJSON, "\(frame) frame must be a JSON object") }
        return fields
    }

    /// `fields(of:frame:)`'s checks and errors, for a frame nobody reads: nothing is built.
    static func checkObject(_ data: Data, frame: String) throws(ProtocolError) {
        switch JSONValue.isObject(data) {
        case nil: throw ProtocolError(.invalidJSON, "\(frame) frame is not valid JSON")
        case false?: throw ProtocolError(.invalidJSON, "\(frame) frame must be a JSON object")
        case true?: return
        }
    }

    /// The object a frame holds, for the readers below.
    static func parse(_ data: Data, frame: String, code: ProtocolError.Code) throws(ProtocolError) -> WireObject {
        WireObject(fields: try fields(of: data, frame: frame), frame: frame, code: code)
    }

    /// As `optionalString`, with `null` read as absent (as a Codable reader's `decodeIfPresent`).
    func nullableString(_ key: String) throws(ProtocolError) -> String? {
        fields[key] == .null ? nil : try optionalString(key)
    }

    /// As `optionalInteger`, with `null` read as absent.
    func nullableInteger(_ key: String) throws(ProtocolError) -> Int64? {
        fields[key] == .null ? nil : try optionalInteger(key)
    }
}

extension EventHeader {
    /// Reads the header of a journaled event (a DELIVER's parent, an EVENT from the fan-out or
    /// replay) from its frame: the fields the Codable reader reads, `bus_seq` among them, with
    /// `null` as absent for the optional ones, and unknown fields ignored. Without a
    /// JSONDecoder: a worker reads one with every delivery.
    public init(journaled data: Data) throws(ProtocolError) {
        let object = try WireObject.parse(data, frame: "header", code: .invalidHeader)
        self.init(
            eventID: try object.string("event_id"), type: try object.string("type"), producer: try object.string("producer"),
            producerSeq: try object.integer("producer_seq"), busSeq: try object.nullableInteger("bus_seq"),
            time: try object.string("time"), schema: try object.string("schema"), session: try object.string("session"),
            key: try object.nullableString("key"))
    }
}

extension DeliverHeader {
    /// Reads a DELIVER header from its frame as the Codable reader does (unknown fields ignored;
    /// `first` absent, or null, is false), without a JSONDecoder: a worker reads one with every
    /// delivery.
    public init(wire data: Data) throws(ProtocolError) {
        let object = try WireObject.parse(data, frame: "header", code: .invalidHeader)
        let attempt = try object.integer("attempt")
        guard let exact = Int(exactly: attempt) else { throw object.fail("attempt", "must be an integer") }
        self.init(
            group: try object.string("group"), busSeq: try object.integer("bus_seq"), attempt: exact,
            deadline: try object.string("deadline"), ackWaitMilliseconds: try object.integer("ack_wait_ms"),
            first: object.fields["first"] == .null ? false : try object.optionalBool("first") ?? false)
    }

    /// A DELIVER header in the spelling our broker writes (`wireJSON()`: its keys in sorted
    /// order, no spaces, `first` only when true, a group name of a–z 0–9 _ -, integers of 1–18
    /// digits with no leading zero), read without the general parse; nil for anything else,
    /// which `init(wire:)` then reads. A header it reads is the value `init(wire:)` gives for the
    /// same bytes (`DeliverHeaderTests`). A member reads one with every delivery, and the general
    /// parse's dictionaries were most of a bench member's time per delivery.
    public static func plain(_ data: Data) -> DeliverHeader? {
        data.withUnsafeBytes { raw -> DeliverHeader? in
            var scan = PlainHeaderScan(raw.bindMemory(to: UInt8.self))
            guard scan.take(UInt8(ascii: "{")), let ackWaitKey = scan.key(), ackWaitKey.spells("ack_wait_ms"),
                let ackWait = scan.integer(digits: 18, in: 1...Int64.max), scan.take(UInt8(ascii: ",")),
                let attemptKey = scan.key(), attemptKey.spells("attempt"), let attempt = scan.integer(digits: 18, in: 1...Int64.max),
                scan.take(UInt8(ascii: ",")), let busSeqKey = scan.key(), busSeqKey.spells("bus_seq"),
                let busSeq = scan.integer(digits: 18, in: 1...Int64.max), scan.take(UInt8(ascii: ",")), let deadlineKey = scan.key(),
                deadlineKey.spells("deadline"), let deadline = scan.timestamp(), scan.take(UInt8(ascii: ","))
            else { return nil }
            guard var key = scan.key() else { return nil }
            var first = false
            if key.spells("first") {
                guard scan.take(UInt8(ascii: "t")), scan.take(UInt8(ascii: "r")), scan.take(UInt8(ascii: "u")),
                    scan.take(UInt8(ascii: "e")), scan.take(UInt8(ascii: ",")), let next = scan.key()
                else { return nil }
                first = true
                key = next
            }
            guard key.spells("group"), let group = scan.name(), scan.take(UInt8(ascii: "}")), scan.atEnd else { return nil }
            return DeliverHeader(
                group: group, busSeq: busSeq, attempt: Int(attempt), deadline: deadline, ackWaitMilliseconds: ackWait, first: first)
        }
    }
}
