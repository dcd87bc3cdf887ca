import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

@Suite("Journal")
struct JournalTests {
    func event(_ producer: String, _ seq: Int64, id: String = UUIDv7.string()) -> PendingEvent {
        let header = EventHeader(
            eventID: id, type: CheckIn.type, producer: producer, producerSeq: seq, schema: CheckIn.schema, session: "s")
        return PendingEvent(
            header: header, headerFields: JSONValue.parse(header.wireJSON())!.object!, rawHeader: header.wireJSON(),
            parent: Data("{}".utf8), metadata: Data("{}".utf8), content: Events.checkIn(), receivedAt: 1000)
    }

    @Test("one batch mixes new events, resends, a reused event_id and a reused producer_seq; each gets its own outcome")
    func mixedBatch() throws {
        let directory = try TemporaryDirectory("journal")
        defer { directory.remove() }
        let journal = try Journal(path: directory.path("journal.sqlite"))
        let first = event("k1", 1)
        #expect(try journal.append([first]) == [.stored(busSeq: 1, header: try storedHeader(first, 1))])

        let reusedID = event("k1", 2, id: first.header.eventID)
        let reusedSeq = event("k1", 1)
        let fresh = event("k1", 3)
        let outcomes = try journal.append([reusedID, fresh, first, reusedSeq, fresh])
        #expect(outcomes[0] == .duplicate(busSeq: 1))
        #expect(outcomes[1] == .stored(busSeq: 2, header: try storedHeader(fresh, 2)))
        #expect(outcomes[2] == .duplicate(busSeq: 1))
        #expect(outcomes[3] == .conflict(existingEventID: first.header.eventID))
        #expect(outcomes[4] == .duplicate(busSeq: 2))
        #expect(journal.head == 2)
        #expect(journal.count == 2)
        try journal.close()

        // After reopening, the producer's mark is read back from disk.
        let reopened = try Journal(path: directory.path("journal.sqlite"))
        #expect(try reopened.append([fresh]) == [.duplicate(busSeq: 2)])
        #expect(reopened.head == 2)
        #expect(try reopened.append([event("k1", 4)]).first.map { if case .stored(let seq, _) = $0 { seq == 3 } else { false } } == true)
    }

    @Test("retention deletes the oldest first, a bounded chunk per call, and never reuses sequence numbers")
    func pruneInChunks() throws {
        let directory = try TemporaryDirectory("journal")
        defer { directory.remove() }
        let journal = try Journal(path: directory.path("journal.sqlite"))
        _ = try journal.append((1...100).map { event("k1", Int64($0)) })
        #expect(try journal.prune(olderThan: nil, maxBytes: 0, chunk: 30) == 30)
        #expect(journal.first == 31)
        #expect(try journal.prune(olderThan: nil, maxBytes: 0, chunk: 30) == 30)
        #expect(try journal.prune(olderThan: 1001, maxBytes: nil, chunk: 1000) == 40)
        #expect(journal.count == 0)
        #expect(journal.first == 101)
        #expect(journal.storedBytes == 0)
        try journal.close()
        // Emptied by retention and reopened: numbering goes on, never back to 1.
        let reopened = try Journal(path: directory.path("journal.sqlite"))
        #expect(reopened.head == 100)
        #expect(reopened.first == 101)
        let next = try reopened.append([event("k2", 1)])
        #expect(next.first.map { if case .stored(let seq, _) = $0 { seq == 101 } else { false } } == true)
        #expect(reopened.first == 101)
    }

    @Test("the stored header is the producer's bytes with bus_seq added, unknown fields kept; a sent bus_seq is replaced")
    func storedHeaderKeepsFields() throws {
        let raw = Data(#" {"event_id":"x","flavour":{"a":[1,2.5,"é"]}}"#.utf8)
        let fields = JSONValue.parse(raw)!.object!
        let stored = Journal.storedHeader(raw: raw, fields: fields, busSeq: 42)
        var expected = fields
        expected["bus_seq"] = .integer(42)
        #expect(JSONValue.parse(stored) == .object(expected))
        let spoofed = Data(#"{"bus_seq":7,"event_id":"x"}"#.utf8)
        let fixed = Journal.storedHeader(raw: spoofed, fields: JSONValue.parse(spoofed)!.object!, busSeq: 42)
        #expect(JSONValue.parse(fixed) == .object(["bus_seq": .integer(42), "event_id": .string("x")]))
    }

    func storedHeader(_ event: PendingEvent, _ busSeq: Int64) throws -> Data {
        Journal.storedHeader(raw: event.rawHeader, fields: event.headerFields, busSeq: busSeq)
    }
}
