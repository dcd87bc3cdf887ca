import Foundation
import SwitchboardProtocol
import Testing

/// Section 2's JSON rules on every header, whichever reader the command goes through: the
/// EVENT path (`ParsedEnvelope`, our parser) and the Codable one (`decodeHeader`, FETCH, REQUEST
/// and the rest), which used Foundation's `JSONDecoder` and so kept the first of two repeated
/// keys and called a 400-digit number invalid JSON.
@Suite("Header JSON rules: repeated keys and numbers beyond any double")
struct HeaderJSONRulesTests {
    static let huge = "1" + String(repeating: "0", count: 400)

    static func event(header: String) -> [Data] {
        let content =
            #"{"checked_in_at":"2026-11-22T21:04:00.000Z","kiosk_id":"k1","participant":{"first_name":"Ana","last_name":"Diaz","date_of_birth":"1990-04-01"},"program_id":3,"site_id":12}"#
        return Envelope(command: .event, header: Data(header.utf8), content: Data(content.utf8)).frames()
    }

    static func eventHeader(producerSeq: String, extra: String = "") -> String {
        #"{"event_id":"0193a5f2-7c1e-7a3b-9c4d-5e6f7a8b10b1","producer":"k1","producer_seq":\#(producerSeq),"schema":"checkin.recorded/1","session":"s","time":"2026-11-22T21:04:00.120Z","type":"checkin.recorded"\#(extra)}"#
    }

    /// The `ProtocolError` `body` throws (nil: none, or another error).
    static func failure(_ body: () throws -> Void) -> ProtocolError? {
        do {
            try body()
            return nil
        } catch {
            return error as? ProtocolError
        }
    }

    @Test("a 400-digit producer_seq on EVENT is invalid-header naming the field, not invalid-json")
    func hugeProducerSeq() {
        for number in [Self.huge, "-" + Self.huge, "1e400"] {
            let error = Self.failure { _ = try Envelope.parse(Self.event(header: Self.eventHeader(producerSeq: number))).checkedEvent() }
            #expect(error?.code == .invalidHeader, "\(number.prefix(8)): \(String(describing: error))")
            #expect(error?.message.contains("'producer_seq'") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a huge number in an unknown header field is refused too, naming it, so it is never journaled")
    func hugeUnknownField() {
        let header = Self.eventHeader(producerSeq: "1", extra: #","zz":{"depth":[1,\#(Self.huge)]}"#)
        let error = Self.failure { _ = try Envelope.parse(Self.event(header: header)).checkedEvent() }
        #expect(error?.code == .invalidHeader)
        #expect(error?.message.contains("'zz.depth[1]'") == true, "\(error?.message ?? "")")
    }

    @Test("a huge number in content, parent or metadata is still invalid-json")
    func hugeElsewhere() {
        var frames = Self.event(header: Self.eventHeader(producerSeq: "1"))
        frames[5] = Data(#"{"n":\#(Self.huge)}"#.utf8)
        #expect(Self.failure { _ = try Envelope.parse(frames) }?.code == .invalidJSON)
        frames = Self.event(header: Self.eventHeader(producerSeq: "1"))
        frames[4] = Data(#"{"n":1e400}"#.utf8)
        #expect(Self.failure { _ = try Envelope.parse(frames) }?.code == .invalidJSON)
    }

    @Test("a huge number in a Codable-read header (FETCH, REQUEST) is invalid-header naming the field")
    func hugeCodableHeaders() {
        let fetch = Envelope(command: .fetch, header: Data(#"{"request_id":"r","from":\#(Self.huge),"topics":[],"limit":5}"#.utf8))
        let fetchError = Self.failure { _ = try fetch.decodeHeader(FetchHeader.self) }
        #expect(fetchError?.code == .invalidHeader, "\(String(describing: fetchError))")
        #expect(fetchError?.message.contains("'from'") == true, "\(fetchError?.message ?? "")")

        let request = Envelope(
            command: .request, header: Data(#"{"request_id":"r","operation":"a.b","timeout_ms":-\#(Self.huge)}"#.utf8))
        let requestError = Self.failure { _ = try request.decodeHeader(RequestHeader.self) }
        #expect(requestError?.code == .invalidHeader, "\(String(describing: requestError))")
        #expect(requestError?.message.contains("'timeout_ms'") == true, "\(requestError?.message ?? "")")
    }

    @Test("of a repeated key in a Codable-read header the last value wins")
    func duplicateKeysCodable() throws {
        let fetch = Envelope(
            command: .fetch, header: Data(#"{"request_id":"r","from":9,"topics":["a"],"limit":5,"from":2,"topics":["b","c"]}"#.utf8))
        let header = try fetch.decodeHeader(FetchHeader.self)
        #expect(header.from == 2)
        #expect(header.topics == ["b", "c"])

        let request = Envelope(
            command: .request, header: Data(#"{"request_id":"r","operation":"first.op","timeout_ms":100,"operation":"last.op"}"#.utf8))
        #expect(try request.decodeHeader(RequestHeader.self).operation == "last.op")

        // The last value decides validity as well: a string after an integer is a mistyped field.
        let mistyped = Envelope(command: .fetch, header: Data(#"{"request_id":"r","from":1,"topics":[],"limit":5,"from":"1"}"#.utf8))
        let error = Self.failure { _ = try mistyped.decodeHeader(FetchHeader.self) }
        #expect(error?.code == .invalidHeader)
        #expect(error?.message.contains("'from'") == true, "\(error?.message ?? "")")
    }

    @Test("of a repeated key on the EVENT path the last value wins")
    func duplicateKeysEvent() throws {
        let header = try Envelope.parse(Self.event(header: Self.eventHeader(producerSeq: #""7","producer_seq":7"#))).checkedEvent()
        #expect(header.producerSeq == 7)
        let error = Self.failure {
            _ = try Envelope.parse(Self.event(header: Self.eventHeader(producerSeq: #"7,"producer_seq":"7""#))).checkedEvent()
        }
        #expect(error?.code == .invalidHeader)
        #expect(error?.message.contains("'producer_seq'") == true)
    }

    @Test("the parser keeps a huge number only when asked, and the writer writes it back as valid JSON")
    func keepingHugeNumbers() throws {
        let text = Data(#"{"a":-\#(Self.huge),"b":1e400,"a":1e999}"#.utf8)
        #expect(JSONValue.parse(text) == nil)
        let (value, notes) = try #require(JSONValue.parse(text, keepingHugeNumbers: true))
        #expect(notes.hugeNumbers && notes.duplicateKeys)
        #expect(value == .object(["a": .double(.infinity), "b": .double(.infinity)]))
        #expect(value.hugeNumberPath == "a")
        #expect(String(decoding: JSONValue.object(["n": .double(-.infinity)]).compactData, as: UTF8.self) == #"{"n":-1e999}"#)
        #expect(JSONValue.parse(Data(#"{"a":1,"a":2}"#.utf8), keepingHugeNumbers: false)?.notes.duplicateKeys == true)
    }
}
