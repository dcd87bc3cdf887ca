import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

extension WorkerProcessTests {
    /// Reads `/health/ready` until it answers 200, or fails naming what the answer said.
    func waitUntilReady(_ name: String, port: Int, process: ChildProcess, log: String, programs: Programs) async throws {
        try await waitUntil("\(name) is ready", timeout: .seconds(60), interval: .milliseconds(100)) {
            guard process.isRunning else { throw WaitTimedOut(description: "\(name) exited: \(programs.read(log))") }
            return (try? await httpGet("http://127.0.0.1:\(port)/health/ready"))?.status == 200
        }
    }

    @Test(
        "/metrics of the broker, the FileMaker writer and a kiosk move by exactly the 1,000 check-ins sent, /health/ready follows the broker, and no personal field or secret is in any of them"
    )
    func metricsFollowTheTraffic() async throws {
        let directory = try TemporaryDirectory("metrics")
        defer { directory.remove() }
        let ports = try freePort(count: 3)
        let (brokerPort, writerPort, kioskPort) = (ports, ports + 1, ports + 2)
        let stack = try await stack(directory, brokerExtra: ["--admin", "127.0.0.1:\(brokerPort)"])
        let programs = stack.programs
        defer { stack.stop() }
        let people = try SeedParticipant.all()
        let seeded = Set(try await stack.checkInEventIDs())
        let writer = try stack.fileMaker("filemaker.log", extra: ["--admin", "127.0.0.1:\(writerPort)"])
        let outbox = directory.path("kiosk/outbox.sqlite")
        let kioskArguments = ["--id", "shelter-m", "--outbox", outbox, "--ingest", stack.endpoints.ingest]
        let kiosk = try stack.started.add(
            programs.start("switchboard-kiosk", ["serve", "--admin", "127.0.0.1:\(kioskPort)"] + kioskArguments, log: "kiosk.log"))
        try await waitUntilReady("the broker", port: brokerPort, process: stack.broker, log: "broker.log", programs: programs)
        try await waitUntilReady("the writer", port: writerPort, process: writer, log: "filemaker.log", programs: programs)
        try await waitUntilReady("the kiosk", port: kioskPort, process: kiosk, log: "kiosk.log", programs: programs)

        let before = (
            broker: try await scrapeMetrics(port: brokerPort), writer: try await scrapeMetrics(port: writerPort),
            kiosk: try await scrapeMetrics(port: kioskPort)
        )
        func value(_ scrape: Scrape, _ name: String, _ labels: [String: String] = [:]) -> Double { scrape.value(name, labels) ?? 0 }
        #expect(value(before.kiosk, "switchboard_kiosk_checkins_total") == 0)
        #expect(value(before.writer, "switchboard_worker_deliveries_total", ["group": "filemaker", "outcome": "ack"]) == 0)

        // 1,000 check-ins saved by `import` (which does not send them: --wait 0s); `serve` sends.
        // The kiosk sends them in batches, a few per commit: with the records reported back, 500
        // were not always enough to take the WAL past 1,000 pages (below).
        let sent = 1000
        let csv = try writeSeedCSV(programs, "day.csv", rows: sent, offset: 7000, people: people)
        let importer = try programs.start("switchboard-kiosk", ["import", csv, "--wait", "0s"] + kioskArguments, log: "import.log")
        _ = await importer.waitForExit(timeout: .seconds(60))
        #expect(programs.read("import.log").contains("\(sent)"), "\(programs.read("import.log"))")

        // While it flows: the kiosk's figures are there and consistent.
        let during = try await scrapeMetrics(port: kioskPort)
        #expect(value(during, "switchboard_kiosk_checkins_total") == Double(sent))
        // Waiting and acknowledged never add up to more than were recorded (an event is counted
        // acknowledged only once it is gone from the outbox).
        let depth = try #require(during.value("switchboard_outbox_depth"))
        let acknowledged = try #require(during.value("switchboard_outbox_acked_total"))
        #expect(depth + acknowledged <= Double(sent), "waiting \(depth), acknowledged \(acknowledged)")

        try await waitUntil("every check-in is in FileMaker", timeout: .seconds(120), interval: .milliseconds(250)) {
            Set(try await stack.checkInEventIDs()).subtracting(seeded).count >= sent
        }
        // Counters are exact once the work is settled; gauges follow within a heartbeat, the
        // groups' lag within its count interval (5 s).
        var after = before
        try await waitUntil("the figures settle", timeout: .seconds(30), interval: .milliseconds(250)) {
            after = (
                broker: try await scrapeMetrics(port: brokerPort), writer: try await scrapeMetrics(port: writerPort),
                kiosk: try await scrapeMetrics(port: kioskPort)
            )
            return value(after.writer, "switchboard_worker_deliveries_total", ["group": "filemaker", "outcome": "ack"]) == Double(sent)
                && value(after.kiosk, "switchboard_outbox_depth") == 0
                && value(after.broker, "switchboard_producer_outbox_depth", ["producer": "shelter-m"]) == 0
                && value(after.broker, "switchboard_group_lag", ["group": "filemaker"]) == 0
                && value(after.broker, "switchboard_broker_events_journaled_total", ["type": "filemaker.record.written"]) == Double(sent)
                && value(after.broker, "switchboard_group_pending", ["group": "filemaker"]) == 0
                && value(after.broker, "switchboard_broker_journal_head") >= Double(2 * sent)
                && value(after.broker, "switchboard_service_workers", ["service": "auth"]) >= 1
                // Two thousand events in commits of several pages each: the WAL passed 1,000 pages, and the
                // checkpointing thread copied it at least once.
                && value(after.broker, "switchboard_broker_journal_checkpoints_total", ["by": "background"]) >= 1
        }
        func delta(_ new: Scrape, _ old: Scrape, _ name: String, _ labels: [String: String] = [:]) -> Double {
            value(new, name, labels) - value(old, name, labels)
        }
        // The broker: every check-in in, acknowledged by the group, and its record reported back.
        #expect(
            delta(after.broker, before.broker, "switchboard_broker_events_journaled_total", ["type": "checkin.recorded"]) == Double(sent))
        #expect(delta(after.broker, before.broker, "switchboard_group_acked_total", ["group": "filemaker"]) == Double(sent))
        #expect(delta(after.broker, before.broker, "switchboard_group_delivered_total", ["group": "filemaker"]) == Double(sent))
        #expect(value(after.broker, "switchboard_group_members", ["group": "filemaker"]) == 1)
        #expect(value(after.broker, "switchboard_broker_ack_seconds_count") >= Double(2 * sent))
        #expect(after.broker.value("switchboard_broker_journal_wal_frames") != nil)
        #expect(value(after.broker, "switchboard_broker_journal_checkpoint_failures_total") == 0)
        #expect(value(after.broker, "switchboard_service_requests_total", ["service": "auth", "status": "200"]) >= 1)
        let lastEvent = value(after.broker, "switchboard_producer_last_event_timestamp_seconds", ["producer": "shelter-m"])
        #expect(abs(lastEvent - Date().timeIntervalSince1970) < 120)
        // The writer: every one acknowledged, one create each, and its session from auth.
        #expect(value(after.writer, "switchboard_worker_deliveries_total", ["group": "filemaker", "outcome": "nack"]) == 0)
        #expect(value(after.writer, "switchboard_worker_handler_seconds_count", ["group": "filemaker"]) == Double(sent))
        #expect(
            value(
                after.writer, "switchboard_backend_requests_total",
                ["backend": "filemaker", "operation": "records.create", "status": "200"])
                == Double(sent))
        #expect(value(after.writer, "switchboard_backend_logins_total", ["backend": "filemaker", "outcome": "success"]) >= 1)
        #expect(value(after.writer, "switchboard_outbox_acked_total") == Double(sent))
        #expect(value(after.writer, "switchboard_ready") == 1)
        // The kiosk: every one recorded and acknowledged, nothing waiting.
        #expect(value(after.kiosk, "switchboard_kiosk_checkins_total") == Double(sent))
        #expect(value(after.kiosk, "switchboard_outbox_acked_total") == Double(sent))
        #expect(value(after.kiosk, "switchboard_outbox_last_ack_timestamp_seconds") > 0)
        #expect(after.kiosk.value("switchboard_outbox_refused") == 0, "the gauge is there, and nothing was refused")

        // Nothing personal and nothing secret in any of the three.
        let personal = people.flatMap { [$0.first, $0.last, $0.dateOfBirth] }
        for (name, scrape) in [("broker", after.broker), ("writer", after.writer), ("kiosk", after.kiosk)] {
            for text in personal + [Self.fileMakerPassword, Self.etoPassword, "row 7"] {
                #expect(!scrape.text.contains(text), "\(name)'s /metrics shows '\(text)'")
            }
        }

        // Readiness follows the broker: stopped, the kiosk is not ready (its HEARTBEATs go
        // unanswered) but live; it keeps its admin endpoint.
        stack.broker.signal(SIGKILL)
        _ = await stack.broker.waitForExit(timeout: .seconds(10))
        try await waitUntil("the kiosk reports it is not ready", timeout: .seconds(30), interval: .milliseconds(250)) {
            (try await httpGet("http://127.0.0.1:\(kioskPort)/health/ready")).status == 503
        }
        #expect((try await httpGet("http://127.0.0.1:\(kioskPort)/health/live")).status == 200)
        #expect(try await scrapeMetrics(port: kioskPort).value("switchboard_ready") == 0)
    }
}
