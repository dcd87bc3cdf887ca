import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// A member's ACKS (protocol 1.2, section 15.2): what it writes is read back, and `GroupAcks.plain`,
/// the broker's reader for the compact spelling, reads nothing the general parse and
/// `GroupAcks(wire:)` would read otherwise or refuse.
@Suite("Member ACKS")
struct GroupAcksTests {
    /// What the broker's general path makes of `envelope`: the ACKS, or the refusal.
    static func general(_ envelope: Envelope) -> Result<GroupAcks, ProtocolError> {
        Result { () throws(ProtocolError) -> GroupAcks in
            var reference: String?
            return try GroupAcks(wire: envelope.parsed(reference: &reference).header)
        }
    }

    static func agrees(_ envelope: Envelope, _ note: @autoclosure () -> String) {
        guard let fast = GroupAcks.plain(envelope) else { return }
        switch general(envelope) {
        case .success(let value): #expect(value == fast, "\(note())")
        case .failure(let error): Issue.record("plain read \(fast.deliveries.count) pairs, the general path refused: \(error) (\(note()))")
        }
    }

    static func envelope(_ header: String, version: ProtocolVersion = .memberAcks) -> Envelope {
        Envelope(command: .acks, header: Data(header.utf8), version: version)
    }

    @Test("what a member writes is read back by both readers, from 1 pair to 1000, at the largest values")
    func written() {
        for count in [1, 2, 17, 1000] {
            let deliveries = (0..<count).map { HeldDelivery(busSeq: FetchHeader.maximumSequence - Int64($0), attempt: 1_000_000 - $0) }
            let acks = GroupAcks(group: "eto-checkins_2", deliveries: deliveries)
            let envelope = acks.envelope()
            #expect(envelope.version == .memberAcks)
            #expect(GroupAcks.plain(envelope) == acks)
            #expect((try? Self.general(envelope).get()) == acks)
        }
    }

    @Test("the compact spelling in either key order is read; every other spelling, version or frame goes to the general path")
    func shapes() {
        for header in [#"{"acks":[[7,2],[9,1]],"group":"eto"}"#, #"{"group":"eto","acks":[[7,2],[9,1]]}"#] {
            #expect(
                GroupAcks.plain(Self.envelope(header))
                    == GroupAcks(group: "eto", deliveries: [HeldDelivery(busSeq: 7, attempt: 2), HeldDelivery(busSeq: 9, attempt: 1)]))
        }
        let left = [
            #"{ "acks":[[7,2]],"group":"eto"}"#, #"{"acks":[[7,2]],"group":"eto"} "#, #"{"acks":[[7, 2]],"group":"eto"}"#,
            #"{"acks":[],"group":"eto"}"#, #"{"acks":[[7]],"group":"eto"}"#, #"{"acks":[[7,2,1]],"group":"eto"}"#,
            #"{"acks":[[07,2]],"group":"eto"}"#, #"{"acks":[[0,2]],"group":"eto"}"#, #"{"acks":[[7,0]],"group":"eto"}"#,
            #"{"acks":[[7.0,2]],"group":"eto"}"#, #"{"acks":[[1e3,2]],"group":"eto"}"#, #"{"acks":[[-7,2]],"group":"eto"}"#,
            #"{"acks":[["7",2]],"group":"eto"}"#, #"{"acks":[[9007199254740993,2]],"group":"eto"}"#,
            #"{"acks":[[7,1000001]],"group":"eto"}"#, #"{"acks":[[7,2]],"group":"ETO"}"#, #"{"acks":[[7,2]],"group":"7eto"}"#,
            #"{"acks":[[7,2]],"group":""}"#, #"{"acks":[[7,2]]}"#, #"{"group":"eto"}"#, #"{"acks":[[7,2]],"group":"e\u0074o"}"#,
            #"{"acks":[[7,2]],"group":"eto","x":1}"#, #"{"acks":[[7,2]],"acks":[[8,2]]}"#, #"{"acks":[[7,2],],"group":"eto"}"#,
            #"{"acks":[[7,2]],"group":"eto"}x"#, #"{"acks":[[7,2]],"group":null}"#, "", "{}",
            #"{"acks":[\#(Array(repeating: "[7,2]", count: 1001).joined(separator: ","))],"group":"eto"}"#,
        ]
        for header in left { #expect(GroupAcks.plain(Self.envelope(header)) == nil, "\(header)") }
        let plainHeader = #"{"acks":[[7,2]],"group":"eto"}"#
        #expect(GroupAcks.plain(Self.envelope(plainHeader, version: .batchedAcks)) == nil)
        #expect(GroupAcks.plain(Self.envelope(plainHeader, version: .current)) == nil)
        for envelope in [
            Envelope(command: .acks, header: Data(plainHeader.utf8), content: Data(#"{"note":1}"#.utf8), version: .memberAcks),
            Envelope(command: .acks, header: Data(plainHeader.utf8), parent: Data("{ }".utf8), version: .memberAcks),
            Envelope(command: .ack, header: Data(plainHeader.utf8), version: .memberAcks),
        ] {
            #expect(GroupAcks.plain(envelope) == nil, "\(envelope.command)")
        }
    }

    @Test("every ACKS vector, and 20,000 mutations of plain ones: plain reads nothing the general path would not")
    func vectorsAndMutations() async throws {
        for vector in try Vectors.groupHeaders() where vector.command == "ACKS" {
            let envelope = Envelope(command: .acks, header: vector.header, version: .memberAcks)
            Self.agrees(envelope, vector.name)
            if !vector.valid { #expect(GroupAcks.plain(envelope) == nil, "\(vector.name)") }
        }
        var random = SeededGenerator(seed: 12)
        let seeds = [#"{"acks":[[7,2],[9,1]],"group":"eto"}"#, #"{"group":"a_b-9","acks":[[9007199254740992,1000000]]}"#].map {
            Array($0.utf8)
        }
        let alphabet = Array(#"{}[]",:0123456789acekgroup_-\ .E"#.utf8)
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            random.mutate(&bytes, from: alphabet)
            Self.agrees(Envelope(command: .acks, header: Data(bytes), version: .memberAcks), String(decoding: bytes, as: UTF8.self))
            await yieldNowAndThen(round)
        }
    }
}
