import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// The broker's quick check of an EVENT (`Envelope.quickPublishedEvent()`): what producers write
/// passes it with the header the general check reads, and it accepts nothing the general check
/// would refuse or read otherwise.
@Suite("Quick EVENT check")
struct QuickEventCheckTests {
    /// What the general ingest check makes of `envelope`: the header, or the refusal.
    static func general(_ envelope: Envelope) -> Result<EventHeader, ProtocolError> {
        Result { () throws(ProtocolError) -> EventHeader in
            var reference: String?
            return try envelope.parsed(reference: &reference).checkedPublishedEvent()
        }
    }

    static func agrees(_ envelope: Envelope, _ note: @autoclosure () -> String) -> Bool {
        guard let quick = envelope.quickPublishedEvent() else { return false }
        switch general(envelope) {
        case .success(let header): #expect(header == quick, "\(note())")
        case .failure(let error): Issue.record("the quick check accepted what the general check refuses: \(error) (\(note()))")
        }
        return true
    }

    static func event(_ content: some Encodable, schema: String, type: String, key: String? = nil) throws -> Envelope {
        let header = EventHeader(
            type: type, producer: "kiosk-07", producerSeq: 42, time: "2026-11-28T21:00:00.123Z", schema: schema,
            session: "4d0b6c1e-58d4-4c4e-9a51-0f9f4d3e2a10", key: key)
        return Envelope(command: .event, header: header.wireJSON(), content: try WireJSON.encode(content), version: .batchedAcks)
    }

    /// Events as our producers write them: check-ins of every shape, a void, another schema.
    static func written() throws -> [Envelope] {
        let byID = CheckIn(
            participant: .init(etoParticipantID: 1234), siteID: 3, programID: 7, kioskID: "kiosk-07",
            checkedInAt: "2026-11-28T20:59:58Z")
        let byName = CheckIn(
            participant: .init(firstName: "Zoë", lastName: "O'Brien \"Bo\"", dateOfBirth: "1980-02-29"), siteID: 3, programID: 7,
            kioskID: "kiosk-07", checkedInAt: "2026-11-28T20:59:58-08:00", notes: "line one\nline two – ☕️ \\ /", bed: "B-4",
            recordedBy: "staff-0192")
        let walkIn = CheckIn(
            participant: .init(firstName: "Ana", lastName: "Ruiz", dateOfBirth: "2001-07-04", isNew: true, gender: "female"),
            siteID: 9_007_199_254_740_993, programID: 1, kioskID: "desk-2", checkedInAt: "2026-11-28T21:00:00Z")
        let outreach = CheckIn(
            participant: .init(etoParticipantID: 5, firstName: "Sam", lastName: "Lee"), siteID: 3, programID: 7,
            kioskID: "phone-12", checkedInAt: "2026-11-28T21:00:00Z",
            location: .init(latitude: -33.868_82, longitude: 151.209_29, accuracyMeters: 12))
        let void = CheckInVoid(
            checkInEventID: UUIDv7.string(), siteID: 3, programID: 7, kioskID: "desk-2", voidedAt: "2026-11-28T21:01:00Z",
            reason: "entered twice", recordedBy: "staff-0192")
        struct Outcome: Encodable {
            var checkin_event_id = "0193a1b2-0000-7000-8000-000000000001"
            var created = true
            var response_id: Int64 = 77
            var calls = [1.5, -2e-3, 0]
            var nested = ["a": [String?.none, "ß"]]
        }
        return [
            try event(byID, schema: CheckIn.schema, type: CheckIn.type),
            try event(byName, schema: CheckIn.schema, type: CheckIn.type, key: "site-3"),
            try event(walkIn, schema: CheckIn.schema, type: CheckIn.type),
            try event(outreach, schema: CheckIn.schema, type: CheckIn.type),
            try event(void, schema: CheckInVoid.schema, type: CheckInVoid.type),
            try event(Outcome(), schema: "eto.response.recorded/1", type: "eto.response.recorded"),
        ]
    }

    @Test("what producers write passes the quick check, with the header the general check reads")
    func producersPass() throws {
        for envelope in try Self.written() {
            #expect(envelope.quickPublishedEvent() != nil, "\(String(decoding: envelope.content, as: UTF8.self))")
            #expect(Self.agrees(envelope, String(decoding: envelope.content, as: UTF8.self)))
            // Any spacing: the quick check reads JSON, not one spelling of it.
            var spaced = envelope
            spaced.header = Data(" \n{ ".utf8) + envelope.header.dropFirst() + Data(" ".utf8)
            spaced.content = Data(String(decoding: envelope.content, as: UTF8.self).replacingOccurrences(of: ",\"", with: " ,\t\"").utf8)
            spaced.parent = Data("{ }".utf8)
            #expect(Self.agrees(spaced, String(decoding: spaced.content, as: UTF8.self)))
        }
    }

    @Test("every envelope vector: the quick check accepts only what the general check accepts, with the same header")
    func vectors() throws {
        var accepted = 0
        for vector in try Vectors.envelopes() {
            guard let envelope = try? Envelope.check(vector.frames) else { continue }
            if Self.agrees(envelope, vector.name) { accepted += 1 }
        }
        #expect(accepted > 0)
    }

    @Test("what it does not read goes to the general check, refused or not")
    func leftToTheGeneralCheck() throws {
        let base = try Self.written()[0]
        let header = String(decoding: base.header, as: UTF8.self)
        let content = String(decoding: base.content, as: UTF8.self)
        func with(header newHeader: String? = nil, content newContent: String? = nil, parent: String = "{}") -> Envelope {
            var envelope = base
            envelope.header = Data((newHeader ?? header).utf8)
            envelope.content = Data((newContent ?? content).utf8)
            envelope.parent = Data(parent.utf8)
            return envelope
        }
        let cases: [(Envelope, refused: Bool)] = [
            // Accepted by the general check, left to it: the journal writes these headers anew.
            (with(header: header.replacingOccurrences(of: "{", with: #"{"bus_seq":9,"#)), false),
            (with(header: header.replacingOccurrences(of: "\"producer_seq\":42", with: "\"producer_seq\":42.0")), false),
            (with(header: header.replacingOccurrences(of: "{", with: #"{"trace":"x","#)), false),
            (with(header: header.replacingOccurrences(of: "\"producer\"", with: #""produc\u0065r""#)), false),
            // Keys twice: the general check keeps the last.
            (with(header: header.replacingOccurrences(of: "{", with: #"{"type":"other.thing","#)), false),
            (with(content: content.replacingOccurrences(of: "{", with: #"{"site_id":4,"#)), false),
            (with(content: content.replacingOccurrences(of: "\"site_id\":3", with: "\"site_id\":3.0")), false),
            // Refused.
            (with(header: header.replacingOccurrences(of: "\"type\":\"checkin.recorded\"", with: "\"type\":\"groups.recorded\"")), true),
            (with(header: header.replacingOccurrences(of: "\"producer_seq\":42", with: "\"producer_seq\":0")), true),
            (with(header: header.replacingOccurrences(of: "\"producer_seq\":42", with: "\"producer_seq\":1e999")), true),
            (with(header: String(header.dropLast())), true),
            (with(content: content.replacingOccurrences(of: ",\"site_id\":3", with: "")), true),
            (with(content: content.replacingOccurrences(of: "\"site_id\":3", with: "\"site_id\":\"3\"")), true),
            (with(content: content.replacingOccurrences(of: "1234", with: "-1")), true),
            (with(content: content.replacingOccurrences(of: "{", with: #"{"x":1e999,"#)), true),
            (with(content: content + "x"), true),
            (with(parent: "[]"), true),
            (with(parent: "{\"a\":"), true),
        ]
        for (index, (envelope, refused)) in cases.enumerated() {
            #expect(envelope.quickPublishedEvent() == nil, "case \(index)")
            switch Self.general(envelope) {
            case .success: #expect(!refused, "case \(index): the general check accepted it")
            case .failure: #expect(refused, "case \(index): the general check refused it")
            }
        }
    }

    @Test("40,000 mutations of written events: the quick check accepts nothing the general check would not, as it would")
    func mutations() async throws {
        let seeds = try Self.written()
        var random = SeededGenerator(seed: 30)
        let alphabet = Array(#"{}[]",:.-+eE0123456789 \tnulltruefalse_aeiksrpd\u"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF, 0x80]
        var accepted = 0
        for round in 0..<40_000 {
            var envelope = seeds[round % seeds.count]
            switch random.next() % 4 {
            case 0:
                var bytes = Array(envelope.header)
                random.mutate(&bytes, from: alphabet)
                envelope.header = Data(bytes)
            case 1:
                var bytes = Array(envelope.parent)
                random.mutate(&bytes, from: alphabet)
                envelope.parent = Data(bytes)
            default:
                var bytes = Array(envelope.content)
                random.mutate(&bytes, from: alphabet)
                envelope.content = Data(bytes)
            }
            if Self.agrees(envelope, "round \(round): \(String(decoding: envelope.header + envelope.content, as: UTF8.self))") {
                accepted += 1
            }
            await yieldNowAndThen(round)
        }
        // Some mutations keep an event valid (a changed letter in a name, a digit in an id): the
        // test would prove nothing if the quick check gave every one of them up.
        #expect(accepted > 1_000, "accepted \(accepted)")
    }
}
