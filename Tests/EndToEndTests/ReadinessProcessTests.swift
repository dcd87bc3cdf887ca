import Foundation
import SwitchboardBus
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// Our programs under a Supervisor, as `switchboard up` and systemd run them: each says
/// READY=1 on its notify socket, and SIGTERM stops the kiosk's service group gracefully.
@Suite("Readiness and graceful stop (processes)", .timeLimit(.minutes(2)))
struct ReadinessProcessTests {
    @Test(
        "broker and demo kiosk say READY=1; SIGTERM stops the kiosk first (exit 0, outbox drained, every check-in journaled once), then the broker"
    )
    func brokerAndKiosk() async throws {
        let directory = try TemporaryDirectory("readiness")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort(count: 5)
        let ingest = "tcp://127.0.0.1:\(port)"
        func log(_ name: String) throws -> FileHandle {
            _ = FileManager.default.createFile(atPath: directory.path(name), contents: nil)
            return try FileHandle(forWritingTo: URL(fileURLWithPath: directory.path(name)))
        }
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        let brokerLog = try log("broker.log")
        try supervisor.start(
            .init(
                name: "broker", executable: "switchboard-broker",
                arguments: [
                    "--data-dir", directory.path("broker"), "--ingest", ingest, "--fanout", "tcp://127.0.0.1:\(port + 1)", "--replay",
                    "tcp://127.0.0.1:\(port + 2)", "--service", "tcp://127.0.0.1:\(port + 3)", "--groups", "tcp://127.0.0.1:\(port + 4)",
                    "--insecure", "--admin", "none",
                ], output: brokerLog, errors: brokerLog, stopGrace: .seconds(20)))
        #expect(await supervisor.waitUntilReady("broker", timeout: .seconds(30)) == .ready, "\(programs.read("broker.log"))")
        // Ready means bound: the endpoints file is written by then.
        #expect(FileManager.default.fileExists(atPath: directory.path("broker/endpoints.json")))

        let kioskLog = try log("kiosk.log")
        let outbox = directory.path("kiosk/outbox.sqlite")
        try supervisor.start(
            .init(
                name: "kiosk", executable: "switchboard-kiosk",
                arguments: ["demo", "--id", "demo-7", "--ingest", ingest, "--interval", "20ms", "--outbox", outbox, "--admin", "none"],
                output: kioskLog, errors: kioskLog))
        #expect(await supervisor.waitUntilReady("kiosk", timeout: .seconds(30)) == .ready, "\(programs.read("kiosk.log"))")
        try await waitUntil("the demo's check-ins reach the journal", timeout: .seconds(60), interval: .milliseconds(50)) {
            programs.journalCount() >= 20
        }

        let codes = await supervisor.stopAll()
        #expect(codes == ["kiosk": 0, "broker": 0], "\(programs.read("kiosk.log"))\n\(programs.read("broker.log"))")
        #expect(programs.read("kiosk.log").contains("Demo kiosk stopped; 0 check-ins waiting."), "\(programs.read("kiosk.log"))")
        let counts = try await Outbox(path: outbox, producer: "demo-7").counts()
        let rows = try JournalFile.rows(at: directory.path("broker/journal.sqlite")).filter { $0.producer == "demo-7" }
        #expect(counts.pending == 0 && Int64(rows.count) == counts.delivered, "\(counts), \(rows.count) journaled")
        #expect(Set(rows.map(\.eventID)).count == rows.count)
    }
}
