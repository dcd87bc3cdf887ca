// The broker's service plane: a Majordomo broker (MDP/0.1 and MDP/0.2, with MMI) on its own
// ROUTER and its own thread.
//
// One thread owns the socket and every table, as with the event plane, so dispatch needs no
// locks. Workers are kept per service in least-recently-used order: a worker that becomes idle
// goes to the back of its service's idle list and the front one gets the next request. Every
// request a worker holds is remembered, so a worker that dies mid-request (heartbeats stop, or
// it disconnects) has its request handed to another worker. Requests for a service with no
// worker wait `service.wait`, then the client gets a 503 `no-worker` reply.

public import CoreMetrics
import Foundation
public import Logging
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import Synchronization
public import ZeroMQ

/// Counters of the service plane; read with `ServiceBroker.statistics`.
public struct ServiceStatistics: Sendable, Hashable {
    /// Client requests accepted (MMI included).
    public var requests: Int64 = 0
    /// Requests sent to workers (a request handed over after a worker died counts again).
    public var dispatched: Int64 = 0
    /// Final replies sent to clients (error replies of the broker included).
    public var replies: Int64 = 0
    /// Requests answered with an error by the broker itself (no worker, queue full, worker lost).
    public var brokerErrors: Int64 = 0
    /// Requests handed to another worker after theirs died.
    public var handedOver: Int64 = 0
    /// Messages dropped as malformed.
    public var malformed: Int64 = 0
    /// DISCONNECTs sent for valid but unexpected commands.
    public var disconnects: Int64 = 0
    /// Workers removed because their heartbeats stopped.
    public var expiredWorkers: Int64 = 0
    /// Workers registered now.
    public var workers: Int = 0
}

/// The Majordomo broker. `start()` binds and starts its thread; `stop()` closes it.
public final class ServiceBroker: Sendable {
    public struct Settings: Sendable, Hashable {
        public var endpoint = "tcp://127.0.0.1:5563"
        public var heartbeat: Duration = .milliseconds(2500)
        public var liveness = 3
        public var wait: Duration = .seconds(5)
        public var queueLimit = 10_000
        public var highWaterMark: Int32 = 100_000
        public var maxFrameBytes: Int64 = 1 << 20
        /// A request is handed to at most this many workers in turn before the client is told
        /// `worker-lost` (a request that kills every worker it reaches stops there).
        public var maxAttempts = 3

        public init() {}
    }

    public let settings: Settings
    private let logger: Logger
    private let context: Context
    let security: BrokerSecurity?
    private let wakeUp: WakeUpSignal
    private let state = Mutex(State())
    let metricsFactory: any MetricsFactory

    private struct State {
        var statistics = ServiceStatistics()
        var stopRequested = false
        var rebindRequested = false
        var finished = false
        var started = false
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
        /// Threads (not tasks) waiting in `waitUntilStoppedBlocking()`.
        var blockedWaiters: [DispatchSemaphore] = []
    }

    public init(
        settings: Settings, logger: Logger, context: Context, security: BrokerSecurity? = nil,
        metrics: any MetricsFactory = MetricsSystem.factory
    ) throws {
        self.settings = settings
        self.metricsFactory = metrics
        self.logger = logger
        self.context = context
        self.security = security
        self.wakeUp = try WakeUpSignal()
    }

    public var statistics: ServiceStatistics { state.withLock { $0.statistics } }

    /// Binds the endpoint and starts the thread; returns the bound endpoint.
    public func start() async throws -> String {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
            let thread = Thread { [self] in
                let core: ServiceCore
                do {
                    core = try ServiceCore(broker: self)
                } catch {
                    markFinished()
                    continuation.resume(throwing: error)
                    return
                }
                state.withLock { $0.started = true }
                continuation.resume(returning: core.endpoint)
                core.run()
                core.close()
                markFinished()
            }
            thread.name = "service-broker"
            thread.stackSize = 4 << 20
            thread.start()
        }
    }

    public func requestStop() {
        state.withLock { $0.stopRequested = true }
        wakeUp.signal()
    }

    /// Unbinds and binds the endpoint again at the next wake-up (see `Broker.dropAllConnections`).
    public func dropAllConnections() {
        state.withLock { $0.rebindRequested = true }
        wakeUp.signal()
    }

    fileprivate func takeRebindRequest() -> Bool {
        state.withLock { state in
            defer { state.rebindRequested = false }
            return state.rebindRequested
        }
    }

    /// Waits until the thread has closed its socket (at once if it never started).
    public func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                let done = state.finished || !state.started
                if !done { state.finishWaiters.append(continuation) }
                return done
            }
            if done { continuation.resume() }
        }
    }

    /// For a thread that is not in the cooperative pool (the broker thread at exit).
    /// Never call it from async code: it blocks its thread.
    func waitUntilStoppedBlocking() {
        let done = DispatchSemaphore(value: 0)
        let finished = state.withLock { state -> Bool in
            let finished = state.finished || !state.started
            if !finished { state.blockedWaiters.append(done) }
            return finished
        }
        if !finished { done.wait() }
    }

    public func stop() async {
        requestStop()
        await waitUntilStopped()
    }

    private func markFinished() {
        let (waiters, blocked) = state.withLock { state -> ([CheckedContinuation<Void, Never>], [DispatchSemaphore]) in
            state.finished = true
            defer {
                state.finishWaiters = []
                state.blockedWaiters = []
            }
            return (state.finishWaiters, state.blockedWaiters)
        }
        for waiter in waiters { waiter.resume() }
        for thread in blocked { thread.signal() }
    }

    fileprivate var stopRequested: Bool { state.withLock { $0.stopRequested } }
    fileprivate func update(_ body: (inout ServiceStatistics) -> Void) { state.withLock { body(&$0.statistics) } }
    fileprivate var loggerForCore: Logger { logger }
    fileprivate var contextForCore: Context { context }
    fileprivate var wakeUpForCore: WakeUpSignal { wakeUp }
}

/// A client request waiting for, or held by, a worker.
private struct Job {
    var client: Data
    var clientVersion: Majordomo.Version
    var clientDelimited: Bool
    var service: String
    var body: [Data]
    var received: ContinuousClock.Instant
    var attempts = 0
    /// A PARTIAL was forwarded: the request can no longer be handed to another worker.
    var partialSent = false
}

private final class WorkerRecord {
    let identity: Data
    let version: Majordomo.Version
    let delimited: Bool
    let service: String
    var expiry: ContinuousClock.Instant
    var job: Job?

    init(identity: Data, version: Majordomo.Version, delimited: Bool, service: String, expiry: ContinuousClock.Instant) {
        self.identity = identity
        self.version = version
        self.delimited = delimited
        self.service = service
        self.expiry = expiry
    }
}

private final class ServiceRecord {
    let name: String
    var workers: Set<Data> = []
    /// Idle workers, least recently used first.
    var idle: [Data] = []
    var queue = RingBuffer<Job>()

    init(name: String) { self.name = name }
}

/// Everything the service broker thread owns.
private final class ServiceCore {
    let broker: ServiceBroker
    let settings: ServiceBroker.Settings
    let logger: Logger
    let socket: Socket
    let endpoint: String
    let poller = Poller()
    /// Handshake failures that ZAP never sees (nil: no CURVE); its PAIR is poller index 2.
    let handshakes: HandshakeWatch?
    var workers: [Data: WorkerRecord] = [:]
    var services: [String: ServiceRecord] = [:]
    var nextHeartbeat: ContinuousClock.Instant
    var dropLog = RateLimiter(perSecond: 20)
    var pending = ServiceStatistics()
    let readBatch = 512
    let metrics: ServiceMetrics

    init(broker: ServiceBroker) throws {
        self.broker = broker
        self.settings = broker.settings
        self.logger = broker.loggerForCore
        self.metrics = ServiceMetrics(factory: broker.metricsFactory)
        socket = try broker.contextForCore.socket(.router, linger: 1000)
        try socket.set(
            [
                .sendHighWaterMark(settings.highWaterMark), .receiveHighWaterMark(settings.highWaterMark),
                .maxMessageSize(settings.maxFrameBytes), .routerMandatory(true),
            ] + (broker.security?.serverOptions(.service) ?? []))
        try socket.bind(settings.endpoint)
        endpoint = try socket.lastEndpoint()
        nextHeartbeat = .now + settings.heartbeat
        let sockets: [(Socket, Endpoint)] = [(socket, .service)]
        let context = broker.contextForCore
        handshakes = try broker.security.map { security in try HandshakeWatch(context: context, sockets: sockets, security: security) }
        poller.add(fileDescriptor: broker.wakeUpForCore.fileDescriptor)
        poller.add(socket)
        _ = handshakes?.add(to: poller)
        logger.info("service broker started", metadata: ["endpoint": "\(endpoint)"])
    }

    var expiryInterval: Duration { settings.heartbeat * settings.liveness }

    func run() {
        while !broker.stopRequested {
            let now = ContinuousClock.now
            let wait = max(0, (min(nextHeartbeat, nextRequestExpiry()) - now).wholeMilliseconds)
            do {
                try poller.poll(timeout: Int(wait))
            } catch {
                logger.error("service broker poll failed", metadata: ["error": "\(error)"])
                return
            }
            if poller.returned(0).contains(.readable) { broker.wakeUpForCore.drain() }
            if broker.takeRebindRequest() {
                do {
                    try rebindEndpoint(socket, endpoint)
                } catch {
                    logger.error("could not rebind the service endpoint", metadata: ["error": "\(error)"])
                }
            }
            if poller.returned(1).contains(.readable) { readMessages() }
            if handshakes != nil, poller.returned(2).contains(.readable) { handshakes?.drain(0) }
            if ContinuousClock.now >= nextHeartbeat {
                heartbeat()
                nextHeartbeat = ContinuousClock.now + settings.heartbeat
                // Forget services nobody serves or asks for, so the table cannot grow without bound.
                services = services.filter { !$0.value.workers.isEmpty || !$0.value.queue.isEmpty }
                metrics.workers(services.mapValues(\.workers.count))
            }
            expireRequests()
            publishStatistics()
        }
    }

    func close() {
        // Workers are told to reconnect (to whatever broker comes next); clients are left to
        // their own time-outs and retries.
        for worker in workers.values { send(worker, .disconnect) }
        socket.close()
        handshakes?.close()
        logger.info("service broker stopped")
    }

    func publishStatistics() {
        pending.workers = workers.count
        let snapshot = pending
        broker.update { $0 = snapshot }
    }

    // MARK: Input

    func readMessages() {
        for _ in 0..<readBatch {
            let message: Message?
            do {
                message = try socket.receive(dontWait: true)
            } catch {
                logger.warning("service receive failed", metadata: ["error": "\(error)"])
                return
            }
            guard let message else { return }
            handle(message.frames, principal: message.userID)
        }
    }

    func handle(_ frames: [Data], principal: String? = nil) {
        guard frames.count >= 2 else {
            drop(frames.first ?? Data(), "a message needs a routing frame and a protocol header")
            return
        }
        let sender = frames[0]
        let inbound: Majordomo.Inbound
        do {
            inbound = try Majordomo.parse(frames[1...])
        } catch {
            drop(sender, error.description)
            return
        }
        if let security = broker.security, let reason = authorise(inbound, principal: principal, security: security) {
            security.refused("service", principal: principal, endpoint: .service, reason: reason)
            refuse(sender, inbound, reason)
            return
        }
        switch inbound {
        case .client(let message):
            clientMessage(sender, message)
        case .worker(let message):
            workerMessage(sender, message)
        }
    }

    /// The role checks of the service plane (nil: allowed).
    func authorise(_ inbound: Majordomo.Inbound, principal: String?, security: BrokerSecurity) -> String? {
        guard let role = security.role(of: principal) else { return "principal '\(principal ?? "?")' is no longer allowed" }
        switch inbound {
        case .client(let message):
            guard message.command == .request else { return nil }  // dropped as malformed later
            let operation = ServiceBody.peekOperation(message.body)
            return Policy.call(role, service: message.service, operation: operation)
        case .worker(let message):
            guard message.command == .ready, let service = message.service else { return nil }
            return Policy.register(role, service: service)
        }
    }

    /// A refused client request gets a 403 REPLY; a refused READY gets DISCONNECT.
    func refuse(_ sender: Data, _ inbound: Majordomo.Inbound, _ reason: String) {
        switch inbound {
        case .client(let message):
            let job = Job(
                client: sender, clientVersion: message.version, clientDelimited: message.delimited, service: message.service,
                body: message.body, received: .now)
            failRequest(job, status: ServiceStatus.forbidden, ServiceFailure(code: "forbidden", message: reason))
        case .worker(let message):
            pending.disconnects += 1
            sendRaw([sender] + Majordomo.worker(message.version, .disconnect, delimited: message.delimited))
        }
    }

    func drop(_ sender: Data, _ reason: String) {
        pending.malformed += 1
        if dropLog.allow() {
            logger.warning("malformed service message dropped", metadata: ["peer": "\(sender.hex)", "reason": "\(reason)"])
        }
    }

    // MARK: Clients

    func clientMessage(_ sender: Data, _ message: Majordomo.ClientMessage) {
        guard message.command == .request else {
            drop(sender, "a client may only send REQUEST, not \(message.command == .partial ? "PARTIAL" : "FINAL")")
            return
        }
        pending.requests += 1
        let job = Job(
            client: sender, clientVersion: message.version, clientDelimited: message.delimited, service: message.service,
            body: message.body, received: .now)
        if message.service.hasPrefix("mmi.") {
            answerMMI(job)
            return
        }
        let service = service(named: message.service)
        guard service.queue.count < settings.queueLimit else {
            failRequest(
                job, status: ServiceStatus.unavailable,
                ServiceFailure(
                    code: "queue-full", message: "service '\(message.service)' has \(settings.queueLimit) requests waiting",
                    retryable: true))
            return
        }
        service.queue.append(job)
        dispatch(service)
    }

    func service(named name: String) -> ServiceRecord {
        if let found = services[name] { return found }
        let created = ServiceRecord(name: name)
        services[name] = created
        return created
    }

    /// Sends the client its final reply (or, in MDP/0.2, a PARTIAL when `final` is false).
    func replyToClient(_ job: Job, body: [Data], final: Bool, status: Int? = nil) {
        if final {
            metrics.answered(service: job.service, status: status ?? ServiceBody.peekStatus(body), after: job.received.duration(to: .now))
        }
        if !final && job.clientVersion == .v01 { return }  // MDP/0.1 has no partial replies
        let frames = Majordomo.clientReply(
            job.clientVersion, delimited: job.clientDelimited, final: final, service: job.service, body: body)
        sendRaw([job.client] + frames)
        if final { pending.replies += 1 }
    }

    /// Answers a request with an error REPLY written by the broker.
    func failRequest(_ job: Job, status: Int, _ failure: ServiceFailure) {
        let (requestID, parent) = ServiceBody.peekRequest(job.body)
        let body = ServiceBody.replyBody(ReplyHeader(requestID: requestID, status: status, error: failure), parent: parent)
        pending.brokerErrors += 1
        replyToClient(job, body: body, final: true, status: status)
    }

    /// Requests for services without workers wait at most `wait`.
    func expireRequests() {
        let now = ContinuousClock.now
        for service in services.values where service.workers.isEmpty && !service.queue.isEmpty {
            while let first = service.queue.first, now - first.received >= settings.wait {
                _ = service.queue.popFirst()
                failRequest(
                    first, status: ServiceStatus.unavailable,
                    ServiceFailure(
                        code: "no-worker", message: "no worker for service '\(service.name)' within \(DurationText.format(settings.wait))",
                        retryable: true))
            }
        }
    }

    /// When the oldest request for a service without workers runs out of waiting time.
    func nextRequestExpiry() -> ContinuousClock.Instant {
        var next = ContinuousClock.now + settings.wait
        for service in services.values where service.workers.isEmpty {
            if let first = service.queue.first { next = min(next, first.received + settings.wait) }
        }
        return next
    }

    // MARK: MMI (RFC 8)

    func answerMMI(_ job: Job) {
        switch job.service {
        case "mmi.service":
            let name = job.body.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
            let alive = !(services[name]?.workers.isEmpty ?? true)
            replyToClient(job, body: [Data((alive ? "200" : "404").utf8)], final: true)
        case "mmi.workers":
            replyToClient(job, body: [Data("200".utf8), workersReport()], final: true)
        default:
            replyToClient(job, body: [Data("501".utf8)], final: true)
        }
    }

    /// The `mmi.workers` extension: every service with its workers and queue (section 12).
    func workersReport() -> Data {
        let now = ContinuousClock.now
        var list: [JSONValue] = []
        for service in services.values.sorted(by: { $0.name < $1.name }) {
            let oldest = service.queue.first.map { (now - $0.received).wholeMilliseconds } ?? 0
            let versions = Set(service.workers.compactMap { workers[$0]?.version.description }).sorted()
            list.append(
                .object([
                    "name": .string(service.name),
                    "workers": .integer(Int64(service.workers.count)),
                    "idle": .integer(Int64(service.idle.count)),
                    "busy": .integer(Int64(service.workers.count - service.idle.count)),
                    "queued": .integer(Int64(service.queue.count)),
                    "oldest_queued_ms": .integer(oldest),
                    "protocols": .array(versions.map { .string($0) }),
                ]))
        }
        let report: JSONValue = .object([
            "services": .array(list),
            "workers": .integer(Int64(workers.count)),
            "heartbeat_ms": .integer(settings.heartbeat.wholeMilliseconds),
            "liveness": .integer(Int64(settings.liveness)),
            "curve": .bool(broker.security != nil),
        ])
        var writer = JSONWriter()
        writer.value(report)
        return writer.data
    }

    // MARK: Workers

    func workerMessage(_ sender: Data, _ message: Majordomo.WorkerMessage) {
        let known = workers[sender]
        if let known {
            guard known.version == message.version else {
                disconnect(sender, message, "switched from \(known.version) to \(message.version)")
                return
            }
            known.expiry = .now + expiryInterval
        }
        switch message.command {
        case .ready:
            guard known == nil else {
                disconnect(sender, message, "READY from a worker that is already registered")
                return
            }
            let name = message.service ?? ""
            guard !name.hasPrefix("mmi.") else {
                disconnect(sender, message, "the mmi. services belong to the broker")
                return
            }
            let worker = WorkerRecord(
                identity: sender, version: message.version, delimited: message.delimited, service: name,
                expiry: .now + expiryInterval)
            workers[sender] = worker
            let service = service(named: name)
            service.workers.insert(sender)
            service.idle.append(sender)
            logger.debug("worker ready", metadata: ["service": "\(name)", "worker": "\(sender.hex)", "protocol": "\(message.version)"])
            dispatch(service)
        case .heartbeat:
            guard known != nil else {
                disconnect(sender, message, "HEARTBEAT before READY")
                return
            }
        case .partial, .final:
            guard let worker = known, var job = worker.job else {
                disconnect(sender, message, "\(message.command) without a request in hand")
                return
            }
            guard message.client == job.client else {
                disconnect(sender, message, "\(message.command) for a client it was not given")
                return
            }
            if message.command == .partial {
                job.partialSent = true
                worker.job = job
                replyToClient(job, body: message.body, final: false)
                return
            }
            worker.job = nil
            replyToClient(job, body: message.body, final: true)
            let service = service(named: worker.service)
            service.idle.append(worker.identity)
            dispatch(service)
        case .disconnect:
            if known != nil { removeWorker(sender, reason: "it disconnected") }
        case .request:
            disconnect(sender, message, "REQUEST is sent by the broker, not to it")
        }
    }

    /// Answers a valid but unexpected command with DISCONNECT, and forgets the worker.
    func disconnect(_ sender: Data, _ message: Majordomo.WorkerMessage, _ reason: String) {
        pending.disconnects += 1
        if dropLog.allow() {
            logger.warning("worker disconnected", metadata: ["worker": "\(sender.hex)", "reason": "\(reason)"])
        }
        sendRaw([sender] + Majordomo.worker(message.version, .disconnect, delimited: message.delimited))
        if workers[sender] != nil { removeWorker(sender, reason: reason, notify: false) }
    }

    func removeWorker(_ identity: Data, reason: String, notify: Bool = false) {
        guard let worker = workers.removeValue(forKey: identity) else { return }
        if notify { send(worker, .disconnect) }
        let service = service(named: worker.service)
        service.workers.remove(identity)
        service.idle.removeAll { $0 == identity }
        if var job = worker.job {
            if job.partialSent || job.attempts >= settings.maxAttempts {
                failRequest(
                    job, status: ServiceStatus.badGateway,
                    ServiceFailure(
                        code: "worker-lost",
                        message: job.partialSent
                            ? "the worker for '\(job.service)' was lost after sending partial replies"
                            : "the request was lost with \(job.attempts) workers of '\(job.service)' in turn",
                        retryable: false))
            } else {
                // Handed to the next worker before anything that arrived later.
                job.received = .now
                service.queue.prepend(job)
                pending.handedOver += 1
            }
        }
        logger.info("worker removed", metadata: ["service": "\(worker.service)", "worker": "\(identity.hex)", "reason": "\(reason)"])
        dispatch(service)
    }

    func dispatch(_ service: ServiceRecord) {
        while !service.idle.isEmpty, var job = service.queue.popFirst() {
            let identity = service.idle.removeFirst()
            guard let worker = workers[identity] else { continue }
            job.attempts += 1
            worker.job = job
            pending.dispatched += 1
            sendRaw(
                [identity]
                    + Majordomo.worker(worker.version, .request, client: job.client, body: job.body, delimited: worker.delimited))
        }
    }

    func heartbeat() {
        let now = ContinuousClock.now
        for worker in Array(workers.values) {
            if worker.expiry <= now {
                pending.expiredWorkers += 1
                removeWorker(worker.identity, reason: "no heartbeat for \(DurationText.format(expiryInterval))", notify: true)
            } else {
                send(worker, .heartbeat)
            }
        }
    }

    func send(_ worker: WorkerRecord, _ command: Majordomo.WorkerCommand) {
        sendRaw([worker.identity] + Majordomo.worker(worker.version, command, delimited: worker.delimited))
    }

    /// Never blocks: a peer that is gone or full misses the message (clients time out and
    /// retry; workers that miss heartbeats are caught by their own liveness check).
    func sendRaw(_ frames: [Data]) {
        do {
            _ = try socket.send(frames, dontWait: true)
        } catch let error where error.isHostUnreachable {
            // The peer went away.
        } catch {
            logger.debug("service message not sent", metadata: ["error": "\(error)"])
        }
    }
}
