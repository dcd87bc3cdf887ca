import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// The readers and writers that stand in for JSONDecoder and JSONEncoder on a worker's hot path
/// give what the Codable ones give.
@Suite("Headers read and written without Codable")
struct WireReadersTests {
    /// Text of every kind a header string may hold: ASCII, other scripts, the characters JSON
    /// escapes, `/` (written bare, as WireJSON asks), and control characters.
    static func text(_ random: inout SeededGenerator, upTo length: Int = 24) -> String {
        let pieces = [
            "a", "Z", "0", "-", ".", " ", "\"", "\\", "/", "é", "名", "🙂", "\n", "\r", "\t", "\u{01}", "\u{08}", "\u{0C}", "\u{1F}",
            "\u{7F}", "\u{2028}",
        ]
        return String((0..<Int.random(in: 0...length, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined())
    }

    static func header(_ random: inout SeededGenerator) -> EventHeader {
        EventHeader(
            eventID: text(&random), type: text(&random), producer: text(&random),
            producerSeq: Int64.random(in: Int64.min...Int64.max, using: &random),
            busSeq: Bool.random(using: &random) ? Int64.random(in: 1...Int64.max, using: &random) : nil, time: text(&random),
            schema: text(&random), session: text(&random), key: Bool.random(using: &random) ? text(&random) : nil)
    }

    @Test("EventHeader.wireJSON writes WireJSON.encode's bytes, and init(journaled:) reads what JSONDecoder reads")
    func eventHeaders() throws {
        var random = SeededGenerator(seed: 30)
        for _ in 0..<2_000 {
            let header = Self.header(&random)
            let written = header.wireJSON()
            #expect(written == (try WireJSON.encode(header)))
            let read = try EventHeader(journaled: written)
            #expect(read == (try JSONDecoder().decode(EventHeader.self, from: written)))
            #expect(read == header)
        }
        // null for the optional fields is absent; unknown fields are ignored.
        let nulls = Data(
            #"{"bus_seq":null,"event_id":"e","key":null,"producer":"p","producer_seq":3,"schema":"s/1","session":"x","time":"t","type":"a.b","extra":[1]}"#
                .utf8)
        #expect(try EventHeader(journaled: nulls) == JSONDecoder().decode(EventHeader.self, from: nulls))
    }

    @Test("EventHeader(journaled:) refuses what is not a header, naming the field")
    func eventHeaderRefusals() {
        #expect(throws: ProtocolError(.invalidJSON, "header frame is not valid JSON")) { try EventHeader(journaled: Data("{".utf8)) }
        #expect(throws: ProtocolError(.invalidJSON, "header frame must be a JSON object")) { try EventHeader(journaled: Data("[]".utf8)) }
        let missing = Data(#"{"event_id":"e","producer":"p","producer_seq":3,"schema":"s/1","session":"x","time":"t"}"#.utf8)
        #expect(throws: ProtocolError(.invalidHeader, "header: field 'type' is required")) { try EventHeader(journaled: missing) }
        let wrong = Data(#"{"event_id":"e","producer":"p","producer_seq":"3","schema":"s/1","session":"x","time":"t","type":"a.b"}"#.utf8)
        #expect(throws: ProtocolError(.invalidHeader, "header: field 'producer_seq' must be an integer")) {
            try EventHeader(journaled: wrong)
        }
    }

    @Test("DeliverHeader(wire:) reads what JSONDecoder reads from the broker's frame")
    func deliverHeaders() throws {
        var random = SeededGenerator(seed: 31)
        for _ in 0..<2_000 {
            let header = DeliverHeader(
                group: Self.text(&random), busSeq: Int64.random(in: 1...Int64.max, using: &random),
                attempt: Int.random(in: 1...1_000, using: &random), deadline: Self.text(&random),
                ackWaitMilliseconds: Int64.random(in: 0...86_400_000, using: &random), first: Bool.random(using: &random))
            let frame = header.wireJSON()
            let read = try DeliverHeader(wire: frame)
            #expect(read == header)
            #expect(read == (try JSONDecoder().decode(DeliverHeader.self, from: frame)))
        }
        let older = Data(#"{"ack_wait_ms":30000,"attempt":2,"bus_seq":9,"deadline":"d","group":"g"}"#.utf8)
        #expect(try DeliverHeader(wire: older).first == false)
        let null = Data(#"{"ack_wait_ms":30000,"attempt":2,"bus_seq":9,"deadline":"d","first":null,"group":"g"}"#.utf8)
        #expect(try DeliverHeader(wire: null) == JSONDecoder().decode(DeliverHeader.self, from: null))
        let missing = Data(#"{"ack_wait_ms":30000,"bus_seq":9,"deadline":"d","group":"g"}"#.utf8)
        #expect(throws: ProtocolError(.invalidHeader, "header: field 'attempt' is required")) { try DeliverHeader(wire: missing) }
        let notFlag = Data(#"{"ack_wait_ms":30000,"attempt":2,"bus_seq":9,"deadline":"d","first":1,"group":"g"}"#.utf8)
        #expect(throws: ProtocolError(.invalidHeader, "header: field 'first' must be true or false")) { try DeliverHeader(wire: notFlag) }
    }
}
