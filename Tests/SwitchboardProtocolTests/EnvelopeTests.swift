import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// Runs an ingest-side check of one vector the way the broker does: envelope, then command,
/// then header, then payload. Returns the reply word and the error, if any.
func ingestVerdict(_ vector: Vectors.Envelope) -> (reply: String, error: ProtocolError?) {
    let minimum = vector.minimum.flatMap(ProtocolVersion.init) ?? .current
    do {
        let envelope = try Envelope.check(vector.frames, minimumVersion: minimum)
        guard envelope.command == .event || envelope.command == .heartbeat else {
            throw ProtocolError(.unknownCommand, "command \(envelope.command.rawValue) is not accepted on ingest")
        }
        var reference: String?
        let parsed = try envelope.parsed(reference: &reference)
        switch parsed.envelope.command {
        case .event:
            _ = try parsed.checkedPublishedEvent()
            // A producer that sends 1.1 or later reads ACKS (section 6).
            return (envelope.version >= .batchedAcks ? "ACKS" : "ACK", nil)
        case .heartbeat:
            return ("HEAD", nil)
        default:
            throw ProtocolError(.unknownCommand, "command \(parsed.envelope.command.rawValue) is not accepted on ingest")
        }
    } catch {
        return ("ERROR", error as? ProtocolError)
    }
}

@Suite("Envelope and vectors")
struct EnvelopeTests {
    @Test("every envelope vector gets the documented verdict", arguments: try Vectors.envelopes())
    func envelopeVector(_ vector: Vectors.Envelope) {
        let verdict = ingestVerdict(vector)
        #expect(verdict.reply == vector.reply, "\(vector.name): \(verdict.error.map(String.init(describing:)) ?? "accepted")")
        if let code = vector.code {
            #expect(verdict.error?.code.rawValue == code, "\(vector.name)")
        }
        if let word = vector.mentions {
            #expect(verdict.error?.message.contains(word) == true, "\(vector.name): \(verdict.error?.message ?? "")")
        }
    }

    @Test("there are vectors for every error code the ingest path can produce")
    func vectorCoverage() throws {
        let codes = Set(try Vectors.envelopes().compactMap(\.code))
        let inputCodes: [ProtocolError.Code] = [
            .badSignature, .unsupportedVersion, .versionBelowMinimum, .malformed, .tooLarge, .unknownCommand,
            .invalidJSON, .invalidHeader, .invalidTopic, .schemaViolation,
        ]
        for code in inputCodes { #expect(codes.contains(code.rawValue), "no vector for \(code.rawValue)") }
    }

    @Test("encode then decode gives the same envelope")
    func roundTrip() throws {
        let header = EventHeader(type: "checkin.recorded", producer: "k1", producerSeq: 5, schema: CheckIn.schema, session: "s")
        var envelope = try Envelope(command: .event, header: header, content: Data(#"{"a":1}"#.utf8))
        envelope.messageSignature = Data("sig".utf8)
        let decoded = try Envelope.decode(envelope.frames())
        #expect(decoded == envelope)
        #expect(try decoded.decodeHeader(EventHeader.self) == header)
        #expect(envelope.frames()[0] == Data([0x53, 0x57, 0x42, 1, 0]))
    }

    @Test("welcome frames round-trip and a wrong prefix is refused")
    func welcome() throws {
        let welcome = Welcome(broker: "b1", head: 42, first: 1, heartbeatMilliseconds: 1000)
        let frame = try welcome.frame()
        #expect(String(decoding: frame, as: UTF8.self).hasPrefix("$sys.welcome {"))
        #expect(try Welcome.parse(frame) == welcome)
        #expect(throws: ProtocolError.self) { try Welcome.parse(Data("hello".utf8)) }
    }

    @Test("FETCH headers are range-checked")
    func fetchValidation() throws {
        try FetchHeader(from: 1, limit: 10).validate()
        #expect(throws: ProtocolError.self) { try FetchHeader(from: 0).validate() }
        #expect(throws: ProtocolError.self) { try FetchHeader(from: 5, to: 4).validate() }
        #expect(throws: ProtocolError.self) { try FetchHeader(from: 1, limit: 5000).validate() }
    }
}

@Suite("checkin.recorded payload")
struct CheckInTests {
    @Test("every content vector gets the documented verdict", arguments: try Vectors.contents(schema: "checkin.recorded"))
    func contentVector(_ vector: Vectors.Content) {
        do {
            try Payloads.validate(schema: CheckIn.schema, type: CheckIn.type, content: vector.content)
            #expect(vector.valid, "\(vector.name) should have been refused")
        } catch {
            #expect(!vector.valid, "\(vector.name): \(error)")
            #expect(error.code == .schemaViolation)
            if let field = vector.field {
                #expect(error.message.contains("'\(field)'"), "\(vector.name): \(error.message)")
            }
        }
    }

    @Test("every checkin.voided vector gets the documented verdict", arguments: try Vectors.contents(schema: "checkin.voided"))
    func voidVector(_ vector: Vectors.Content) {
        do {
            try Payloads.validate(schema: CheckInVoid.schema, type: CheckInVoid.type, content: vector.content)
            #expect(vector.valid, "\(vector.name) should have been refused")
        } catch {
            #expect(!vector.valid, "\(vector.name): \(error)")
            #expect(error.code == .schemaViolation)
            if let field = vector.field {
                #expect(error.message.contains("'\(field)'"), "\(vector.name): \(error.message)")
            }
            #expect(!error.message.contains("wrong"), "a refusal never quotes the reason: \(error.message)")
        }
    }

    @Test("a void is refused under another event type")
    func voidUnderWrongType() throws {
        let content = Data(
            #"{"checkin_event_id":"019ac1d2-3e4f-7a00-8b00-0123456789ab","site_id":1,"program_id":2,"kiosk_id":"k","voided_at":"2026-11-27T02:14:00Z","reason":"mistake"}"#
                .utf8)
        #expect(throws: ProtocolError.self) { try Payloads.validate(schema: CheckInVoid.schema, type: CheckIn.type, content: content) }
        try Payloads.validate(schema: CheckInVoid.schema, type: CheckInVoid.type, content: content)
    }

    @Test("the summary shows the first name and last initial only")
    func summaryHidesSurname() {
        let checkIn = CheckIn(
            participant: .init(firstName: "Ana", lastName: "Diaz", dateOfBirth: "1990-04-01"), siteID: 12, programID: 3,
            kioskID: "k1", checkedInAt: "2026-11-22T21:04:00.000Z")
        #expect(checkIn.summary == "Ana D. at site 12 program 3 via k1")
        #expect(!checkIn.summary.contains("1990"))
    }
}

@Suite("Identifiers and time")
struct IdentifierTests {
    @Test("UUIDv7 ids are valid, strictly increasing within a process, and carry their time")
    func uuidv7() async {
        var previous = ""
        for round in 0..<10_000 {
            await yieldNowAndThen(round)
            let id = UUIDv7.string()
            #expect(UUIDv7.isValid(id))
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id, "spelled as Foundation spells it, lower case")
            #expect(id > previous)
            previous = id
        }
        let fixed = UUIDv7.encode(milliseconds: 1_700_000_000_123, counter: 5).uuidString.lowercased()
        #expect(UUIDv7.milliseconds(of: fixed) == 1_700_000_000_123)
        #expect(!UUIDv7.isValid("3b241101-e2bb-4255-8caf-4136c566a962"))
    }

    @Test("RFC 3339 timestamps format and parse, with offsets and fractions")
    func timestamps() {
        #expect(Timestamp.format(milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.format(milliseconds: 1_795_381_440_120) == "2026-11-22T21:04:00.120Z")
        #expect(Timestamp.parse("2026-11-22T21:04:00.120Z") == 1_795_381_440_120)
        #expect(Timestamp.parse("2026-11-22T13:04:00.12-08:00") == 1_795_381_440_120)
        #expect(Timestamp.parse("2026-11-22T21:04:00Z") == 1_795_381_440_000)
        #expect(Timestamp.parse("2026-11-22T21:04:00") == nil)
        #expect(Timestamp.parse("2026-02-30T21:04:00Z") == nil)
        #expect(Timestamp.parseDate("2024-02-29") != nil)
        #expect(Timestamp.parseDate("2023-02-29") == nil)
    }

    @Test("topic names follow the rules")
    func topics() {
        #expect(Topic.isValidEventType("checkin.recorded"))
        #expect(Topic.isValidEventType("dlq.filemaker.write-failed"))
        #expect(!Topic.isValidEventType("checkin"))
        #expect(!Topic.isValidEventType("Checkin.recorded"))
        #expect(!Topic.isValidEventType("checkin..recorded"))
        #expect(Topic.matches("checkin.recorded", prefixes: ["checkin."]))
        #expect(!Topic.matches("person.updated", prefixes: ["checkin."]))
        #expect(Topic.matches("person.updated", prefixes: []))
    }
}
