import Foundation
import Logging
import SwitchboardBus
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("switchboard status (processes)")
struct StatusTests {
    @Test("switchboard status prints the live services of a broker process as a table and as JSON")
    func status() async throws {
        let directory = try TemporaryDirectory("status")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()

        let empty = try programs.start(
            "switchboard", ["status", "--service", endpoints.service, "--groups", endpoints.groups], log: "empty.log")
        #expect(await empty.waitForExit(timeout: .seconds(30)) == 0, "\(programs.read("empty.log"))")
        #expect(programs.read("empty.log").contains("No services registered."))
        #expect(programs.read("empty.log").contains("No consumer groups."))

        // Two services served by this test process: one with 3 sockets, one with 1.
        let context = try Context()
        let io = try IOThread(context: context)
        var logger = Logger(label: "status-test")
        logger.logLevel = .critical
        var settings = ServiceWorker.Settings()
        settings.concurrency = 3
        let sites = ServiceWorker(service: "eto.sites", io: io, endpoint: endpoints.service, settings: settings, logger: logger) {
            request, _ in
            request.content
        }
        let tokens = ServiceWorker(service: "auth.tokens", io: io, endpoint: endpoints.service, logger: logger) { request, _ in
            request.content
        }
        let running = [Task { try await sites.run() }, Task { try await tokens.run() }]
        let client = ServiceClient(io: io, endpoint: endpoints.service, logger: logger)
        try await waitUntil("4 workers registered") { (try? await client.directory().workers) == 4 }

        let table = try programs.start(
            "switchboard", ["status", "--service", endpoints.service, "--groups", endpoints.groups], log: "table.log")
        #expect(await table.waitForExit(timeout: .seconds(30)) == 0, "\(programs.read("table.log"))")
        let lines = programs.read("table.log").split(separator: "\n").map(String.init)
        #expect(lines.first?.contains("4 workers") == true, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("SERVICE") && $0.contains("WORKERS") && $0.contains("QUEUED") })
        let row = lines.first { $0.hasPrefix("eto.sites") }?.split(separator: " ", omittingEmptySubsequences: true)
        #expect(row?[1] == "3" && row?[2] == "3" && row?[3] == "0", "\(lines)")
        #expect(lines.contains { $0.hasPrefix("auth.tokens") })

        let json = try programs.start(
            "switchboard", ["status", "--json", "--service", endpoints.service, "--groups", endpoints.groups], log: "json.log")
        #expect(await json.waitForExit(timeout: .seconds(30)) == 0)
        let decoded = try JSONDecoder().decode(ServiceDirectory.self, from: Data(programs.read("json.log").utf8))
        #expect(decoded.workers == 4)
        #expect(decoded.services.map(\.name) == ["auth.tokens", "eto.sites"])

        sites.stop()
        tokens.stop()
        for task in running { try await task.value }
        await client.close()
        await io.shutdown()
        await context.terminate()
        #expect(await broker.stop() == 0)
    }

    @Test("switchboard status with no broker says so and exits 1 within its time-out")
    func noBroker() async throws {
        let directory = try TemporaryDirectory("status-none")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort()
        let status = try programs.start(
            "switchboard", ["status", "--service", "tcp://127.0.0.1:\(port)", "--timeout", "300ms"], log: "none.log")
        #expect(await status.waitForExit(timeout: .seconds(30)) == 1)
        #expect(programs.read("none.log").contains("no answer from the broker at tcp://127.0.0.1:\(port) within 300ms"))
    }
}

@Suite("Service plane across a broker crash (processes)")
struct ServiceCrashTests {
    @Test(
        "kill -9 the broker: workers notice the silence, reconnect with back-off and register again; clients get errors meanwhile, never a hang",
        .timeLimit(.minutes(3))
    )
    func brokerKilled() async throws {
        let directory = try TemporaryDirectory("service-crash")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort()
        let service = "tcp://127.0.0.1:\(port)"
        var (broker, _) = try await programs.broker(service: service)

        let context = try Context()
        let io = try IOThread(context: context)
        var logger = Logger(label: "crash-test")
        logger.logLevel = .critical
        var settings = ServiceWorker.Settings()
        // The broker process's default, as a deployment configures both. A shorter interval
        // makes the worker reconnect until it has learned the broker's (heartbeatMismatch tests
        // that), and on a loaded machine the first request could land in that churn.
        settings.heartbeat = .milliseconds(2500)
        settings.reconnectInitial = .milliseconds(100)
        settings.reconnectMax = .seconds(1)
        settings.concurrency = 2
        let worker = ServiceWorker(service: "eto.sites", io: io, endpoint: service, settings: settings, logger: logger) { request, _ in
            request.content
        }
        let running = Task { try await worker.run() }
        let client = ServiceClient(io: io, endpoint: service, logger: logger)
        try await waitUntil("the worker is registered") { (try? await client.isAlive("eto.sites", timeout: .seconds(1))) == true }
        #expect(try await client.request(service: "eto.sites", operation: "ping", content: Data("1".utf8)).content == Data("1".utf8))

        broker.signal(SIGKILL)
        #expect(await broker.waitForExit(timeout: .seconds(10)) != nil)
        let started = ContinuousClock.now
        await #expect(throws: ServiceClientError.self) {
            try await client.request(service: "eto.sites", operation: "ping", timeout: .milliseconds(500))
        }
        #expect(ContinuousClock.now - started < .seconds(5), "the failed request ended in its own time")

        // Three of the broker's 2.5 s intervals without a word: the worker gives up on it.
        let silence = await worker.notices.first {
            if case .brokerSilent = $0 { true } else { false }
        }
        #expect(silence != nil, "the worker noticed the silence")
        (broker, _) = try await programs.broker(service: service, log: "broker2.log")
        try await waitUntil("the worker registers with the new broker by itself", timeout: .seconds(60)) {
            (try? await client.isAlive("eto.sites", timeout: .seconds(1))) == true
        }
        let reply = try await client.request(
            service: "eto.sites", operation: "ping", content: Data("2".utf8), timeout: .seconds(10), idempotent: true)
        #expect(reply.content == Data("2".utf8))

        worker.stop()
        try await running.value
        await client.close()
        await io.shutdown()
        await context.terminate()
        #expect(await broker.stop() == 0)
    }
}
