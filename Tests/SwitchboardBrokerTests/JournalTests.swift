import Foundation
import GRDB
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
        #expect(outcomes[3] == .conflict(existingEventID: first.header.eventID, producerHead: 3), "and names the producer's head")
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

    @Test(
        "the row count and byte sum are kept in journal_meta by each commit and prune, read back at open, and counted again when something else moved the table's ends"
    )
    func totalsSurviveReopen() throws {
        let directory = try TemporaryDirectory("journal")
        defer { directory.remove() }
        let path = directory.path("journal.sqlite")
        func counted(_ journal: Journal) throws -> (Int64, Int64) {
            try journal.queue.read { db in
                (
                    try Int64.fetchOne(db, sql: "SELECT COUNT(*) FROM events") ?? -1,
                    try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM events") ?? -1
                )
            }
        }
        func saved(_ journal: Journal) throws -> Journal.Totals? {
            Journal.Totals(
                try journal.queue.read { db in
                    try String.fetchOne(db, sql: "SELECT value FROM journal_meta WHERE key = ?", arguments: [Journal.Totals.key])
                })
        }
        var journal = try Journal(path: path)
        #expect(try saved(journal) == Journal.Totals(count: 0, bytes: 0, lowest: 0, highest: 0), "a new journal saves its empty totals")
        _ = try journal.append((1...50).map { event("k1", Int64($0)) })
        _ = try journal.append([event("k1", 50), event("k1", 51)])  // a resend adds nothing
        #expect(try saved(journal) == Journal.Totals(count: 51, bytes: journal.storedBytes, lowest: 1, highest: 51))
        #expect(try prune(journal, through: 20) == 20)
        #expect(try saved(journal) == Journal.Totals(count: 31, bytes: journal.storedBytes, lowest: 21, highest: 51))
        let expected = try counted(journal)
        #expect((journal.count, journal.storedBytes) == expected)
        try journal.close()

        journal = try Journal(path: path)
        #expect((journal.count, journal.storedBytes) == expected, "read back, not counted")
        #expect((journal.first, journal.head) == (21, 51))
        try journal.close()

        // Something that does not keep the totals (an older broker) adds a row: the ends moved,
        // so the open counts again, and saves what it counted.
        try DatabaseQueue(path: path).write { db in
            try db.execute(
                sql: """
                    INSERT INTO events (bus_seq, event_id, producer, producer_seq, type, received_at, size, header, parent, metadata, content)
                    VALUES (52, '0190d7a2-0000-7000-8000-000000000052', 'old', 1, 'checkin.recorded', 1000, 1234,
                            x'7b7d', x'7b7d', x'7b7d', x'7b7d')
                    """)
        }
        journal = try Journal(path: path)
        #expect(journal.count == expected.0 + 1)
        #expect(journal.storedBytes == expected.1 + 1234)
        #expect(try saved(journal) == Journal.Totals(count: expected.0 + 1, bytes: expected.1 + 1234, lowest: 21, highest: 52))

        // Retention empties it: empty totals, and the next commit starts them at its first row.
        #expect(try prune(journal, through: 52) == 32)
        #expect(try saved(journal) == Journal.Totals(count: 0, bytes: 0, lowest: 0, highest: 0))
        _ = try journal.append([event("k2", 1)])
        #expect(try saved(journal) == Journal.Totals(count: 1, bytes: journal.storedBytes, lowest: 53, highest: 53))
        #expect((journal.count, journal.storedBytes) == (try counted(journal)))
        #expect(Journal.Totals("1 2 3") == nil && Journal.Totals("a b c d") == nil && Journal.Totals("-1 0 0 0") == nil)
        try journal.close()
    }

    /// Deletes by size until `busSeq` is gone (a chunk as large as needed).
    func prune(_ journal: Journal, through busSeq: Int64) throws -> Int {
        let keep = try journal.queue.read { db in
            try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM events WHERE bus_seq > ?", arguments: [busSeq]) ?? 0
        }
        return try journal.prune(olderThan: nil, maxBytes: keep, chunk: 10_000)
    }

    @Test("age never deletes what a consumer group has not settled; size does")
    func retentionKeepsGroupWork() throws {
        let directory = try TemporaryDirectory("journal")
        defer { directory.remove() }
        let journal = try Journal(path: directory.path("journal.sqlite"))
        _ = try journal.append((1...100).map { event("k1", Int64($0)) })
        // Everything is old; the slowest group has settled through 40.
        #expect(try journal.prune(olderThan: .max, maxBytes: nil, keepingAbove: 40) == 40)
        #expect(journal.first == 41)
        #expect(try journal.prune(olderThan: .max, maxBytes: nil, keepingAbove: 40) == 0)
        // A full disk outranks the group.
        #expect(try journal.prune(olderThan: nil, maxBytes: 0, keepingAbove: 40) == 60)
        try journal.close()
    }

    @Test("group rows survive a reopen: cursor, settled, attempts, replays and dead letters")
    func groupRowsRoundTrip() throws {
        let directory = try TemporaryDirectory("journal")
        defer { directory.remove() }
        let journal = try Journal(path: directory.path("journal.sqlite"))
        _ = try journal.append((1...10).map { event("k1", Int64($0)) })
        var changes = GroupChanges()
        changes.cursor = 3
        changes.settledAdded = [5, 6]
        changes.attempts = [4: GroupAttempts(count: 2, lastFailure: GroupFailure(code: "nacked", message: "later"))]
        changes.replaysAdded = [GroupCandidate(busSeq: 2, key: "person-2")]
        let letter = DeadLetterRecord(
            group: "eto", busSeq: 7, dlqSeq: nil, eventID: "e7", type: "checkin.recorded", key: "person-7", attempts: 5, code: "bad",
            message: "no site", at: 1, state: .dead)
        try journal.commitGroups([
            .create(name: "eto", topics: ["checkin."], cursor: 0, createdAt: 1, start: "earliest"), .changes(group: "eto", changes),
            .deadLetter(letter, eventIndex: nil),
        ])
        try journal.close()
        let reopened = try Journal(path: directory.path("journal.sqlite"))
        let group = try #require(try reopened.loadGroups().first)
        #expect(group.name == "eto" && group.topics == ["checkin."])
        #expect(group.snapshot.cursor == 3 && group.snapshot.settled == [5, 6])
        #expect(group.snapshot.attempts[4]?.count == 2 && group.snapshot.attempts[4]?.lastFailure?.code == "nacked")
        #expect(group.snapshot.replays == [GroupCandidate(busSeq: 2, key: "person-2")])
        #expect(try reopened.deadLetters(group: "eto", state: .dead).map(\.busSeq) == [7])
        try reopened.commitGroups([.delete(group: "eto")])
        #expect(try reopened.loadGroups().isEmpty && reopened.deadLetters(group: "eto", state: nil).isEmpty)
        try reopened.close()
    }

    @Test("attempt rows by the hundred in one commit (several to a statement) are written, replaced and removed exactly")
    func manyAttemptRows() throws {
        let directory = try TemporaryDirectory("journal")
        defer { directory.remove() }
        let journal = try Journal(path: directory.path("journal.sqlite"))
        var changes = GroupChanges()
        for seq in Int64(1)...250 {
            changes.attempts[seq] = GroupAttempts(
                count: Int(seq % 5) + 1, lastFailure: seq % 2 == 0 ? GroupFailure(code: "nacked", message: "try \(seq)") : nil)
        }
        try journal.commitGroups([
            .create(name: "eto", topics: ["checkin."], cursor: 0, createdAt: 1, start: "earliest"), .changes(group: "eto", changes),
        ])
        var more = GroupChanges()
        more.attemptsRemoved = Set(Int64(1)...201)
        more.attempts = [250: GroupAttempts(count: 9, lastFailure: nil), 300: GroupAttempts(count: 1, lastFailure: nil)]
        try journal.commitGroups([.changes(group: "eto", more)])
        try journal.close()
        let reopened = try Journal(path: directory.path("journal.sqlite"))
        let attempts = try #require(try reopened.loadGroups().first).snapshot.attempts
        #expect(Set(attempts.keys) == Set(Int64(202)...250).union([300]))
        #expect(attempts[202]?.count == 3 && attempts[202]?.lastFailure == GroupFailure(code: "nacked", message: "try 202"))
        #expect(attempts[203]?.count == 4 && attempts[203]?.lastFailure == nil)
        #expect(attempts[250]?.count == 9 && attempts[250]?.lastFailure == nil, "replaced")
        try reopened.close()
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
        for busSeq: Int64 in [1, 9, 10, 99, 1_000_000, .max] {
            #expect(Journal.prefixed(raw: Data(#" {"a":1}"#.utf8), busSeq: busSeq) == Data(#"{"bus_seq":\#(busSeq),"a":1}"#.utf8))
        }
        // A frame that is a slice of a larger buffer (its indices do not start at 0).
        let slice = Data(#"xx{"a":1}"#.utf8).dropFirst(2)
        #expect(Journal.prefixed(raw: slice, busSeq: 7) == Data(#"{"bus_seq":7,"a":1}"#.utf8))
    }

    func storedHeader(_ event: PendingEvent, _ busSeq: Int64) throws -> Data {
        event.storedHeader(busSeq: busSeq)
    }
}
