import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite("JSON parser and writer")
struct JSONValueTests {
    @Test(
        "valid JSON parses to the values it spells",
        arguments: [
            (#"{}"#, JSONValue.object([:])),
            (
                #" [1, -2, 3.5, 1e3, 0, -0.25E-2] "#,
                .array([.integer(1), .integer(-2), .double(3.5), .double(1000), .integer(0), .double(-0.0025)])
            ),
            (#"{"a":{"b":[true,false,null]}}"#, .object(["a": .object(["b": .array([.bool(true), .bool(false), .null])])])),
            (#""tab\there \"q\" \\ \/ \u00e9 \ud83d\ude00""#, .string("tab\there \"q\" \\ / é 😀")),
            (#""Tomás García""#, .string("Tomás García")),
            (#"9223372036854775807"#, .integer(Int64.max)),
            (#"9223372036854775808"#, .double(9_223_372_036_854_775_808)),
            (#"{"a":1,"a":2}"#, .object(["a": .integer(2)])),
        ])
    func valid(text: String, expected: JSONValue) {
        #expect(JSONValue.parse(Data(text.utf8)) == expected)
    }

    @Test(
        "invalid JSON is refused",
        arguments: [
            "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{a:1}", "'x'", "01", "1.", ".5", "1e", "-", "+1", "tru", "nul",
            "\"open", "\"bad \\x escape\"", "\"\\ud83d alone\"", "\"\\udc00\"", "\"raw \n newline\"", "[1] 2", "{\"a\" 1}",
            "NaN", "Infinity", "1e999", String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
        ])
    func invalid(text: String) {
        #expect(JSONValue.parse(Data(text.utf8)) == nil, "accepted \(text.prefix(30))")
    }

    /// What `parse` says of `data`, in `isObject`'s terms.
    static func parsedKind(_ data: Data) -> Bool? { JSONValue.parse(data).map { $0.object != nil } }

    @Test(
        "the check that builds nothing accepts exactly what the parse accepts: the cases above, invalid UTF-8, and 30,000 mutations of request headers, parents and contents"
    )
    func checkingAgreesWithParsing() async {
        let cases =
            [
                "{}", " [1, -2, 3.5, 1e3] ", #"{"a":{"b":[true,false,null]}}"#, #""tab\there \u00e9 \ud83d\ude00""#, #"{"a":1,"a":2}"#,
                #"{"name":"Tomás García"}"#, "", "{", "[1,]", "{a:1}", "01", "1e999", "-1e999", "\"\\ud83d alone\"", "{\"a\" 1}",
                String(repeating: "[", count: 63) + String(repeating: "]", count: 63),
                String(repeating: "[", count: 64) + String(repeating: "]", count: 64),
            ].map { Data($0.utf8) } + [
                Data([0x22, 0xC3, 0x28, 0x22]), Data([0x7B, 0x22, 0xC3, 0x28, 0x22, 0x3A, 0x31, 0x7D]), Data([0x22, 0xC3, 0xA9, 0x22]),
            ]
        for data in cases {
            #expect(JSONValue.isObject(data) == Self.parsedKind(data), "\(String(decoding: data, as: UTF8.self).prefix(40))")
        }
        var random = SeededGenerator(seed: 47)
        let seeds = [
            #"{"idempotent":true,"operation":"programs.list","request_id":"0193a5f2-7c1e-7a3b-9c4d-5e6f7a8b9c0e","timeout_ms":5000}"#,
            #"{"site_id":12,"include_disabled":false,"names":["Ana","Zoë \u00e9\n"],"ratio":-0.25e-2,"none":null}"#,
            #"[{"a":[1,2,{"b":"c"}]},"x",3.5,true]"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]",:0123456789.eE+-\ /abtnfruloqsé"#.utf8) + [0xC3, 0xA9, 0x80, 0xFF, 0x00, 0x0A]
        var disagreements: [String] = []
        for round in 0..<30_000 {
            var bytes = seeds[round % seeds.count]
            random.mutate(&bytes, from: alphabet)
            let data = Data(bytes)
            if JSONValue.isObject(data) != Self.parsedKind(data) { disagreements.append(String(decoding: bytes, as: UTF8.self)) }
            await yieldNowAndThen(round)
        }
        let first = disagreements.prefix(3)
        #expect(disagreements.count == 0, "for example \(first)")
    }

    @Test("invalid UTF-8 inside a string is refused")
    func invalidUTF8() {
        #expect(JSONValue.parse(Data([0x22, 0xC3, 0x28, 0x22])) == nil)
        #expect(JSONValue.parse(Data([0x22, 0xC3, 0xA9, 0x22])) == .string("é"))
    }

    @Test("the fast EVENT header writer and the Codable reader agree, escapes included")
    func headerRoundTrip() throws {
        let header = EventHeader(
            type: "checkin.recorded", producer: "k-1", producerSeq: 7, busSeq: 99, schema: CheckIn.schema,
            session: "a \"quoted\"\nsession\u{01}", key: "name:ana|diaz|")
        let data = header.wireJSON()
        #expect(try JSONDecoder().decode(EventHeader.self, from: data) == header)
        var asSent = header
        asSent.busSeq = nil  // the wire reader ignores a producer's bus_seq: the broker sets it
        #expect(try EventHeader(wire: JSONValue.parse(data)!.object!) == asSent)
        var noSeq = header
        noSeq.busSeq = nil
        noSeq.key = nil
        #expect(try JSONDecoder().decode(EventHeader.self, from: noSeq.wireJSON()) == noSeq)
        let ack = AckHeader(eventID: header.eventID, producer: "k-1", producerSeq: 7, busSeq: 99, duplicate: true)
        #expect(try JSONDecoder().decode(AckHeader.self, from: ack.wireJSON()) == ack)
    }

    @Test("the wire reader of check-ins agrees with the Codable one")
    func checkInAgreement() throws {
        let checkIn = CheckIn(
            participant: .init(etoParticipantID: 4, firstName: "Ana", lastName: "Diaz", dateOfBirth: "1990-04-01"), siteID: 12,
            programID: 3, kioskID: "k", checkedInAt: "2026-11-22T21:04:00.000Z",
            location: .init(latitude: 47, longitude: -122.5, accuracyMeters: 10), notes: "n")
        let data = try WireJSON.encode(checkIn)
        #expect(try CheckIn(wire: JSONValue.parse(data)!) == checkIn)
    }
}
