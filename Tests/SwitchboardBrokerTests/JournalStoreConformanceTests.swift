// One suite, every store: the same checks run against the SQLite journal (a real file) and the
// PostgreSQL store (a real server that `PostgresServer` starts for this process, a fresh
// database per test). A PostgreSQL case is cancelled, with the reason, only where PostgreSQL is
// not installed.

import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardStorage
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// The stores the suite runs against.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// Fresh storage of one kind, which can be opened again (a broker restart).
final class StoreUnderTest {
    let kind: StoreKind
    let directory: TemporaryDirectory
    let settings: PostgresJournalSettings?

    init(_ kind: StoreKind) async throws {
        var settings: PostgresJournalSettings?
        if kind == .postgres {
            guard let server = try await PostgresServer.shared() else {
                try skipWithoutPostgres()
                throw PostgresUnavailable()
            }
            settings = Self.settings(server, database: try await server.makeDatabase())
        }
        self.kind = kind
        self.settings = settings
        directory = try TemporaryDirectory("journal-store")
    }

    static func settings(_ server: PostgresServer, database: String) -> PostgresJournalSettings {
        var settings = PostgresJournalSettings()
        settings.host = server.host
        settings.port = server.port
        settings.user = server.user
        settings.database = database
        settings.passwordFile = server.passwordFile
        settings.tls = .disable
        settings.timeout = .seconds(30)
        return settings
    }

    func open() throws -> any JournalStore {
        switch kind {
        case .sqlite: return try Journal(path: directory.path("journal.sqlite"))
        case .postgres:
            var logger = Logger(label: "test-journal")
            logger.logLevel = .warning
            return try PostgresJournalStore(settings: settings!, logger: logger)
        }
    }

    deinit { directory.remove() }
}

extension PostgresSuites {
    @Suite("JournalStore conformance", .serialized)
    struct JournalStoreConformanceTests {
        static func event(
            _ producer: String, _ seq: Int64, id: String = UUIDv7.string(), type: String = CheckIn.type, content: Data = Events.checkIn(),
            receivedAt: Int64 = 1000
        ) -> PendingEvent {
            let header = EventHeader(eventID: id, type: type, producer: producer, producerSeq: seq, schema: CheckIn.schema, session: "s")
            return PendingEvent(
                header: header, headerFields: JSONValue.parse(header.wireJSON())!.object!, rawHeader: header.wireJSON(),
                parent: Data("{}".utf8), metadata: Data("{}".utf8), content: content, receivedAt: receivedAt)
        }

        static func stored(_ outcome: AppendOutcome?) -> Int64? {
            if case .stored(let seq, _)? = outcome { seq } else { nil }
        }

        @Test(
            "a batch mixes new events, resends, a reused event_id and a reused producer_seq; reopening keeps head, marks and identity",
            arguments: StoreKind.allCases)
        func duplicatesAndConflicts(kind: StoreKind) async throws {
            let storage = try await StoreUnderTest(kind)
            let journal = try storage.open()
            let first = Self.event("k1", 1)
            let firstHeader = first.storedHeader(busSeq: 1)
            #expect(try journal.append([first]) == [.stored(busSeq: 1, header: firstHeader)])

            let reusedID = Self.event("k1", 2, id: first.header.eventID)
            let reusedSeq = Self.event("k1", 1)
            let fresh = Self.event("k1", 3)
            let outcomes = try journal.append([reusedID, fresh, first, reusedSeq, fresh])
            #expect(outcomes[0] == .duplicate(busSeq: 1))
            #expect(
                outcomes[1] == .stored(busSeq: 2, header: fresh.storedHeader(busSeq: 2))
            )
            #expect(outcomes[2] == .duplicate(busSeq: 1))
            #expect(outcomes[3] == .conflict(existingEventID: first.header.eventID, producerHead: 3))
            #expect(outcomes[4] == .duplicate(busSeq: 2))
            // In one batch: a producer_seq used twice is a conflict with the event of the same batch.
            let a = Self.event("k2", 1)
            let b = Self.event("k2", 1)
            let inBatch = try journal.append([a, b])
            #expect(Self.stored(inBatch[0]) == 3)
            #expect(inBatch[1] == .conflict(existingEventID: a.header.eventID, producerHead: 1))
            #expect(journal.head == 3 && journal.count == 3 && journal.first == 1)
            let identity = journal.brokerID
            #expect(!identity.isEmpty)
            let bytes = journal.storedBytes
            try journal.close()

            // Reopened: the producers' marks come from storage, numbering goes on.
            let reopened = try storage.open()
            #expect(reopened.brokerID == identity)
            #expect(reopened.head == 3 && reopened.count == 3 && reopened.storedBytes == bytes)
            #expect(try reopened.append([fresh]) == [.duplicate(busSeq: 2)])
            #expect(try reopened.append([Self.event("k2", 1)]) == [.conflict(existingEventID: a.header.eventID, producerHead: 1)])
            #expect(Self.stored(try reopened.append([Self.event("k1", 4)]).first) == 4)
            try reopened.close()
        }

        @Test("bus_seq is dense across batches with resends between; read returns every event in order", arguments: StoreKind.allCases)
        func denseSequence(kind: StoreKind) async throws {
            let storage = try await StoreUnderTest(kind)
            let journal = try storage.open()
            var sent: [PendingEvent] = []
            var seqs: [Int64] = []
            for round in 0..<5 {
                let batch = (1...(round * 7 + 1)).map { Self.event("p\(round % 2)", Int64(sent.count + $0)) }
                // Resend two earlier events in the middle of the batch.
                let resends = sent.suffix(2)
                let outcomes = try journal.append(Array(batch.prefix(1)) + resends + Array(batch.dropFirst()))
                seqs += outcomes.compactMap(Self.stored)
                #expect(outcomes.count == batch.count + resends.count)
                sent += batch
            }
            #expect(seqs == Array(1...Int64(sent.count)))
            #expect(journal.head == Int64(sent.count) && journal.count == Int64(sent.count))
            let (events, through) = try journal.read(from: 1, to: nil, topics: [], limit: 1000)
            #expect(events.map(\.busSeq) == seqs && through == journal.head)
            #expect(try journal.events([5, 2, 9_999]).map(\.busSeq) == [2, 5])
            try journal.close()
        }

        @Test("read filters by topics, limit, excluded prefixes and outcome families", arguments: StoreKind.allCases)
        func readFilters(kind: StoreKind) async throws {
            let storage = try await StoreUnderTest(kind)
            let journal = try storage.open()
            _ = try journal.append([
                Self.event("kiosk-1", 1, type: "checkin.recorded"),  // 1
                Self.event("kiosk-2", 1, type: "checkin.recorded"),  // 2
                Self.event("eto", 1, type: "eto.done", content: Data(#"{"bus_seq":1}"#.utf8)),  // 3
                Self.event("eto", 2, type: "eto.done", content: Data(#"{"bus_seq":2}"#.utf8)),  // 4
                Self.event("broker", 1, type: "dlq.eto", content: Data(#"{"bus_seq":1}"#.utf8)),  // 5
                Self.event("kiosk-1", 2, type: "checkin.voided"),  // 6
            ])
            func seqs(
                from: Int64 = 1, to: Int64? = nil, _ topics: [String], limit: Int = 100, excluding: [String] = [],
                outcomes: (producer: String, families: [String])? = nil
            ) throws -> ([Int64], Int64) {
                let (events, through) = try journal.read(
                    from: from, to: to, topics: topics, limit: limit, excluding: excluding, outcomes: outcomes)
                return (events.map(\.busSeq), through)
            }
            #expect(try seqs(["checkin."]) == ([1, 2, 6], 6))
            #expect(try seqs(["checkin.recorded", "dlq."]) == ([1, 2, 5], 6))
            #expect(try seqs([], limit: 2) == ([1, 2], 2), "a full page ends at its last event")
            #expect(try seqs(from: 2, to: 4, []) == ([2, 3, 4], 4))
            #expect(try seqs([], excluding: ["dlq.", "eto."]) == ([1, 2, 6], 6))
            #expect(try seqs([], outcomes: ("kiosk-1", ["eto.", "dlq."])) == ([3, 5], 6))
            #expect(try seqs([], outcomes: ("kiosk-2", ["eto."])) == ([4], 6))
            #expect(try seqs(from: 7, []) == ([], 6), "nothing beyond the head")
            #expect(try seqs(from: .max, []) == ([], 6))
            let window = try journal.read(from: 1, to: nil, topics: [], limit: 100, scanWindow: 3, excluding: [], outcomes: nil)
            #expect(window.events.map(\.busSeq) == [1, 2, 3] && window.through == 3)
            #expect(try journal.count(after: 1, topics: ["checkin."]) == 2)
            #expect(try journal.count(after: 0, topics: []) == 6)
            try journal.close()
        }

        @Test("retention deletes the oldest in chunks, keeps group work by age, and never reuses numbers", arguments: StoreKind.allCases)
        func retention(kind: StoreKind) async throws {
            let storage = try await StoreUnderTest(kind)
            let journal = try storage.open()
            _ = try journal.append((1...100).map { Self.event("k1", Int64($0)) })
            #expect(try journal.prune(olderThan: nil, maxBytes: 0, chunk: 30) == 30)
            #expect(journal.first == 31)
            #expect(try journal.prune(olderThan: .max, maxBytes: nil, keepingAbove: 40) == 10)
            #expect(journal.first == 41)
            #expect(try journal.prune(olderThan: .max, maxBytes: nil, keepingAbove: 40) == 0)
            #expect(try journal.prune(olderThan: 1001, maxBytes: nil, chunk: 1000) == 60)
            #expect(journal.count == 0 && journal.storedBytes == 0 && journal.first == 101)
            #expect(try journal.read(from: 1, to: nil, topics: [], limit: 10).events.isEmpty)
            try journal.close()
            let reopened = try storage.open()
            #expect(reopened.head == 100 && reopened.first == 101)
            #expect(Self.stored(try reopened.append([Self.event("k2", 1)]).first) == 101)
            // A deleted event's producer_seq is no longer known to the store (as with SQLite).
            #expect(Self.stored(try reopened.append([Self.event("k1", 100)]).first) == 102)
            try reopened.close()
        }

        @Test(
            "group rows and dead letters round-trip: cursor, settled, attempts, replays, pages, codes, reset, delete",
            arguments: StoreKind.allCases)
        func groupRows(kind: StoreKind) async throws {
            let storage = try await StoreUnderTest(kind)
            let journal = try storage.open()
            _ = try journal.append((1...10).map { Self.event("k1", Int64($0)) })
            var changes = GroupChanges()
            changes.cursor = 3
            changes.settledAdded = [5, 6]
            changes.attempts = [
                4: GroupAttempts(count: 2, lastFailure: GroupFailure(code: "nacked", message: "later")), 8: GroupAttempts(count: 1),
            ]
            changes.replaysAdded = [GroupCandidate(busSeq: 2, key: "person-2"), GroupCandidate(busSeq: 1)]
            func letter(_ seq: Int64, at: Int64, code: String = "bad", group: String = "eto") -> DeadLetterRecord {
                DeadLetterRecord(
                    group: group, busSeq: seq, dlqSeq: nil, eventID: "e\(seq)", type: "checkin.recorded", key: "person-\(seq)", attempts: 5,
                    code: code, message: "no site", at: at, state: .dead)
            }
            // The dead letter's dlq event is journaled in the same commit and named by index.
            let dlq = Self.event("broker", 1, type: "dlq.eto", content: Data(#"{"bus_seq":7}"#.utf8))
            let outcomes = try journal.commit(
                events: [dlq],
                groups: [
                    .create(name: "eto", topics: ["checkin."], cursor: 0, createdAt: 1, start: "earliest"), .changes(group: "eto", changes),
                    .deadLetter(letter(7, at: 20), eventIndex: 0), .deadLetter(letter(9, at: 10, code: "worse"), eventIndex: nil),
                    .create(name: "fm", topics: [], cursor: 5, createdAt: 2, start: "head"),
                    .deadLetter(letter(10, at: 10, group: "fm"), eventIndex: nil),
                ])
            #expect(Self.stored(outcomes.first) == 11)
            try journal.close()

            let reopened = try storage.open()
            let groups = try reopened.loadGroups()
            #expect(groups.map(\.name) == ["eto", "fm"])
            let eto = try #require(groups.first)
            #expect(eto.topics == ["checkin."] && eto.createdAt == 1 && eto.start == "earliest")
            #expect(eto.snapshot.cursor == 3 && eto.snapshot.settled == [5, 6])
            #expect(eto.snapshot.attempts[4] == GroupAttempts(count: 2, lastFailure: GroupFailure(code: "nacked", message: "later")))
            #expect(eto.snapshot.attempts[8] == GroupAttempts(count: 1))
            #expect(Set(eto.snapshot.replays) == [GroupCandidate(busSeq: 2, key: "person-2"), GroupCandidate(busSeq: 1)])
            #expect(groups[1].topics == [] && groups[1].snapshot.cursor == 5)

            // Dead letters: order by (at, group, bus_seq), pages, codes, counts, one by key.
            let all = try reopened.deadLetters(group: nil, state: nil)
            #expect(all.map { "\($0.group)/\($0.busSeq)" } == ["eto/9", "fm/10", "eto/7"])
            #expect(all.last?.dlqSeq == 11, "the dlq event's bus_seq, from the same commit")
            let page = try reopened.deadLetterPage(group: nil, state: nil, after: nil, newest: false, limit: 2)
            let next = try reopened.deadLetterPage(
                group: nil, state: nil, after: DeadLetterCursor(at: page[1].at, group: page[1].group, busSeq: page[1].busSeq),
                newest: false,
                limit: 2)
            #expect(next.map(\.busSeq) == [7])
            #expect(try reopened.deadLetterPage(group: nil, state: nil, after: nil, newest: true, limit: 1).map(\.busSeq) == [7])
            #expect(try reopened.deadLetterCodes(group: "eto", state: .dead) == ["bad": 1, "worse": 1])
            #expect(try reopened.deadLetterCodes(DeadLetterFilter(code: "bad", before: 15)) == ["bad": 1])
            #expect(try reopened.deadLetter(group: "eto", busSeq: 9)?.code == "worse")
            #expect(try reopened.deadLetter(group: "eto", busSeq: 1) == nil)

            // Operator changes: a replay, the next changes, then a reset and a delete.
            var more = GroupChanges()
            more.cursor = 6
            more.settledRemoved = [6]
            more.attemptsRemoved = [4]
            more.replaysRemoved = [1]
            more.attempts = [8: GroupAttempts(count: 2, lastFailure: GroupFailure(code: "timeout", message: "slow"))]
            try reopened.commitGroups([
                .deadLetterState(group: "eto", busSeq: 7, state: .replayed), .changes(group: "eto", more),
            ])
            #expect(try reopened.deadLetterCounts()["eto"] == [.dead: 1, .replayed: 1])
            let after = try #require(try reopened.loadGroups().first)
            #expect(after.snapshot.cursor == 6 && after.snapshot.settled.isEmpty)
            #expect(after.snapshot.attempts.keys.sorted() == [8] && after.snapshot.attempts[8]?.lastFailure?.code == "timeout")
            #expect(after.snapshot.replays == [GroupCandidate(busSeq: 2, key: "person-2")])
            try reopened.commitGroups([.reset(group: "eto", cursor: 0, start: "earliest")])
            let reset = try #require(try reopened.loadGroups().first)
            #expect(reset.snapshot == GroupSnapshot(cursor: 0))
            try reopened.commitGroups([.delete(group: "eto")])
            #expect(try reopened.loadGroups().map(\.name) == ["fm"])
            #expect(try reopened.deadLetters(group: "eto", state: nil).isEmpty)
            #expect(try reopened.deadLetters(group: "fm", state: nil).count == 1)
            try reopened.close()
        }
    }
}

extension PostgresSuites {
    @Suite("PostgreSQL journal store", .serialized)
    struct PostgresJournalStoreTests {
        func server() async throws -> PostgresServer {
            guard let server = try await PostgresServer.shared() else {
                try skipWithoutPostgres()
                throw PostgresUnavailable()
            }
            return server
        }

        @Test("a lost connection is a journal fault (the server cannot be reached), and the next commit reconnects")
        func reconnects() async throws {
            let server = try await server()
            let database = try await server.makeDatabase()
            var logger = Logger(label: "test-journal")
            logger.logLevel = .critical
            let store = try PostgresJournalStore(settings: StoreUnderTest.settings(server, database: database), logger: logger)
            defer { try? store.close() }
            _ = try store.append([JournalStoreConformanceTests.event("k1", 1)])
            try await server.terminateConnections(database: database)
            var stored: Int64?
            var faults: [StorageFault] = []
            for seq in 2...3 where stored == nil {
                do {
                    stored = JournalStoreConformanceTests.stored(
                        try store.append([JournalStoreConformanceTests.event("k1", Int64(seq))]).first)
                } catch let fault as StorageFault {
                    faults.append(fault)
                }
            }
            #expect(stored == 2, "no number is used up by a batch that failed")
            #expect(faults.count <= 1)
            #expect(faults.allSatisfy { $0.cause == .unreachable })
            #expect(store.head == 2)
        }

        @Test("a wrong password is refused with the server's words, and the password is in no error")
        func wrongPassword() async throws {
            let server = try await server()
            let directory = try TemporaryDirectory("pg-password")
            defer { directory.remove() }
            let secret = "not-the-password-\(UUID().uuidString)"
            let path = directory.path("password")
            #expect(FileManager.default.createFile(atPath: path, contents: Data(secret.utf8), attributes: [.posixPermissions: 0o600]))
            var settings = StoreUnderTest.settings(server, database: try await server.makeDatabase())
            settings.passwordFile = path
            do {
                _ = try PostgresJournalStore(settings: settings, logger: Logger(label: "test"))
                Issue.record("a wrong password was accepted")
            } catch {
                let text = "\(error) \(String(reflecting: error))"
                #expect(text.contains("28P01"), "\(text)")
                #expect(!text.contains(secret))
            }
            // A password file others can read is refused before anything connects.
            chmod(path, 0o644)
            #expect(throws: PostgresJournalSetupError.self) {
                _ = try PostgresJournalStore(settings: settings, logger: Logger(label: "test"))
            }
        }

        @Test("the broker runs on PostgreSQL: publish, ACK, replay, and a restarted broker keeps its head and identity")
        func brokerRoundTrip() async throws {
            let server = try await server()
            let settings = StoreUnderTest.settings(server, database: try await server.makeDatabase())
            let fixture = try await BrokerFixture.start {
                $0.journalStore = .postgres
                $0.postgres = settings
            }
            let producer = try await fixture.producer()
            var acked: [Int64] = []
            for seq in 1...3 {
                let ack = try await Events.exchange(producer, try Events.frames(producer: "kiosk-pg", seq: Int64(seq)).1)
                #expect(ack.command == .ack)
                acked.append(try ack.decodeHeader(AckHeader.self).busSeq)
            }
            #expect(acked == [1, 2, 3])
            let replay = try await fixture.replayClient()
            try await replay.send(try Envelope(command: .fetch, header: FetchHeader(from: 1, limit: 10)).frames())
            var replayed: [Int64] = []
            while true {
                let envelope = try Envelope.decode(try await replay.receive().frames)
                if envelope.command == .end {
                    #expect(try envelope.decodeHeader(EndHeader.self).head == 3)
                    break
                }
                replayed.append(try envelope.decodeHeader(EventHeader.self).busSeq ?? -1)
            }
            #expect(replayed == [1, 2, 3])
            await fixture.stop()

            let store = try PostgresJournalStore(settings: settings, logger: Logger(label: "test"))
            #expect(store.head == 3 && store.count == 3)
            try store.close()
        }

        @Test("while its database is down the broker NACKs unavailable, naming the cause, and ACKs again once it is back")
        func brokerOutage() async throws {
            guard let server = try await PostgresServer.own() else {
                try skipWithoutPostgres()
                throw PostgresUnavailable()
            }
            defer { try? server.stop() }
            let settings = StoreUnderTest.settings(server, database: try await server.makeDatabase())
            let fixture = try await BrokerFixture.start {
                $0.journalStore = .postgres
                $0.postgres = settings
            }
            let producer = try await fixture.producer()
            let first = try await Events.exchange(producer, try Events.frames(producer: "kiosk-pg", seq: 1).1)
            #expect(first.command == .ack)
            try server.stop()
            let (_, frames) = try Events.frames(producer: "kiosk-pg", seq: 2)
            let refused = try await Events.exchange(producer, frames, timeout: .seconds(30))
            #expect(refused.command == .nack)
            let nack = try refused.decodeHeader(NackHeader.self)
            #expect(nack.code == .unavailable && nack.retryable)
            #expect(nack.reason == "the journal could not store the event: the database server cannot be reached", "\(nack.reason)")
            try server.restart()
            // The resend, as the producer's outbox makes it: journaled under the next number, no gap.
            let again = try await Events.exchange(producer, frames, timeout: .seconds(30))
            #expect(again.command == .ack)
            #expect(try again.decodeHeader(AckHeader.self).busSeq == 2)
            await fixture.stop()
        }

        @Test("a server that accepts the connection and never answers is a fault within the time-out, not a hang")
        func silentServer() throws {
            let (port, listener) = try PostgresSuites.silentListener()
            defer { close(listener) }
            var settings = PostgresJournalSettings()
            settings.port = port
            settings.tls = .disable
            settings.timeout = .milliseconds(300)
            let started = ContinuousClock.now
            #expect {
                _ = try PostgresJournalStore(settings: settings, logger: Logger(label: "test"))
            } throws: { error in
                (error as? StorageFault)?.cause == .unreachable
            }
            #expect(started.duration(to: .now) < .seconds(5))
        }
    }
}

/// What `skipWithoutPostgres()` would throw if skipping ever returned.
struct PostgresUnavailable: Error {}

/// Skips the running test, naming why: the machine has no PostgreSQL server (the package could
/// not be installed). Declared to return, and called before a `throw`: a `try` of the
/// never-returning `Test.cancel` in a `guard`'s `else` made the compiler warn "will never be
/// executed" at an unknown location.
func skipWithoutPostgres() throws {
    try Test.cancel(Comment(rawValue: PostgresServer.unavailable ?? "no PostgreSQL server"))
}
