import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// `DeliverHeader.plain`, a member's reader for the DELIVER headers our broker writes: whatever it
/// reads is what `DeliverHeader(wire:)` reads from the same bytes; what it does not read (nil)
/// goes to that general path.
@Suite("DELIVER headers without the general parse")
struct DeliverHeaderTests {
    /// The promise: a header `plain` reads, the general path reads to the same value.
    static func agrees(_ header: Data, _ note: @autoclosure () -> String) {
        guard let fast = DeliverHeader.plain(header) else { return }
        switch Result(catching: { () throws(ProtocolError) -> DeliverHeader in try DeliverHeader(wire: header) }) {
        case .success(let value): #expect(value == fast, "\(note())")
        case .failure(let error): Issue.record("plain read \(fast), the general path refused: \(error) (\(note()))")
        }
    }

    @Test("what the broker writes is read, first or not, to the value the general path reads")
    func brokersDeliveries() {
        let cases: [(Int64, Int, Bool)] = [(1, 1, true), (42, 3, false), (999_999_999_999_999_999, 1_000_000, false)]
        for (busSeq, attempt, first) in cases {
            let deliver = DeliverHeader(
                group: "eto-checkins_2", busSeq: busSeq, attempt: attempt, deadline: "2026-11-29T08:00:10.812Z",
                ackWaitMilliseconds: 30_000, first: first)
            let bytes = deliver.wireJSON()
            #expect(DeliverHeader.plain(bytes) == deliver, "\(String(decoding: bytes, as: UTF8.self))")
            Self.agrees(bytes, "\(busSeq)")
        }
    }

    @Test(
        "a run's header frames, and wireJSON, are the object's compact sorted form, for 2,000 seeded deliveries, escapes, zeros and extremes included"
    )
    func runFrames() {
        var random = SeededGenerator(seed: 32)
        let groups = ["eto", "filemaker-writer_2", "a"]
        let deadlines = ["2026-11-29T08:00:10.812Z", "", "quote \" and \\ and \n"]
        var values: [(Int64, Int)] = [(1, 1), (0, 0), (Int64.max, Int.max), (Int64.min, Int.min), (-7, -1), (9, 10), (10, 9)]
        for _ in 0..<2_000 {
            values.append((Int64.random(in: 1...999_999_999_999_999_999, using: &random), Int.random(in: 1...1_000_000, using: &random)))
        }
        for (index, (busSeq, attempt)) in values.enumerated() {
            let group = groups[index % groups.count]
            let deadline = deadlines[index % deadlines.count]
            let ackWait: Int64 = index % 2 == 0 ? 30_000 : 1
            let frames = DeliverHeaderFrames(group: group, deadline: deadline, ackWaitMilliseconds: ackWait)
            for first in [false, true] {
                // The same object written by the general writer: keys sorted by it, not by hand.
                var fields: [String: JSONValue] = [
                    "ack_wait_ms": .integer(ackWait), "attempt": .integer(Int64(attempt)), "bus_seq": .integer(busSeq),
                    "deadline": .string(deadline), "group": .string(group),
                ]
                if first { fields["first"] = .bool(true) }
                let canonical = JSONValue.object(fields).compactData
                let made = frames.header(busSeq: busSeq, attempt: attempt, first: first)
                #expect(made == canonical, "\(String(decoding: made, as: UTF8.self)) against \(String(decoding: canonical, as: UTF8.self))")
                let whole = DeliverHeader(
                    group: group, busSeq: busSeq, attempt: attempt, deadline: deadline, ackWaitMilliseconds: ackWait, first: first)
                #expect(whole.wireJSON() == made)
            }
        }
    }

    @Test("other orders, spaces, escapes, other keys, false or null first, zeros and big numbers go to the general path")
    func shapes() throws {
        let plain = #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"}"#
        let expected = DeliverHeader(group: "eto", busSeq: 7, attempt: 1, deadline: "2026-11-29T08:00:10.812Z", ackWaitMilliseconds: 30_000)
        #expect(DeliverHeader.plain(Data(plain.utf8)) == expected)
        let left = [
            #"{"attempt":1,"ack_wait_ms":30000,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"}"#,
            #"{ "ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"} "#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"e\u0074o"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","first":false,"group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","first":null,"group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"eto","x":1}"#,
            #"{"ack_wait_ms":0,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":01,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7.0,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":1234567890123456789,"deadline":"2026-11-29T08:00:10.812Z","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812\u005a","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29 08:00","group":"eto"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z","group":"ETO"}"#,
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":7,"deadline":"2026-11-29T08:00:10.812Z"}"#, "", "{}",
        ]
        for header in left {
            #expect(DeliverHeader.plain(Data(header.utf8)) == nil, "\(header)")
            // The general path still reads the well-formed ones among them.
            Self.agrees(Data(header.utf8), header)
        }
        #expect(try DeliverHeader(wire: Data(left[0].utf8)) == expected)
    }

    @Test("the DELIVER vectors, and 20,000 mutations of the broker's spelling: plain reads nothing the general path would not")
    func vectorsAndMutations() async throws {
        var vectors = 0
        for vector in try Vectors.groupHeaders() where vector.command == "DELIVER" {
            vectors += 1
            Self.agrees(vector.header, vector.name)
        }
        #expect(vectors >= 2)
        var random = SeededGenerator(seed: 31)
        let seeds = [
            #"{"ack_wait_ms":30000,"attempt":1,"bus_seq":1043,"deadline":"2026-11-22T21:04:30.144Z","first":true,"group":"eto"}"#,
            #"{"ack_wait_ms":1,"attempt":1000000,"bus_seq":999999999999999999,"deadline":"2026-11-22T21:04:30Z","group":"a_b-9"}"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]",:0123456789aeotgrupbs_-\ .ETZfnl"#.utf8)
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            random.mutate(&bytes, from: alphabet)
            Self.agrees(Data(bytes), String(decoding: bytes, as: UTF8.self))
            await yieldNowAndThen(round)
        }
    }
}
