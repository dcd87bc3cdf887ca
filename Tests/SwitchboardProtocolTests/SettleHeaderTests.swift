import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// `SettleHeader.plain`, the broker's reader for plain ACK, NACK and PROGRESS envelopes: whatever
/// it reads is what the general parse and `SettleHeader(_:wire:)` read from the same envelope,
/// so the refusals do not change; what it does not read (nil) goes to the general path.
@Suite("Settle headers without the general parse")
struct SettleHeaderTests {
    /// What the broker's general path makes of `envelope`: the settle, or the refusal.
    static func general(_ envelope: Envelope) -> Result<SettleHeader, ProtocolError> {
        Result { () throws(ProtocolError) -> SettleHeader in
            var reference: String?
            let parsed = try envelope.parsed(reference: &reference)
            let outcome: SettleHeader.Outcome =
                switch envelope.command {
                case .nack: .nack
                case .term: .term
                case .progress: .progress
                default: .ack
                }
            return try SettleHeader(outcome, wire: parsed.header)
        }
    }

    /// The promise: a header `plain` reads, the general path reads to the same value.
    static func agrees(_ envelope: Envelope, _ note: @autoclosure () -> String) {
        guard let fast = SettleHeader.plain(envelope) else { return }
        switch general(envelope) {
        case .success(let value): #expect(value == fast, "\(note())")
        case .failure(let error): Issue.record("plain read \(fast), the general path refused: \(error) (\(note()))")
        }
    }

    @Test("what our members send is read, to the value the general path reads, for ACK, NACK and PROGRESS; TERM is left to it")
    func membersSettles() throws {
        for outcome in [SettleHeader.Outcome.ack, .nack, .progress, .term] {
            for (busSeq, attempt) in [(1, 1), (42, 3), (999_999_999_999_999_999, 1_000_000)] as [(Int64, Int)] {
                var settle = SettleHeader(outcome, group: "eto-checkins_2", busSeq: busSeq, attempt: attempt)
                if outcome == .term { settle.code = "bad-data" }
                let envelope = Envelope(command: settle.command, header: settle.wireJSON())
                if outcome == .term {
                    #expect(SettleHeader.plain(envelope) == nil)
                } else {
                    #expect(SettleHeader.plain(envelope) == settle, "\(String(decoding: settle.wireJSON(), as: UTF8.self))")
                }
                Self.agrees(envelope, "\(outcome)")
            }
        }
    }

    @Test("any key order is read; spaces, escapes, other keys, repeats, leading zeros, big numbers and other frames go to the general path")
    func shapes() {
        let read = [
            #"{"group":"eto","bus_seq":7,"attempt":2}"#, #"{"attempt":2,"group":"eto","bus_seq":7}"#,
            #"{"bus_seq":7,"attempt":2,"group":"eto"}"#,
        ]
        for header in read {
            let envelope = Envelope(command: .ack, header: Data(header.utf8))
            #expect(SettleHeader.plain(envelope) == SettleHeader(.ack, group: "eto", busSeq: 7, attempt: 2), "\(header)")
            Self.agrees(envelope, header)
        }
        let left = [
            #"{ "group":"eto","bus_seq":7,"attempt":2}"#, #"{"group":"eto","bus_seq":7,"attempt":2} "#,
            #"{"group":"e\u0074o","bus_seq":7,"attempt":2}"#, #"{"gr\u006fup":"eto","bus_seq":7,"attempt":2}"#,
            #"{"group":"eto","bus_seq":7,"attempt":2,"delay_ms":5}"#, #"{"group":"eto","bus_seq":7,"bus_seq":8}"#,
            #"{"group":"eto","bus_seq":07,"attempt":2}"#, #"{"group":"eto","bus_seq":0,"attempt":2}"#,
            #"{"group":"eto","bus_seq":7.0,"attempt":2}"#, #"{"group":"eto","bus_seq":1e3,"attempt":2}"#,
            #"{"group":"eto","bus_seq":-7,"attempt":2}"#, #"{"group":"eto","bus_seq":"7","attempt":2}"#,
            #"{"group":"eto","bus_seq":1234567890123456789,"attempt":2}"#, #"{"group":"eto","bus_seq":7,"attempt":1000001}"#,
            #"{"group":"ETO","bus_seq":7,"attempt":2}"#, #"{"group":"7eto","bus_seq":7,"attempt":2}"#,
            #"{"group":"","bus_seq":7,"attempt":2}"#, #"{"group":"eto","bus_seq":7}"#, #"{"group":"eto","bus_seq":7,"attempt":2"#,
            #"{"group":"eto","bus_seq":7,"attempt":2}x"#, #"{"group":null,"bus_seq":7,"attempt":2}"#, "", "{}",
            #"[{"group":"eto","bus_seq":7,"attempt":2}]"#, #"{"group":"eto","bus_seq":7,"attempt":2,}"#,
        ]
        for header in left {
            let envelope = Envelope(command: .ack, header: Data(header.utf8))
            #expect(SettleHeader.plain(envelope) == nil, "\(header)")
        }
        let plainHeader = Data(#"{"group":"eto","bus_seq":7,"attempt":2}"#.utf8)
        for envelope in [
            Envelope(command: .ack, header: plainHeader, content: Data(#"{"note":1}"#.utf8)),
            Envelope(command: .ack, header: plainHeader, parent: Data("{ }".utf8)),
            Envelope(command: .ack, header: plainHeader, metadata: Data("[]".utf8)),
            Envelope(command: .term, header: plainHeader), Envelope(command: .join, header: plainHeader),
            Envelope(command: .heartbeat, header: plainHeader),
        ] {
            #expect(SettleHeader.plain(envelope) == nil, "\(envelope.command)")
        }
    }

    @Test(
        "every consumer-group header vector of a settle, and 20,000 mutations of plain ones: plain reads nothing the general path would not"
    )
    func vectorsAndMutations() async throws {
        let commands: [String: Command] = ["ACK": .ack, "NACK": .nack, "PROGRESS": .progress, "TERM": .term]
        for vector in try Vectors.groupHeaders() {
            guard let command = commands[vector.command] else { continue }
            Self.agrees(Envelope(command: command, header: vector.header), vector.name)
            if !vector.valid { #expect(SettleHeader.plain(Envelope(command: command, header: vector.header)) == nil, "\(vector.name)") }
        }
        var random = SeededGenerator(seed: 30)
        let seeds = [
            #"{"group":"eto","bus_seq":7,"attempt":2}"#, #"{"attempt":1000000,"bus_seq":999999999999999999,"group":"a_b-9"}"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]",:0123456789aeotgrupbs_-\ .E"#.utf8)
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            random.mutate(&bytes, from: alphabet)
            let command: Command = [.ack, .nack, .progress][round % 3]
            Self.agrees(Envelope(command: command, header: Data(bytes)), String(decoding: bytes, as: UTF8.self))
            await yieldNowAndThen(round)
        }
    }
}
