import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// libzmq never reconnects a connection whose CURVE handshake the broker refused. A client that
/// kept such a socket waited forever: a one-shot command hung, and a worker whose key was
/// revoked and then allowed again never served again. These run the real broker, its allow-list
/// and the bus's clients.
@Suite("Clients after the broker refused their key")
struct RefusedKeyRecoveryTests {
    static let quiet = Logger(label: "test.refused") { _ in SwiftLogNoOpLogHandler() }

    /// A broker on fixed ports (dropping connections binds its endpoints again), with a kiosk,
    /// a second kiosk whose certificate is not allowed yet, and an eto worker.
    static func broker() async throws -> (SecureBroker, BrokerSecurity) {
        let port = try freePort(count: 5)
        let secure = try await SecureBroker.start(
            principals: [("eto-1", .worker(service: "eto"), nil), ("riverside-1", .kiosk, nil), ("riverside-2", .kiosk, nil)]
        ) { configuration in
            configuration.ingestEndpoint = "tcp://127.0.0.1:\(port)"
            configuration.fanoutEndpoint = "tcp://127.0.0.1:\(port + 1)"
            configuration.replayEndpoint = "tcp://127.0.0.1:\(port + 2)"
            configuration.serviceEndpoint = "tcp://127.0.0.1:\(port + 3)"
            configuration.groupsEndpoint = "tcp://127.0.0.1:\(port + 4)"
            configuration.serviceHeartbeat = .milliseconds(500)
            configuration.serviceLiveness = 10
        }
        let security = try #require(secure.fixture.broker.security)
        return (secure, security)
    }

    static func certificate(_ secure: SecureBroker, _ name: String) -> String {
        (secure.certificates as NSString).appendingPathComponent("\(name).cert")
    }

    static func client(_ secure: SecureBroker, _ name: String) throws -> ServiceClient {
        var settings = ServiceClient.Settings()
        settings.socketOptions = try secure.clientOptions(name)
        return ServiceClient(io: secure.fixture.io, endpoint: secure.fixture.endpoints.service, settings: settings, logger: quiet)
    }

    static func sites(_ request: ServiceRequest, _ partials: PartialReplies) async throws -> Data {
        Data(#"{"sites":[{"site_id":101,"name":"Riverside"}]}"#.utf8)
    }

    @Test(
        "a client whose key the broker does not know gets an error within its time instead of waiting forever, and once the key is allowed the same client is answered"
    )
    func clientRefusedThenAllowed() async throws {
        let (secure, security) = try await Self.broker()
        let waiting = Self.certificate(secure, "riverside-2") + ".waiting"
        try FileManager.default.moveItem(atPath: Self.certificate(secure, "riverside-2"), toPath: waiting)
        #expect(security.reload(reason: "test").map(\.name) == ["riverside-2"])
        var workerSettings = ServiceWorker.Settings()
        workerSettings.heartbeat = .milliseconds(500)
        workerSettings.liveness = 10
        workerSettings.socketOptions = try secure.clientOptions("eto-1")
        let worker = ServiceWorker(
            service: "eto", io: secure.fixture.io, endpoint: secure.fixture.endpoints.service, settings: workerSettings,
            logger: Self.quiet, handler: Self.sites)
        let running = Task { try await worker.run() }
        let known = try Self.client(secure, "riverside-1")
        try await waitUntil("eto has a live worker") { try await known.isAlive("eto") }

        let stranger = try Self.client(secure, "riverside-2")
        // The first request waits in the new connection's pipe until the broker refuses the key
        // and libzmq drops the connection with it: a time-out. The next finds no connection to
        // take it (the socket is retired): unreachable, or a time-out if its fresh sockets'
        // requests were queued before their refusals. Each ends in its time.
        for timeout in [Duration.seconds(1), .milliseconds(900)] {
            let started = ContinuousClock.now
            do {
                _ = try await stranger.request(service: "eto", operation: "sites.list", timeout: timeout, idempotent: true)
                Issue.record("a refused key was answered")
            } catch {
                switch error {
                case .timeout, .unreachable: break
                default: Issue.record("unexpected \(error)")
                }
            }
            #expect(started.duration(to: .now) < timeout + .seconds(10))
        }
        #expect(ServiceClientError.unreachable(endpoint: "tcp://b:5563", after: .seconds(1)).description.contains("allow-list"))

        try FileManager.default.moveItem(atPath: waiting, toPath: Self.certificate(secure, "riverside-2"))
        #expect(security.reload(reason: "test").isEmpty)
        let reply = try await stranger.request(service: "eto", operation: "sites.list", timeout: .seconds(10))
        #expect(reply.status == 200 && reply.content.count > 0)

        await stranger.close()
        await known.close()
        worker.stop()
        try await running.value
        await secure.stop()
    }

    @Test(
        "a worker whose key is revoked and then allowed again serves again: it leaves the refused socket for a fresh one instead of waiting on it forever"
    )
    func workerRevokedThenAllowed() async throws {
        let (secure, security) = try await Self.broker()
        var workerSettings = ServiceWorker.Settings()
        // The suite's usual 500 ms × 10: a shorter silence limit made the worker reconnect again
        // and again when every suite ran at once on two cores.
        workerSettings.heartbeat = .milliseconds(500)
        workerSettings.liveness = 10
        workerSettings.reconnectInitial = .milliseconds(50)
        workerSettings.reconnectMax = .milliseconds(400)
        workerSettings.socketOptions = try secure.clientOptions("eto-1")
        let worker = ServiceWorker(
            service: "eto", io: secure.fixture.io, endpoint: secure.fixture.endpoints.service, settings: workerSettings,
            logger: Self.quiet, handler: Self.sites)
        let running = Task { try await worker.run() }
        let kiosk = try Self.client(secure, "riverside-1")
        try await waitUntil("eto has a live worker", timeout: .seconds(60)) { try await kiosk.isAlive("eto") }
        #expect(try await kiosk.request(service: "eto", operation: "sites.list").status == 200)

        // Revoked as `BrokerService.watch` does it: the allow-list loses the key and every
        // connection is dropped, so the worker reconnects and is refused.
        let held = Self.certificate(secure, "eto-1") + ".held"
        try FileManager.default.moveItem(atPath: Self.certificate(secure, "eto-1"), toPath: held)
        let refusedBefore = security.refusals["unknown-key", default: 0]
        #expect(security.reload(reason: "test").map(\.name) == ["eto-1"])
        secure.fixture.broker.dropAllConnections()
        try await waitUntil("the broker refuses the worker's reconnection", timeout: .seconds(20)) {
            security.refusals["unknown-key", default: 0] > refusedBefore
        }

        try await waitUntil("the broker gives the refused worker up", timeout: .seconds(60)) {
            try await !kiosk.isAlive("eto")
        }

        // Allowed again: no revocation, so no connection is dropped; the worker must find its
        // way back by itself.
        try FileManager.default.moveItem(atPath: held, toPath: Self.certificate(secure, "eto-1"))
        #expect(security.reload(reason: "test").isEmpty)
        try await waitUntil("the worker registers again", timeout: .seconds(60)) { try await kiosk.isAlive("eto") }
        let reply = try await kiosk.request(service: "eto", operation: "sites.list", timeout: .seconds(30), idempotent: true)
        #expect(reply.status == 200)

        await kiosk.close()
        worker.stop()
        try await running.value
        await secure.stop()
    }
    @Test(
        "a kiosk's outbox keeps delivering after its key is revoked and allowed again: a send that stays blocked moves it to a fresh socket"
    )
    func outboxRevokedThenAllowed() async throws {
        let (secure, security) = try await Self.broker()
        let directory = try TemporaryDirectory("refused-outbox")
        defer { directory.remove() }
        let outbox = try Outbox(path: directory.path("outbox.sqlite"), producer: "riverside-1")
        var settings = OutboxSender.Settings()
        settings.resendAfter = .milliseconds(500)
        settings.heartbeat = .milliseconds(500)
        settings.socketOptions = try secure.clientOptions("riverside-1")
        let sender = OutboxSender(
            outbox: outbox, io: secure.fixture.io, endpoint: secure.fixture.endpoints.ingest, settings: settings, logger: Self.quiet)
        let running = Task { try await sender.deliver(keepWaiting: { true }) }
        func checkIn(_ index: Int) async throws {
            try await outbox.enqueue([.init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: index))])
        }
        try await checkIn(1)
        try await waitUntil("the first check-in is ACKed") { try await outbox.counts().pending == 0 }

        let held = Self.certificate(secure, "riverside-1") + ".held"
        try FileManager.default.moveItem(atPath: Self.certificate(secure, "riverside-1"), toPath: held)
        let refusedBefore = security.refusals["unknown-key", default: 0]
        #expect(security.reload(reason: "test").map(\.name) == ["riverside-1"])
        secure.fixture.broker.dropAllConnections()
        try await waitUntil("the broker refuses the kiosk's reconnection", timeout: .seconds(20)) {
            security.refusals["unknown-key", default: 0] > refusedBefore
        }
        try await checkIn(2)
        try FileManager.default.moveItem(atPath: held, toPath: Self.certificate(secure, "riverside-1"))
        #expect(security.reload(reason: "test").isEmpty)
        try await waitUntil("the check-in recorded while refused is ACKed once allowed", timeout: .seconds(60)) {
            try await outbox.counts().pending == 0
        }
        running.cancel()
        _ = try? await running.value
        await secure.stop()
    }
}
