import Foundation
import Logging
import SwitchboardBroker
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

// Clients given several brokers (protocol section 3): one at a time, the next after trouble.
// These run real brokers, and a "broker" that does not listen as a standby does not.

@Suite("Several brokers")
struct BrokerRotationTests {
    @Test("a list of endpoints is read in order, blanks ignored; trouble on the current one moves on once, round and round")
    func rotation() {
        let brokers = BrokerRotation("tcp://a:5563, tcp://b:5563")
        #expect(brokers.endpoints == ["tcp://a:5563", "tcp://b:5563"] && brokers.rotates)
        #expect(brokers.current == "tcp://a:5563")
        #expect(brokers.failed("tcp://a:5563") == "tcp://b:5563")
        // A second socket that also found a gone: the client is already on b.
        #expect(brokers.failed("tcp://a:5563") == "tcp://b:5563")
        #expect(brokers.failed("tcp://b:5563") == "tcp://a:5563")
        let one = BrokerRotation("ipc:///run/switchboard/service")
        #expect(one.endpoints == ["ipc:///run/switchboard/service"] && !one.rotates)
        #expect(one.failed(one.current) == "ipc:///run/switchboard/service")
    }

    /// A broker's endpoints where nothing listens (a standby, protocol section 3), then the
    /// fixture's: every client is given both, the silent one first.
    static func pair(_ fixture: BrokerFixture) throws -> BrokerEndpoints {
        let port = try freePort(count: 5)
        func both(_ plane: Int, _ live: String) -> String { "tcp://127.0.0.1:\(port + plane),\(live)" }
        return BrokerEndpoints(
            ingest: both(0, fixture.endpoints.ingest), fanout: both(1, fixture.endpoints.fanout),
            replay: both(2, fixture.endpoints.replay), service: both(3, fixture.endpoints.service),
            groups: both(4, fixture.endpoints.groups))
    }

    @Test(
        "given a broker that does not listen and one that does, a kiosk's outbox, a worker, a service client, a group member and an operator's request all reach the one that does"
    )
    func firstDoesNotListen() async throws {
        let fixture = try await BrokerFixture.start { configuration in
            configuration.serviceHeartbeat = .milliseconds(500)
            configuration.serviceLiveness = 10
        }
        let endpoints = try Self.pair(fixture)
        var logger = Logger(label: "test-rotation")
        logger.logLevel = .critical

        // The outbox: nothing takes its sends on the first, so it moves to the second.
        let outbox = try fixture.outbox("riverside-1")
        try await outbox.enqueue((0..<50).map { .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) })
        var outboxSettings = OutboxSender.Settings()
        outboxSettings.resendAfter = .milliseconds(300)
        let sender = OutboxSender(outbox: outbox, io: fixture.io, endpoint: endpoints.ingest, settings: outboxSettings, logger: logger)
        let report = try await sender.deliver(until: .now + .seconds(60))
        // An ACK slower than two resend periods (a loaded machine) moves the sender on and back;
        // the resends are then ACKed as duplicates. Each check-in is journaled once all the same.
        #expect(report.delivered + report.duplicates == 50 && report.pending == 0, "\(report)")
        #expect(try fixture.journalRows().count == 50)

        // A worker finds the silent first broker silent, and registers with the second.
        var workerSettings = ServiceWorker.Settings()
        workerSettings.heartbeat = .milliseconds(200)
        workerSettings.liveness = 3
        workerSettings.reconnectInitial = .milliseconds(50)
        let worker = ServiceWorker(
            service: "demo", io: fixture.io, endpoint: endpoints.service, settings: workerSettings, logger: logger
        ) { request, _ in request.content }
        let running = Task { try await worker.run() }
        var clientSettings = ServiceClient.Settings()
        clientSettings.attemptTimeout = .milliseconds(500)
        let client = ServiceClient(io: fixture.io, endpoint: endpoints.service, settings: clientSettings, logger: logger)
        try await waitUntil("the worker registers with the second broker", timeout: .seconds(60)) {
            try await client.isAlive("demo", timeout: .seconds(2))
        }
        // The client's shared socket went to the first broker; its request hears nothing there
        // and, being idempotent, goes again on a fresh socket: to the second broker.
        let reply = try await client.request(
            service: "demo", operation: "echo", content: Data(#"{"n":1}"#.utf8), timeout: .seconds(10), idempotent: true)
        #expect(reply.content == Data(#"{"n":1}"#.utf8))

        // A member's JOIN gets no JOINED from the first; it joins at the second.
        let consumer = GroupConsumer(
            io: fixture.io, endpoint: endpoints.groups,
            settings: .init(group: "filemaker", topics: ["checkin."], credit: 8, joinTimeout: .milliseconds(500)), logger: logger)
        let consuming = Task { try await consumer.run() }
        var notices = consumer.notices.makeAsyncIterator()
        while let notice = await notices.next() {
            if case .joined = notice { break }
        }
        // An operator's request: no connection to the first takes it, the second answers.
        let admin = GroupAdminClient(io: fixture.io, endpoint: endpoints.groups, settings: .init(timeout: .seconds(10)))
        #expect(try await admin.groups().map(\.name) == ["filemaker"])

        consuming.cancel()
        _ = try? await consuming.value
        worker.stop()
        try await running.value
        await client.close()
        await fixture.stop()
    }

    @Test("a kiosk's outbox follows the broker to the other endpoint when the first stops and the second starts (a takeover)")
    func outboxFollowsTakeover() async throws {
        let first = try await BrokerFixture.start()
        let port = try freePort(count: 5)
        let secondDirectory = try TemporaryDirectory("rotation-second")
        let ingest = "\(first.endpoints.ingest),tcp://127.0.0.1:\(port)"
        var logger = Logger(label: "test-rotation")
        logger.logLevel = .critical
        let outbox = try first.outbox("riverside-1")
        var settings = OutboxSender.Settings()
        settings.resendAfter = .milliseconds(300)
        settings.heartbeat = .milliseconds(300)
        // The kiosk's own I/O thread: the first broker's fixture takes its own down with it.
        let io = try IOThread()
        let sender = OutboxSender(outbox: outbox, io: io, endpoint: ingest, settings: settings, logger: logger)
        let running = Task { try await sender.deliver(keepWaiting: { true }) }
        func record(_ range: Range<Int>) async throws {
            try await outbox.enqueue(range.map { .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) })
        }
        try await record(0..<20)
        try await waitUntil("the first broker ACKs the first 20") { try await outbox.counts().pending == 0 }
        await first.stop()
        try await record(20..<40)
        let second = try await BrokerFixture.start(directory: secondDirectory) { configuration in
            configuration.ingestEndpoint = "tcp://127.0.0.1:\(port)"
            configuration.fanoutEndpoint = "tcp://127.0.0.1:\(port + 1)"
            configuration.replayEndpoint = "tcp://127.0.0.1:\(port + 2)"
            configuration.serviceEndpoint = "tcp://127.0.0.1:\(port + 3)"
            configuration.groupsEndpoint = "tcp://127.0.0.1:\(port + 4)"
        }
        try await waitUntil("the second broker ACKs the 20 recorded after the first stopped", timeout: .seconds(60)) {
            try await outbox.counts().pending == 0
        }
        #expect(try second.journalRows().map(\.producerSeq).sorted() == Array(21...40))
        running.cancel()
        _ = try? await running.value
        await io.shutdown()
        await second.stop()
        secondDirectory.remove()
    }

    @Test(
        "a broker that is only slow (its answers 1.5 s late, five resend periods) is not left for good: after a round of the list with nothing heard the producer waits longer, and every event is ACKed"
    )
    func slowBrokerIsWaitedFor() async throws {
        let fixture = try await BrokerFixture.start()
        let port = try #require(Int(fixture.endpoints.ingest.split(separator: ":").last ?? ""))
        let link = try CuttableLink(to: "127.0.0.1", port: port)
        defer { link.stop() }
        link.delayAnswers(by: .milliseconds(1500))
        // The second broker of the list does not listen (a standby).
        let standby = try freePort()
        var logger = Logger(label: "test-rotation")
        logger.logLevel = .critical
        let outbox = try fixture.outbox("riverside-1")
        var settings = OutboxSender.Settings()
        settings.resendAfter = .milliseconds(300)
        settings.heartbeat = .milliseconds(300)
        let sender = OutboxSender(
            outbox: outbox, io: fixture.io, endpoint: "tcp://127.0.0.1:\(link.port),tcp://127.0.0.1:\(standby)", settings: settings,
            logger: logger)
        let running = Task { try await sender.deliver(keepWaiting: { true }) }
        try await outbox.enqueue((0..<20).map { .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) })
        // With the silences fixed at two resend periods (600 ms), the producer left the slow
        // broker before each answer came, and the standby after it, round and round.
        try await waitUntil("the slow broker's ACKs are heard", timeout: .seconds(60)) { try await outbox.counts().pending == 0 }
        #expect(try fixture.journalRows().filter { $0.producer == "riverside-1" }.count == 20)
        running.cancel()
        _ = try? await running.value
        await fixture.stop()
    }
}
