import Foundation
import Logging
import SwitchboardBroker
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization
import Testing
import ZeroMQ

/// Opens and closes on command: lets a test hold handlers in the middle of a request.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Counts handlers running at once; a test can wait for a count.
final class Gauge: Sendable {
    struct Counts: Sendable {
        var now = 0
        var most = 0
        var total = 0
    }

    private let counts = Watched(Counts())
    func enter() {
        counts.update {
            $0.now += 1; $0.most = max($0.most, $0.now); $0.total += 1
        }
    }
    func leave() { counts.update { $0.now -= 1 } }
    var now: Int { counts.value.now }
    var most: Int { counts.value.most }
    var total: Int { counts.value.total }

    /// Returns once `running` handlers are running at once.
    func wait(running: Int) async throws {
        try await counts.wait("\(running) handlers running") { $0.now == running }
    }
}

@Suite("Service client and worker")
struct ServiceTests {
    static var quiet: Logger {
        var logger = Logger(label: "test-service")
        logger.logLevel = .critical
        return logger
    }

    static func fastSettings(concurrency: Int = 1) -> ServiceWorker.Settings {
        var settings = ServiceWorker.Settings()
        settings.heartbeat = .milliseconds(500)
        // Five seconds of silence before either side gives up. A second was not enough: with
        // every suite running at once on two cores, a task's timer can fire seconds late, and a
        // worker dropped mid-test fails tests that are not about liveness (those set their own).
        settings.liveness = 10
        settings.reconnectInitial = .milliseconds(50)
        settings.reconnectMax = .milliseconds(400)
        settings.concurrency = concurrency
        return settings
    }

    /// A broker whose heartbeat matches the workers' (500 ms × 10), as a deployment configures both.
    static func broker(_ configure: @escaping (inout BrokerConfiguration) -> Void = { _ in }) async throws -> BrokerFixture {
        try await BrokerFixture.start { configuration in
            configuration.serviceHeartbeat = .milliseconds(500)
            configuration.serviceLiveness = 10
            configure(&configuration)
        }
    }

    static func start(
        _ fixture: BrokerFixture, service: String = "demo", concurrency: Int = 1, handler: @escaping ServiceWorker.Handler
    ) -> (ServiceWorker, Task<Void, any Error>) {
        let worker = ServiceWorker(
            service: service, io: fixture.io, endpoint: fixture.endpoints.service, settings: fastSettings(concurrency: concurrency),
            logger: quiet, handler: handler)
        return (worker, Task { try await worker.run() })
    }

    static func client(_ fixture: BrokerFixture, attempt: Duration? = nil) -> ServiceClient {
        var settings = ServiceClient.Settings()
        settings.attemptTimeout = attempt
        return ServiceClient(io: fixture.io, endpoint: fixture.endpoints.service, settings: settings, logger: quiet)
    }

    static func echo(_ request: ServiceRequest, _ partials: PartialReplies) async throws -> Data {
        switch request.operation {
        case "echo": return request.content
        case "count":
            for index in 1...3 { try await partials.send(Data("{\"n\":\(index)}".utf8)) }
            return Data(#"{"done":true}"#.utf8)
        case "fail": throw ServiceError(status: 409, code: "conflict", message: "already checked in today")
        case "crash": throw CocoaError(.fileNoSuchFile)
        default: throw ServiceError.unknownOperation(request.operation)
        }
    }

    /// For a request whose answer the test waits for (not one about time-outs): the 5 s default
    /// was missed at the start of a full run, when both cores are busy for a while.
    static let patient: Duration = .seconds(30)

    /// Until the broker says `service` has a worker. A question the broker did not answer in
    /// time is asked again (at the start of a full run, the machine's two cores are busy for a
    /// while); any other failure ends the wait.
    static func waitAlive(_ client: ServiceClient, _ service: String) async throws {
        try await waitUntil("\(service) has a live worker", timeout: .seconds(60)) {
            do {
                return try await client.isAlive(service)
            } catch let failure as ServiceClientError {
                if case .timeout = failure { return false }
                throw failure
            }
        }
    }

    @Test("a request gets its reply; the handler sees the operation and the content")
    func roundTrip() async throws {
        let fixture = try await Self.broker()
        let (worker, running) = Self.start(fixture, handler: Self.echo)
        let client = Self.client(fixture)
        try await Self.waitAlive(client, "demo")
        let reply = try await client.request(
            service: "demo", operation: "echo", content: Data(#"{"site_id":12}"#.utf8), timeout: Self.patient)
        #expect(reply.status == 200 && reply.final)
        #expect(reply.content == Data(#"{"site_id":12}"#.utf8))
        #expect(reply.header.requestID.map(UUIDv7.isValid) == true)
        worker.stop()
        try await running.value
        await client.close()
        await fixture.stop()
    }

    @Test("a streaming request yields each PARTIAL, then the FINAL")
    func streaming() async throws {
        let fixture = try await Self.broker()
        let (worker, running) = Self.start(fixture, handler: Self.echo)
        let client = Self.client(fixture)
        try await Self.waitAlive(client, "demo")
        var seen: [String] = []
        for try await reply in client.stream(service: "demo", operation: "count", timeout: Self.patient) {
            seen.append((reply.final ? "final " : "partial ") + String(decoding: reply.content, as: UTF8.self))
        }
        #expect(seen == [#"partial {"n":1}"#, #"partial {"n":2}"#, #"partial {"n":3}"#, #"final {"done":true}"#])
        worker.stop()
        try await running.value
        await client.close()
        await fixture.stop()
    }

    @Test("errors are typed: service error with its code, unknown operation, handler failure, no such service")
    func typedErrors() async throws {
        let fixture = try await Self.broker { $0.serviceWait = .milliseconds(200) }
        let (worker, running) = Self.start(fixture, handler: Self.echo)
        let client = Self.client(fixture)
        try await Self.waitAlive(client, "demo")
        await #expect(
            throws: ServiceClientError.serviceError(
                status: 409, ServiceFailure(code: "conflict", message: "already checked in today"))
        ) {
            try await client.request(service: "demo", operation: "fail", timeout: Self.patient)
        }
        do {
            _ = try await client.request(service: "demo", operation: "no.such.thing", timeout: Self.patient)
            Issue.record("an unknown operation succeeded")
        } catch {
            guard case .serviceError(404, let failure) = error else {
                Issue.record("expected 404, got \(error)")
                return
            }
            #expect(failure.code == "unknown-operation")
        }
        do {
            _ = try await client.request(service: "demo", operation: "crash", timeout: Self.patient)
            Issue.record("a failing handler succeeded")
        } catch {
            guard case .serviceError(500, let failure) = error else {
                Issue.record("expected 500, got \(error)")
                return
            }
            #expect(failure.code == "internal")
        }
        await #expect(throws: ServiceClientError.noSuchService("nobody")) {
            try await client.request(service: "nobody", operation: "ping")
        }
        await #expect(throws: ServiceClientError.self) {
            try await client.request(service: "demo", operation: "Not Valid")
        }
        #expect(try await client.isAlive("nobody") == false)
        worker.stop()
        try await running.value
        await client.close()
        await fixture.stop()
    }

    @Test(
        "a request that is not idempotent times out when its worker never answers; an idempotent one is retried on a fresh socket and answered"
    )
    func lazyPirate() async throws {
        let fixture = try await Self.broker()
        // A raw worker that takes requests and never answers (it keeps heartbeating, so the
        // broker does not hand the request over).
        let silent = try await fixture.servicePeer()
        try await silent.send(Majordomo.worker(.v02, .ready, service: "slow"))
        let heartbeat = Task {
            while !Task.isCancelled {
                try? await silent.send(Majordomo.worker(.v02, .heartbeat))
                // It holds requests without answering; a DISCONNECT (the broker gave it up while
                // the whole suite starved this task) is answered with READY, as a worker would.
                if let message = try? await silent.receive(timeout: .milliseconds(200)),
                    case .worker(let command)? = try? Majordomo.parse(message.frames[...]), command.command == .disconnect
                {
                    try? await silent.send(Majordomo.worker(.v02, .ready, service: "slow"))
                }
            }
        }
        defer { heartbeat.cancel() }
        // Attempts of a second: each on a fresh socket must connect, be routed and answered in
        // its time, and at 400 ms that missed again and again when every suite ran at once.
        let client = Self.client(fixture, attempt: .seconds(1))
        try await Self.waitAlive(client, "slow")

        await #expect(throws: ServiceClientError.timeout(service: "slow", operation: "echo", after: .milliseconds(600))) {
            try await client.request(service: "slow", operation: "echo", timeout: .milliseconds(600))
        }
        // Now a real worker joins; the silent one still holds the first attempt of the next
        // request, so only the retry, sent on a new socket, can be answered.
        let (worker, running) = Self.start(fixture, service: "slow", handler: Self.echo)
        try await waitUntil("two workers") { fixture.broker.services.statistics.workers == 2 }
        let reply = try await client.request(
            service: "slow", operation: "echo", content: Data(#"{"again":true}"#.utf8), timeout: .seconds(30), idempotent: true)
        #expect(reply.content == Data(#"{"again":true}"#.utf8))
        // Once, unless a loaded machine kept that attempt past its second too: then the client sent
        // it again, which an idempotent request allows.
        #expect(worker.statistics.handled >= 1)
        worker.stop()
        try await running.value
        await client.close()
        await fixture.stop()
    }

    @Test("a worker with concurrency 4 handles 4 requests at once, and 8 requests all complete")
    func concurrency() async throws {
        let fixture = try await Self.broker()
        let gate = Gate()
        let gauge = Gauge()
        let (worker, running) = Self.start(fixture, concurrency: 4) { request, _ in
            gauge.enter()
            defer { gauge.leave() }
            await gate.wait()
            return request.content
        }
        let client = Self.client(fixture)
        try await waitUntil("4 worker sockets") { fixture.broker.services.statistics.workers == 4 }
        let replies = Task {
            try await withThrowingTaskGroup(of: Data.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        try await client.request(service: "demo", operation: "echo", content: Data("\(index)".utf8), timeout: .seconds(20))
                            .content
                    }
                }
                return try await group.reduce(into: Set<Data>()) { $0.insert($1) }
            }
        }
        try await gauge.wait(running: 4)
        try await waitUntil("4 requests queued at the broker") {
            (try? await client.directory().services.first?.queued) == 4
        }
        #expect(gauge.now == 4, "never more than the 4 sockets at once")
        gate.open()
        let contents = try await replies.value
        #expect(contents == Set((0..<8).map { Data("\($0)".utf8) }))
        #expect(gauge.most == 4 && gauge.total == 8)
        worker.stop()
        try await running.value
        await client.close()
        await fixture.stop()
    }

    @Test(
        "with its tasks on the I/O thread (runsOnIOThread, clients preferring the thread), a worker of 4 slots answers 8 clients' 400 requests, streams and errors there, and stop() drains"
    )
    func tasksOnTheIOThread() async throws {
        let fixture = try await Self.broker()
        // The I/O thread's identity, from a body it runs.
        let probe = try await fixture.io.open(.pair)
        let ioThread = try await probe.perform { _ in pthread_self() }
        await probe.close()
        let handlerThreads = Watched(Set<pthread_t>())
        var settings = Self.fastSettings(concurrency: 4)
        settings.runsOnIOThread = true
        let worker = ServiceWorker(
            service: "demo", io: fixture.io, endpoint: fixture.endpoints.service, settings: settings, logger: Self.quiet
        ) { request, partials in
            handlerThreads.update { _ = $0.insert(pthread_self()) }
            return try await Self.echo(request, partials)
        }
        let running = Task { try await worker.run() }
        let client = Self.client(fixture)
        try await waitUntil("4 worker sockets") { fixture.broker.services.statistics.workers == 4 }
        let contents = try await withThrowingTaskGroup(of: [Data].self) { group in
            for task in 0..<8 {
                group.addTask(executorPreference: fixture.io) {
                    var contents: [Data] = []
                    for index in 0..<50 {
                        let content = Data(#"{"task":\#(task),"index":\#(index)}"#.utf8)
                        let reply = try await client.request(service: "demo", operation: "echo", content: content, timeout: Self.patient)
                        #expect(pthread_equal(pthread_self(), ioThread) != 0, "the client's task resumes on the I/O thread")
                        contents.append(reply.content)
                    }
                    return contents
                }
            }
            return try await group.reduce(into: [Data]()) { $0 += $1 }
        }
        #expect(Set(contents).count == 400)
        try await withTaskExecutorPreference(fixture.io) {
            var seen: [String] = []
            for try await reply in client.stream(service: "demo", operation: "count", timeout: Self.patient) {
                seen.append(String(decoding: reply.content, as: UTF8.self))
            }
            #expect(seen == [#"{"n":1}"#, #"{"n":2}"#, #"{"n":3}"#, #"{"done":true}"#])
            await #expect(throws: ServiceClientError.self) {
                try await client.request(service: "demo", operation: "fail", timeout: Self.patient)
            }
        }
        #expect(handlerThreads.value == [ioThread], "every handler ran on the I/O thread")
        worker.stop()
        try await running.value
        #expect(worker.statistics.handled == 401 && worker.statistics.failed == 1)
        await client.close()
        await fixture.stop()
    }

    @Test("stop() drains: the request in hand is answered, then the worker says DISCONNECT and run() returns")
    func drain() async throws {
        let fixture = try await Self.broker()
        let gate = Gate()
        let gauge = Gauge()
        let (worker, running) = Self.start(fixture) { request, _ in
            gauge.enter()
            defer { gauge.leave() }
            await gate.wait()
            return request.content
        }
        let client = Self.client(fixture)
        try await Self.waitAlive(client, "demo")
        let pending = Task {
            try await client.request(service: "demo", operation: "echo", content: Data("[1]".utf8), timeout: .seconds(20))
        }
        try await gauge.wait(running: 1)
        worker.stop()
        gate.open()
        #expect(try await pending.value.content == Data("[1]".utf8))
        try await running.value
        try await waitUntil("the service is gone") { try await client.isAlive("demo") == false }
        await client.close()
        await fixture.stop()
    }

    @Test("when the broker restarts, workers register again by themselves, and requests work again")
    func brokerRestart() async throws {
        let directory = try TemporaryDirectory("service-restart")
        let port = try freePort()
        let configure: (inout BrokerConfiguration) -> Void = { configuration in
            configuration.serviceEndpoint = "tcp://127.0.0.1:\(port)"
            // The suite's 500 ms × 10, as `broker()` has: with 100 ms the broker gave the worker up
            // after 1 s without its (500 ms) HEARTBEAT, which a loaded machine exceeds.
            configuration.serviceHeartbeat = .milliseconds(500)
            configuration.serviceLiveness = 10
        }
        let first = try await BrokerFixture.start(directory: directory, configure)
        let io = try IOThread(context: first.context)
        let worker = ServiceWorker(
            service: "demo", io: io, endpoint: "tcp://127.0.0.1:\(port)", settings: Self.fastSettings(concurrency: 2), logger: Self.quiet,
            handler: Self.echo)
        let running = Task { try await worker.run() }
        let client = ServiceClient(io: io, endpoint: "tcp://127.0.0.1:\(port)", logger: Self.quiet)
        try await Self.waitAlive(client, "demo")
        #expect(
            try await client.request(service: "demo", operation: "echo", content: Data("1".utf8), timeout: Self.patient).content
                == Data("1".utf8))

        await first.broker.stop()
        // While the broker is down a request fails in its time, it does not hang.
        await #expect(throws: ServiceClientError.self) {
            try await client.request(service: "demo", operation: "echo", timeout: .milliseconds(300))
        }
        let second = try await BrokerFixture.start(directory: directory, configure)
        try await Self.waitAlive(client, "demo")
        try await waitUntil("both sockets are back") { second.broker.services.statistics.workers == 2 }
        let again = try await client.request(service: "demo", operation: "echo", content: Data("2".utf8), idempotent: true)
        #expect(again.content == Data("2".utf8))
        #expect(worker.statistics.connections >= 4, "each socket connected again")
        worker.stop()
        try await running.value
        await client.close()
        await io.shutdown()
        await first.stop(remove: false)
        await second.stop()
    }

    @Test(
        "a worker with a shorter heartbeat than its broker stays connected to it and serves (the rule: WorkerLivenessTests)",
        .timeLimit(.minutes(1)))
    func heartbeatMismatch() async throws {
        let fixture = try await BrokerFixture.start { $0.serviceHeartbeat = .seconds(1) }
        var settings = Self.fastSettings()
        settings.heartbeat = .milliseconds(100)
        settings.liveness = 3  // 300 ms: below the broker's 1 s interval
        let worker = ServiceWorker(
            service: "demo", io: fixture.io, endpoint: fixture.endpoints.service, settings: settings, logger: Self.quiet, handler: Self.echo
        )
        let running = Task { try await worker.run() }
        // Learning takes a reconnect or two; then one connection hears the broker's HEARTBEATs
        // one after another, each a second after the last, where our own limit is 300 ms.
        var inARow = 0
        for await notice in worker.notices {
            if case .brokerHeartbeat = notice { inARow += 1 } else { inARow = 0 }
            if inARow == 4 { break }
        }
        #expect(inARow == 4)
        let client = Self.client(fixture)
        let reply = try await client.request(
            service: "demo", operation: "echo", content: Data("[]".utf8), timeout: .seconds(20), idempotent: true)
        #expect(reply.content == Data("[]".utf8))
        worker.stop()
        try await running.value
        await client.close()
        await fixture.stop()
    }
}
