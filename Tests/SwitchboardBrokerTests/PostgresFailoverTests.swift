// Issue 29, deliverable 4: PostgreSQL's own failover. A primary with a synchronous streaming
// replica (`PostgresReplicaPair`, Debian's packages), the primary's postmaster killed with -9 in
// the middle of a stream of events, the replica promoted; the journal store and the lease, given
// both servers in `journal.postgres.host`, find the new primary. Nothing acknowledged may be
// lost, what was refused is resent and acknowledged once, and `bus_seq` has no gap and nothing
// twice. Also the host list's parsing and validation, which need no server.

import Dispatch
import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardStorage
import SwitchboardTesting
import Synchronization
import Testing
import ZeroMQ

@testable import SwitchboardBroker

@Suite("journal.postgres.host: a list of servers")
struct PostgresHostListTests {
    @Test("entries are host or host:port, IPv6 in brackets with a port; journal.postgres.port is the default")
    func parses() throws {
        let servers = try PostgresJournalSettings.servers(in: "db1, db2:6433,[fd00::2]:7000,::1,10.0.0.5", defaultPort: 5432)
        #expect(
            servers.map(\.description) == ["db1:5432", "db2:6433", "[fd00::2]:7000", "[::1]:5432", "10.0.0.5:5432"])
        var settings = PostgresJournalSettings()
        settings.host = "db1,db2:6433"
        settings.user = "broker"
        settings.database = "bus"
        settings.passwordFile = "/run/pg-password"
        #expect(settings.location == "postgresql://broker@db1:5432,db2:6433/bus")
        #expect(!settings.isLoopback)
        settings.host = "127.0.0.1:5432,localhost:5433,::1"
        #expect(settings.isLoopback)
    }

    @Test("the list comes from a flag, a variable, or the file as text or an array")
    func sources() throws {
        let base = ["SWITCHBOARD_BROKER_INSECURE": "true", "SWITCHBOARD_BROKER_JOURNAL_STORE": "postgres"]
        let flag = try ConfigurationTests.read(file: nil, flags: ["--journal-postgres-host", "db1,db2:6433"], environment: base)
        #expect(flag.postgres.servers.map(\.description) == ["db1:5432", "db2:6433"])
        var environment = base
        environment["SWITCHBOARD_BROKER_JOURNAL_POSTGRES_HOST"] = "db1, db2:6433"
        let variable = try ConfigurationTests.read(file: nil, environment: environment)
        #expect(variable.postgres.servers.map(\.description) == ["db1:5432", "db2:6433"])
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        for text in [#"{"journal": {"postgres": {"host": "db1,db2:6433"}}}"#, #"{"journal": {"postgres": {"host": ["db1", "db2:6433"]}}}"#]
        {
            let file = directory.path("broker.json")
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let read = try ConfigurationTests.read(file: file, environment: base)
            #expect(read.postgres.servers.map(\.description) == ["db1:5432", "db2:6433"], "\(text)")
        }
    }

    @Test(
        "a bad entry is refused naming journal.postgres.host; tls = disable needs every server on loopback",
        arguments: [
            ("db1,,db2", "journal.postgres.host"),
            ("db1:0", "journal.postgres.host"),
            ("db1:70000", "journal.postgres.host"),
            ("db1:five", "journal.postgres.host"),
            ("[fd00::2:5432", "journal.postgres.host"),
            ("db 1", "journal.postgres.host"),
            ("127.0.0.1,db.example.org", "every server is on loopback"),
        ])
    func refuses(host: String, mentions: String) throws {
        var environment = ["SWITCHBOARD_BROKER_INSECURE": "true", "SWITCHBOARD_BROKER_JOURNAL_STORE": "postgres"]
        environment["SWITCHBOARD_BROKER_JOURNAL_POSTGRES_HOST"] = host
        environment["SWITCHBOARD_BROKER_JOURNAL_POSTGRES_TLS"] = "disable"
        do {
            _ = try ConfigurationTests.read(file: nil, environment: environment)
            Issue.record("accepted \(host)")
        } catch {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }
}

extension PostgresSuites {
    @Suite("PostgreSQL store on a list of servers")
    struct PostgresHostListConnectTests {
        @Test("a server that accepts and never answers is given up after the time-out, and the next one in the list is used")
        func silentFirstServer() async throws {
            guard let server = try await PostgresServer.shared() else {
                try skipWithoutPostgres()
                throw PostgresUnavailable()
            }
            let (port, listener) = try PostgresSuites.silentListener()
            defer { close(listener) }
            var settings = StoreUnderTest.settings(server, database: try await server.makeDatabase())
            settings.host = "127.0.0.1:\(port),\(server.host):\(server.port)"
            settings.timeout = .milliseconds(500)
            let started = ContinuousClock.now
            let store = try PostgresJournalStore(settings: settings, logger: PostgresFailoverTests.quiet)
            defer { try? store.close() }
            #expect(started.duration(to: .now) < .seconds(5))
            #expect(JournalStoreConformanceTests.stored(try store.append([JournalStoreConformanceTests.event("k1", 1)]).first) == 1)
        }
    }
}

extension PostgresSuites {
    @Suite("PostgreSQL failover: a primary killed, its synchronous replica promoted", .serialized)
    struct PostgresFailoverTests {
        static let quiet = Logger(label: "test.failover") { _ in SwiftLogNoOpLogHandler() }

        /// A fresh pair (each test kills its primary), with a database made on the primary.
        static func pair() async throws -> (PostgresReplicaPair, PostgresJournalSettings) {
            guard let pair = try await PostgresReplicaPair.start() else {
                try skipWithoutPostgres()
                throw PostgresUnavailable()
            }
            var settings = PostgresJournalSettings()
            settings.host = pair.hostList
            settings.user = pair.user
            settings.database = try await pair.makeDatabase()
            settings.passwordFile = pair.passwordFile
            settings.tls = .disable
            settings.timeout = .seconds(10)
            return (pair, settings)
        }

        /// The event IDs of the journal, by bus_seq, read by a new store (the new primary's).
        static func journal(_ settings: PostgresJournalSettings) throws -> [(busSeq: Int64, eventID: String)] {
            let store = try PostgresJournalStore(settings: settings, logger: quiet)
            defer { try? store.close() }
            return try store.read(from: 1, to: nil, topics: [], limit: 100_000).events.map { event in
                let fields = try JSONSerialization.jsonObject(with: event.header) as? [String: Any]
                return (event.busSeq, fields?["event_id"] as? String ?? "?")
            }
        }

        @Test(
            "the store skips a standby listed first, and after kill -9 of the primary and the promotion finds the new primary: every committed batch is there, the failed one's resend commits once, no gap"
        )
        func storeFollowsPromotion() async throws {
            // A pair a failed test leaves running is stopped at exit.
            let (pair, settings) = try await Self.pair()
            // The replica first in the list: it is in recovery, so the store passes it over.
            var reversed = settings
            reversed.host = "\(pair.host):\(pair.replicaPort),\(pair.host):\(pair.primaryPort)"
            let store = try PostgresJournalStore(settings: reversed, logger: Self.quiet)
            defer { try? store.close() }
            #expect(
                store.location
                    == "postgresql://postgres@\(pair.host):\(pair.replicaPort),\(pair.host):\(pair.primaryPort)/\(settings.database)"
            )
            #expect(!store.location.contains(try String(contentsOfFile: pair.passwordFile, encoding: .utf8)))
            var committed: [String: Int64] = [:]
            for seq in 1...20 {
                let event = JournalStoreConformanceTests.event("k1", Int64(seq))
                committed[event.header.eventID] = JournalStoreConformanceTests.stored(try store.append([event]).first)
            }
            #expect(Set(committed.values) == Set(1...20))

            try await pair.killPrimary()
            // With the primary gone and the replica not yet promoted, no server takes writes.
            let refused = JournalStoreConformanceTests.event("k1", 21)
            do {
                _ = try store.append([refused])
                Issue.record("a commit succeeded with no primary")
            } catch let fault as StorageFault {
                #expect(fault.cause == .unreachable, "\(fault)")
            }
            try await pair.promote()
            #expect(try await pair.replicaInRecovery() == false)
            // The resend, as an outbox makes it, commits on the new primary under the next number.
            var stored: Int64?
            try await waitUntil("the resend commits on the promoted replica", timeout: .seconds(30), interval: .milliseconds(100)) {
                stored = JournalStoreConformanceTests.stored(try? store.append([refused]).first)
                return stored != nil
            }
            #expect(stored == 21)
            committed[refused.header.eventID] = 21
            let journal = try Self.journal(settings)
            #expect(journal.map(\.busSeq) == Array(1...21))
            #expect(Dictionary(uniqueKeysWithValues: journal.map { ($0.eventID, $0.busSeq) }) == committed)
            await pair.stop()
        }

        /// One producer's events, sent one at a time over a real socket and resent until ACKed.
        final class Producer: Sendable {
            let socket: AsyncSocket
            /// bus_seq by event ID, as ACKed.
            let acked = Mutex<[String: Int64]>([:])
            let nacked = Mutex(0)
            let silent = Mutex(0)

            init(_ socket: AsyncSocket) { self.socket = socket }

            var ackedCount: Int { acked.withLock { $0.count } }

            /// Sends `seq`'s EVENT until it is ACKed: after a NACK (`unavailable`) or no answer, the
            /// same event again (same event ID and producer_seq), as an outbox resends. Answers to
            /// an earlier send of another event (late ones) are set aside by their event ID.
            func publish(_ seq: Int64, timeout: Duration) async throws {
                let (header, frames) = try Events.frames(producer: "kiosk-failover", seq: seq)
                try await waitUntil("event \(seq) is ACKed", timeout: timeout, interval: .milliseconds(100)) {
                    try await socket.send(frames)
                    while let answer = try await socket.receive(timeout: .seconds(15)) {
                        let envelope = try Envelope.decode(answer.frames)
                        if envelope.command == .ack {
                            let ack = try envelope.decodeHeader(AckHeader.self)
                            acked.withLock { $0[ack.eventID] = ack.busSeq }
                            if ack.eventID == header.eventID { return true }
                        } else if envelope.command == .nack {
                            let nack = try envelope.decodeHeader(NackHeader.self)
                            #expect(nack.code == .unavailable && nack.retryable, "\(nack.reason)")
                            if nack.eventID == header.eventID {
                                nacked.withLock { $0 += 1 }
                                return false
                            }
                        }
                    }
                    silent.withLock { $0 += 1 }
                    return false
                }
            }
        }

        @Test(
            "a broker on the pair: 200 EVENTs over a socket, the primary killed with -9 mid-stream and the replica promoted; every ACK is in the new primary's journal, the NACKed are resent and ACKed once, bus_seq 1...200"
        )
        func brokerFollowsPromotion() async throws {
            // A pair a failed test leaves running is stopped at exit.
            let (pair, settings) = try await Self.pair()
            let fixture = try await BrokerFixture.start(logger: Self.quiet) {
                $0.journalStore = .postgres
                $0.postgres = settings
            }
            let producer = Producer(try await fixture.producer())
            let total = 200
            var promotion: Task<Void, any Error>?
            var ackedBeforeKill: [String: Int64] = [:]
            var ackedWhenKilled = 0
            for seq in 1...total {
                if seq == 31 {
                    // Mid-stream: 30 are ACKed; the primary is killed. Until the replica is promoted
                    // no server takes writes, so the broker refuses event 31 (NACK, or no answer);
                    // the promotion comes once it has. (Promoted at once instead, a loaded machine
                    // could let the broker find the new primary before the producer sent again.)
                    ackedBeforeKill = producer.acked.withLock { $0 }
                    try await pair.killPrimary()
                    ackedWhenKilled = producer.ackedCount
                    promotion = Task {
                        try await waitUntil("the broker refuses an event while no server takes writes", timeout: .seconds(60)) {
                            producer.nacked.withLock { $0 } + producer.silent.withLock { $0 } > 0
                        }
                        try await pair.promote()
                    }
                }
                try await producer.publish(Int64(seq), timeout: .seconds(90))
            }
            try await promotion?.value
            await fixture.stop()

            #expect(try await pair.replicaInRecovery() == false)
            #expect(ackedBeforeKill.count == 30 && ackedWhenKilled < total, "the primary was killed mid-stream (\(ackedWhenKilled))")
            #expect(producer.nacked.withLock { $0 } + producer.silent.withLock { $0 } > 0, "the failover refused some events")
            let acked = producer.acked.withLock { $0 }
            #expect(acked.count == total)
            #expect(Set(acked.values) == Set(1...Int64(total)), "each event one number, none twice, no gap")
            // The new primary's journal (the replica, promoted), read by a new store.
            let journal = try Self.journal(settings)
            #expect(journal.map(\.busSeq) == Array(1...Int64(total)))
            let journaled = Dictionary(uniqueKeysWithValues: journal.map { ($0.eventID, $0.busSeq) })
            #expect(journaled == acked, "every ACK is in the journal under its number")
            for (eventID, busSeq) in ackedBeforeKill { #expect(journaled[eventID] == busSeq, "ACKed before the kill: \(eventID)") }
            await pair.stop()
        }

        @Test(
            "a broker pair on the database pair: the lease row is replicated, so the active broker renews it on the promoted replica and keeps its term; the standby stays a standby"
        )
        func leaseSurvivesFailover() async throws {
            // A pair a failed test leaves running is stopped at exit.
            let (pair, settings) = try await Self.pair()
            let directory = try TemporaryDirectory("pg-failover-pair")
            defer { directory.remove() }
            let io = try IOThread()
            // lease.ttl 10 s: the active broker's own deadline is 10 s after its last renewal was
            // sent, and the kill, the promotion and the reconnect take a second or two here. Its
            // renewals fail while no server takes writes (retried every tenth of the ttl), and the
            // first one to reach the promoted replica succeeds: the row there has its epoch and an
            // end not yet passed, because every renewal was committed under synchronous
            // replication before it counted. So broker-a keeps its term (same epoch, one term) and
            // broker-b, whose asks find the lease held, stays a standby. Had the failover taken
            // longer than the ttl (or with a ttl shorter than it, such as the 3 s default on a
            // slow promotion), broker-a would have stopped serving at its deadline, and once the
            // replicated row's end had passed, whichever broker asked first would take the lease
            // under the next epoch (BrokerPairTests.pairTakesOver shows that take-over).
            let a = try BrokerPairTests.PairMember("broker-a", database: settings, io: io, directory: directory, ttl: .seconds(10))
            try await waitUntil("a serves", timeout: .seconds(30)) { a.service.isServing }
            let b = try BrokerPairTests.PairMember("broker-b", database: settings, io: io, directory: directory, ttl: .seconds(10))
            try await waitUntil("b is a standby", timeout: .seconds(30)) { b.service.isStandby }
            let epochBefore = try await pair.sql(primary: true, database: settings.database, "SELECT epoch FROM broker_lease WHERE id = 1")

            let outbox = try Outbox(path: directory.path("outbox.sqlite"), producer: "riverside-1")
            var senderSettings = OutboxSender.Settings()
            senderSettings.resendAfter = .milliseconds(300)
            senderSettings.heartbeat = .milliseconds(200)
            let sender = OutboxSender(
                outbox: outbox, io: io, endpoint: "\(a.endpoints.ingest),\(b.endpoints.ingest)", settings: senderSettings,
                logger: Self.quiet)
            let delivering = Task { try await sender.deliver(keepWaiting: { true }) }
            try await BrokerPairTests.checkIns(outbox, 1...20)
            try await waitUntil("a acknowledges the first 20", timeout: .seconds(60)) { try await outbox.counts().pending == 0 }

            try await pair.killPrimary()
            try await BrokerPairTests.checkIns(outbox, 21...40)
            try await pair.promote()
            try await waitUntil("the next 20 are acknowledged after the promotion", timeout: .seconds(60)) {
                try await outbox.counts().pending == 0
            }
            #expect(a.service.isServing && a.service.termsHeld == 1, "broker-a kept its term across the failover")
            #expect(!b.service.isServing && b.service.termsHeld == 0)
            let row = try await pair.sql(
                primary: false, database: settings.database, "SELECT epoch || ' ' || holder FROM broker_lease WHERE id = 1")
            #expect(row == "\(epochBefore) broker-a", "the promoted replica's lease row: same epoch, same holder")

            delivering.cancel()
            _ = try? await delivering.value
            try await b.stop()
            try await a.stop()
            await io.shutdown()
            let journal = try Self.journal(settings)
            #expect(journal.map(\.busSeq) == Array(1...40))
            #expect(Set(journal.map(\.eventID)).count == 40)
            await pair.stop()
        }
    }
}
