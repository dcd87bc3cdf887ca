import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

@Suite("Recent events in memory, read as the journal reads them")
struct RecentEventsTests {
    static let types = ["checkin.recorded", "checkin.voided", "eto.response.recorded", "person.created", "checkin.recordedx"]

    static func event(_ seq: Int64) -> PendingEvent {
        let type = types[Int(seq) % types.count]
        let key: String? = seq % 3 == 0 ? nil : "person-\(seq % 7)"
        let header = EventHeader(
            eventID: UUIDv7.string(), type: type, producer: "kiosk-1", producerSeq: seq, schema: "other/1", session: "s", key: key)
        return PendingEvent(
            header: header, headerFields: JSONValue.parse(header.wireJSON())!.object!, rawHeader: header.wireJSON(),
            parent: Data("{}".utf8), metadata: Data("{}".utf8), content: Data(#"{"n":\#(seq)}"#.utf8), receivedAt: 1000)
    }

    /// Journals `count` events in batches of 37 and offers each stored one to `ring`, as the
    /// broker's `publish` does.
    static func fill(_ journal: Journal, _ ring: inout RecentEvents, from: Int64, count: Int64) throws {
        var seq = from
        while seq < from + count {
            let batch = (seq..<min(seq + 37, from + count)).map(event)
            for (index, outcome) in try journal.append(batch).enumerated() {
                guard case .stored(let busSeq, let header) = outcome else { continue }
                let e = batch[index]
                ring.append(
                    JournaledEvent(
                        busSeq: busSeq, type: e.header.type, header: header, parent: e.parent, metadata: e.metadata, content: e.content),
                    key: e.header.key)
            }
            seq += Int64(batch.count)
        }
    }

    @Test("every read the ring answers is the journal's answer, events, keys and `through`; what it does not hold it leaves to the journal")
    func sameAsTheJournal() throws {
        let directory = try TemporaryDirectory("recent")
        defer { directory.remove() }
        let journal = try Journal(path: directory.path("journal.sqlite"))
        var ring = RecentEvents(capacity: 300)
        try Self.fill(journal, &ring, from: 1, count: 1000)
        #expect(ring.first == 701 && ring.last == 1000 && journal.head == 1000)
        let topicSets: [[String]] = [[], ["checkin.recorded"], ["checkin."], ["person.created", "eto."], ["nothing"]]
        var answered = 0
        for from: Int64 in [1, 600, 700, 701, 702, 850, 999, 1000, 1001, 5000] {
            for topics in topicSets {
                for limit in [1, 3, 50, 1000] {
                    let fromJournal = try journal.read(from: from, to: nil, topics: topics, limit: limit)
                    guard
                        let fromMemory = ring.read(
                            from: from, topics: topics, limit: limit, head: journal.head, journalFirst: journal.first)
                    else {
                        #expect(from < 701 || from > 1000, "the ring holds \(from)…1000 but did not answer")
                        continue
                    }
                    answered += 1
                    #expect(fromMemory.events.map(\.event) == fromJournal.events, "from \(from) topics \(topics) limit \(limit)")
                    #expect(fromMemory.through == fromJournal.through, "from \(from) topics \(topics) limit \(limit)")
                    #expect(fromMemory.events.map(\.key) == fromJournal.events.map { BrokerCore.orderingKey($0.header) })
                }
            }
        }
        #expect(answered == 5 * topicSets.count * 4)

        // An event that does not follow the last one (journaled behind the ring's back) starts
        // the run again; until then the ring holds less than the head and answers nothing.
        _ = try journal.append([Self.event(5000)])
        #expect(ring.read(from: 950, topics: [], limit: 10, head: journal.head, journalFirst: journal.first) == nil)
        try Self.fill(journal, &ring, from: 5001, count: 5)
        #expect(ring.first == 1002 && ring.last == 1006)
        #expect(ring.read(from: 1002, topics: [], limit: 10, head: journal.head, journalFirst: journal.first)?.events.count == 5)
        #expect(ring.read(from: 1001, topics: [], limit: 10, head: journal.head, journalFirst: journal.first) == nil)

        // Retention deleted what the ring still holds: the read starts at the journal's first.
        let ahead = ring.read(from: 1, topics: [], limit: 10, head: journal.head, journalFirst: 1004)
        #expect(ahead?.events.map(\.event.busSeq) == [1004, 1005, 1006])
    }
}
