// The broker's ingest check of an EVENT without building the JSON frames' values.
//
// `parsed(reference:)` reads the header and the content into dictionaries, and the typed
// readers then look each field up by a hashed `String`: at full ingest that was most of the
// checking thread's time (dictionary inserts, key hashing, growing and freeing the tables). The
// quick check reads the same frames member by member, in place, through `JSONParser`'s own
// functions for every key's value, and builds only the typed header and content. It never
// refuses anything: where it is not sure (a key with an escape, a known key twice, an unknown
// header field, a value of another type, a rule the typed value breaks) it answers nil, and the
// caller runs the general check, which gives the answer and, for a refusal, its message. So
// whatever it accepts, the general check accepts too, with the same header
// (`QuickEventCheckTests` mutates valid events and holds the two to that).

import Foundation

extension Envelope {
    /// The header of an EVENT that `parsed(reference:)` followed by `checkedPublishedEvent()`
    /// would accept, read without building its JSON; nil when it takes the general check to say.
    ///
    /// An accepted header has no `bus_seq` and an integer `producer_seq`: the journal keeps the
    /// producer's header bytes (`Journal.keepsProducerBytes`).
    public func quickPublishedEvent() -> EventHeader? {
        guard command == .event, let event = QuickEventCheck.header(header), (try? event.validate()) != nil,
            Topic.brokerDomain(of: event.type) == nil,
            QuickEventCheck.isObject(parent), QuickEventCheck.isObject(metadata),
            QuickEventCheck.content(content, schema: event.schema, type: event.type)
        else { return nil }
        return event
    }
}

enum QuickEventCheck {
    /// The types and schemas most events have: read as these constants, they are not allocated
    /// per event (nor freed, nor counted) on ingest's hot path.
    static let knownTypes = [CheckIn.type, CheckInVoid.type]
    static let knownSchemas = [CheckIn.schema, CheckInVoid.schema]

    /// An EVENT header: the nine fields of section 2 and nothing else, each of its own type.
    static func header(_ frame: Data) -> EventHeader? {
        var eventID: String?
        var type: String?
        var producer: String?
        var producerSeq: Int64?
        var time: String?
        var schema: String?
        var session: String?
        var key: String?
        let read = JSONParser.read(frame) { parser in
            parser.members(depth: 0) { name, parser in
                if name.spells("event_id") { return take(&eventID, parser.stringValue()) }
                if name.spells("type") { return take(&type, parser.stringValue(known: knownTypes)) }
                if name.spells("producer") { return take(&producer, parser.stringValue()) }
                if name.spells("producer_seq") { return take(&producerSeq, parser.integerValue()) }
                if name.spells("time") { return take(&time, parser.stringValue()) }
                if name.spells("schema") { return take(&schema, parser.stringValue(known: knownSchemas)) }
                if name.spells("session") { return take(&session, parser.stringValue()) }
                if name.spells("key") { return take(&key, parser.stringValue()) }
                // `bus_seq` and unknown fields: the general check decides (and the journal may
                // write the header anew).
                return false
            }
        }
        guard read, let eventID, let type, let producer, let producerSeq, let time, let schema, let session else { return nil }
        return EventHeader(
            eventID: eventID, type: type, producer: producer, producerSeq: producerSeq, busSeq: nil, time: time, schema: schema,
            session: session, key: key)
    }

    /// A frame holding one JSON object (parent and metadata: `{}` nearly always).
    static func isObject(_ frame: Data) -> Bool {
        frame == Envelope.emptyObject || JSONParser.read(frame) { $0.skipObject(depth: 0) }
    }

    /// The content against its schema, as `Payloads.validate(schema:type:content:)` checks it.
    static func content(_ frame: Data, schema: String, type: String) -> Bool {
        switch schema {
        case CheckIn.schema:
            guard type == CheckIn.type, let checkIn = self.checkIn(frame) else { return false }
            return (try? checkIn.validate()) != nil
        case CheckInVoid.schema:
            guard type == CheckInVoid.type, let void = self.void(frame) else { return false }
            return (try? void.validate()) != nil
        default:
            return isObject(frame)
        }
    }

    static func checkIn(_ frame: Data) -> CheckIn? {
        var participant: CheckIn.Participant?
        var siteID: Int64?
        var programID: Int64?
        var kioskID: String?
        var checkedInAt: String?
        var location: CheckIn.Location?
        var notes: String?
        var bed: String?
        var recordedBy: String?
        let read = JSONParser.read(frame) { parser in
            parser.members(depth: 0) { name, parser in
                if name.spells("participant") { return take(&participant, parser.participant(depth: 1)) }
                if name.spells("site_id") { return take(&siteID, parser.integerValue()) }
                if name.spells("program_id") { return take(&programID, parser.integerValue()) }
                if name.spells("kiosk_id") { return take(&kioskID, parser.stringValue()) }
                if name.spells("checked_in_at") { return take(&checkedInAt, parser.stringValue()) }
                if name.spells("location") { return take(&location, parser.location(depth: 1)) }
                if name.spells("notes") { return take(&notes, parser.stringValue()) }
                if name.spells("bed") { return take(&bed, parser.stringValue()) }
                if name.spells("recorded_by") { return take(&recordedBy, parser.stringValue()) }
                return parser.skipValue(depth: 1)
            }
        }
        guard read, let participant, let siteID, let programID, let kioskID, let checkedInAt else { return nil }
        return CheckIn(
            participant: participant, siteID: siteID, programID: programID, kioskID: kioskID, checkedInAt: checkedInAt,
            location: location, notes: notes, bed: bed, recordedBy: recordedBy)
    }

    static func void(_ frame: Data) -> CheckInVoid? {
        var checkIn: String?
        var siteID: Int64?
        var programID: Int64?
        var kioskID: String?
        var voidedAt: String?
        var reason: String?
        var recordedBy: String?
        let read = JSONParser.read(frame) { parser in
            parser.members(depth: 0) { name, parser in
                if name.spells("checkin_event_id") { return take(&checkIn, parser.stringValue()) }
                if name.spells("site_id") { return take(&siteID, parser.integerValue()) }
                if name.spells("program_id") { return take(&programID, parser.integerValue()) }
                if name.spells("kiosk_id") { return take(&kioskID, parser.stringValue()) }
                if name.spells("voided_at") { return take(&voidedAt, parser.stringValue()) }
                if name.spells("reason") { return take(&reason, parser.stringValue()) }
                if name.spells("recorded_by") { return take(&recordedBy, parser.stringValue()) }
                return parser.skipValue(depth: 1)
            }
        }
        guard read, let checkIn, let siteID, let programID, let kioskID, let voidedAt, let reason else { return nil }
        return CheckInVoid(
            checkInEventID: checkIn, siteID: siteID, programID: programID, kioskID: kioskID, voidedAt: voidedAt, reason: reason,
            recordedBy: recordedBy)
    }
}

/// Stores a member's value once: false if there is none (another type) or the key came before
/// (the general parse keeps the last; the quick check leaves that to it).
private func take<Value>(_ slot: inout Value?, _ value: Value?) -> Bool {
    guard slot == nil, let value else { return false }
    slot = value
    return true
}

extension JSONParser {
    /// Runs `body` over `frame`'s bytes; true when it read them and nothing but whitespace follows.
    /// Numbers beyond a `Double` fail, as in every frame but the header's general parse (whose
    /// refusal of them the general check then gives).
    static func read(_ frame: Data, _ body: (inout JSONParser) -> Bool) -> Bool {
        frame.withUnsafeBytes { raw in
            var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self), keepingHugeNumbers: false)
            guard body(&parser) else { return false }
            parser.skipWhitespace()
            return parser.index == parser.bytes.count
        }
    }

    /// Reads an object at `depth`, calling `member` with each key's bytes; `member` reads the
    /// value. False (give up) for anything else, a key with an escape or a byte outside
    /// printable ASCII, or when `member` gives up.
    mutating func members(depth: Int, _ member: (UnsafeBufferPointer<UInt8>, inout JSONParser) -> Bool) -> Bool {
        guard depth < 64 else { return false }
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return false }
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return true
        }
        while true {
            skipWhitespace()
            guard let key = plainKey() else { return false }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
            index += 1
            guard member(key, &self) else { return false }
            skipWhitespace()
            guard index < bytes.count else { return false }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return true
            } else {
                return false
            }
        }
    }

    /// A key of printable ASCII without escapes, `"…"`: its bytes.
    private mutating func plainKey() -> UnsafeBufferPointer<UInt8>? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
            guard (0x20...0x7E).contains(bytes[end]), bytes[end] != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        guard end < bytes.count else { return nil }
        index = end + 1
        return UnsafeBufferPointer(rebasing: bytes[start..<end])
    }

    mutating func stringValue() -> String? {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        return string()
    }

    /// A string value; one spelled, with no escapes, as one of `known` is that string itself.
    mutating func stringValue(known: [String]) -> String? {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\") { end += 1 }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            let text = UnsafeBufferPointer(rebasing: bytes[start..<end])
            for candidate in known {
                let same = candidate.utf8.withContiguousStorageIfAvailable { spelled in
                    spelled.count == text.count && (text.isEmpty || memcmp(spelled.baseAddress!, text.baseAddress!, text.count) == 0)
                }
                if same == true {
                    index = end + 1
                    return candidate
                }
            }
        }
        return string()
    }

    /// An integer written as one (the general check also takes `12.0`; the quick one leaves that
    /// to it).
    mutating func integerValue() -> Int64? {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "-") || (48...57).contains(bytes[index]),
            case .integer(let value)? = number()
        else { return nil }
        return value
    }

    /// A number, as `WireObject.double` reads it.
    mutating func doubleValue() -> Double? {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "-") || (48...57).contains(bytes[index]) else { return nil }
        switch number() {
        case .integer(let value)?: return Double(value)
        case .double(let value)? where value.isFinite: return value
        default: return nil
        }
    }

    mutating func boolValue() -> Bool? {
        skipWhitespace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "t"): return literal("true", .bool(true)) == nil ? nil : true
        case UInt8(ascii: "f"): return literal("false", .bool(false)) == nil ? nil : false
        default: return nil
        }
    }

    /// Checks one value at `depth` as `value(depth:)` would read it, without keeping it.
    mutating func skipValue(depth: Int) -> Bool {
        guard depth < 64 else { return false }
        skipWhitespace()
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"): return skipObject(depth: depth)
        case UInt8(ascii: "["):
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return true
            }
            while true {
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return true
                } else {
                    return false
                }
            }
        case UInt8(ascii: "\""): return skipString()
        default: return value(depth: depth) != nil
        }
    }

    mutating func skipObject(depth: Int) -> Bool {
        members(depth: depth) { _, parser in parser.skipValue(depth: depth + 1) }
    }

    /// A string of printable ASCII without escapes is passed over; any other goes through
    /// `string()`, which checks its escapes and its UTF-8.
    private mutating func skipString() -> Bool {
        var end = index + 1
        while end < bytes.count {
            let c = bytes[end]
            if c == UInt8(ascii: "\"") {
                index = end + 1
                return true
            }
            guard c >= 0x20, c < 0x80, c != UInt8(ascii: "\\") else { return string() != nil }
            end += 1
        }
        return false
    }

    mutating func participant(depth: Int) -> CheckIn.Participant? {
        var id: Int64?
        var first: String?
        var last: String?
        var born: String?
        var isNew: Bool?
        var gender: String?
        let read = members(depth: depth) { name, parser in
            if name.spells("eto_participant_id") { return take(&id, parser.integerValue()) }
            if name.spells("first_name") { return take(&first, parser.stringValue()) }
            if name.spells("last_name") { return take(&last, parser.stringValue()) }
            if name.spells("date_of_birth") { return take(&born, parser.stringValue()) }
            if name.spells("new") { return take(&isNew, parser.boolValue()) }
            if name.spells("gender") { return take(&gender, parser.stringValue()) }
            return parser.skipValue(depth: depth + 1)
        }
        guard read else { return nil }
        return CheckIn.Participant(
            etoParticipantID: id, firstName: first, lastName: last, dateOfBirth: born, isNew: isNew, gender: gender)
    }

    mutating func location(depth: Int) -> CheckIn.Location? {
        var latitude: Double?
        var longitude: Double?
        var accuracy: Double?
        let read = members(depth: depth) { name, parser in
            if name.spells("latitude") { return take(&latitude, parser.doubleValue()) }
            if name.spells("longitude") { return take(&longitude, parser.doubleValue()) }
            if name.spells("accuracy_m") { return take(&accuracy, parser.doubleValue()) }
            return parser.skipValue(depth: depth + 1)
        }
        guard read, let latitude, let longitude, let accuracy else { return nil }
        return CheckIn.Location(latitude: latitude, longitude: longitude, accuracyMeters: accuracy)
    }
}
