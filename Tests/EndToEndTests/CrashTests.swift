import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// Real processes, killed with SIGKILL in the middle of work: nothing accepted may be lost,
/// nothing may be journaled twice.
@Suite("Crash safety (processes)", .serialized)
struct CrashTests {
    /// Enough that the kill comes mid-run even when the test's own polling is held up for
    /// seconds on a loaded machine (with 10,000 a CI run once found all journaled at the kill).
    static let total = 30_000

    func verifyJournal(_ programs: Programs, kiosk: String, outbox: String) throws {
        let rows = try JournalFile.rows(at: programs.directory.path("broker/journal.sqlite")).filter { $0.producer == kiosk }
        #expect(rows.count == Self.total, "journal holds \(rows.count) check-ins")
        #expect(Set(rows.map(\.producerSeq)) == Set(1...Int64(Self.total)), "every check-in exactly once")
        #expect(Set(rows.map(\.eventID)).count == rows.count)
        #expect(JournalFile.count(at: programs.directory.path(outbox), table: "outbox") == 0, "the kiosk's outbox is empty")
    }

    @Test("kill -9 the broker in the middle of a 30,000-check-in kiosk run, restart it: every check-in journaled once, outbox empty")
    func killBroker() async throws {
        let directory = try TemporaryDirectory("kill-broker")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let csv = try programs.writeCSV("day.csv", rows: Self.total)
        var (broker, endpoints) = try await programs.brokerOnFixedPorts()
        let kiosk = try programs.start(
            "switchboard-kiosk",
            [
                "import", csv, "--id", "riverside-1", "--outbox", directory.path("kiosk/outbox.sqlite"), "--ingest", endpoints.ingest,
                "--wait", "300s",
            ],
            log: "kiosk.log")
        try await waitUntil("2,000 check-ins journaled", timeout: .seconds(120)) { programs.journalCount() >= 2000 }
        broker.signal(SIGKILL)
        #expect(await broker.waitForExit(timeout: .seconds(10)) != nil)
        let atKill = programs.journalCount()
        #expect(atKill < Self.total, "the kill came mid-run")

        (broker, _) = try await programs.broker(
            ingest: endpoints.ingest, fanout: endpoints.fanout, replay: endpoints.replay, service: endpoints.service, log: "broker2.log")
        let status = await kiosk.waitForExit(timeout: .seconds(300))
        #expect(status == 0, "kiosk: \(programs.read("kiosk.log"))")
        #expect(await broker.stop() == 0)
        try verifyJournal(programs, kiosk: "riverside-1", outbox: "kiosk/outbox.sqlite")
    }

    @Test("kill -9 the kiosk mid-run and restart it: every check-in journaled once, outbox empty")
    func killKiosk() async throws {
        let directory = try TemporaryDirectory("kill-kiosk")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let csv = try programs.writeCSV("day.csv", rows: Self.total)
        let (broker, endpoints) = try await programs.broker()
        let arguments = ["--id", "riverside-2", "--outbox", directory.path("kiosk/outbox.sqlite"), "--ingest", endpoints.ingest]
        let kiosk = try programs.start("switchboard-kiosk", ["import", csv, "--wait", "300s"] + arguments, log: "kiosk.log")
        try await waitUntil("2,000 check-ins journaled", timeout: .seconds(120)) { programs.journalCount() >= 2000 }
        kiosk.signal(SIGKILL)
        #expect(await kiosk.waitForExit(timeout: .seconds(10)) != nil)
        #expect(programs.journalCount() < Self.total, "the kill came mid-run")

        // Importing the same file again is refused (it is in the outbox already) …
        let again = try programs.start("switchboard-kiosk", ["import", csv] + arguments, log: "again.log")
        #expect(await again.waitForExit(timeout: .seconds(60)) != 0)
        #expect(programs.read("again.log").contains("already imported"))
        // … and a flush sends what is waiting.
        let flush = try programs.start("switchboard-kiosk", ["flush", "--wait", "300s"] + arguments, log: "flush.log")
        #expect(await flush.waitForExit(timeout: .seconds(300)) == 0, "flush: \(programs.read("flush.log"))")
        #expect(await broker.stop() == 0)
        try verifyJournal(programs, kiosk: "riverside-2", outbox: "kiosk/outbox.sqlite")
    }
}
