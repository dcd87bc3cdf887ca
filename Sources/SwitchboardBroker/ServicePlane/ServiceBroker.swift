// The broker's service plane: a Majordomo broker (MDP/0.1 and MDP/0.2, with MMI) on its own
// ROUTER and its own thread.
//
// One thread owns the socket and the dispatcher, as with the event plane, so dispatch needs no
// locks. The rules (least-recently-used dispatch, heartbeats and expiry, a lost worker's request
// going to the next worker, `service.wait`, MMI) are `ServiceDispatcher`'s, a value type with no
// I/O beside this file; this file reads, authorises, and carries out what the dispatcher says.

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
        /// Bytes one connection may have sent that the broker has not yet taken (`ReceiveGuard`).
        public var maxPendingBytes: Int64 = 16 << 20
        /// A request is handed to at most this many workers in turn before the client is told
        /// `worker-lost` (a request that kills every worker it reaches stops there).
        public var maxAttempts = 3

        public init() {}
    }

    public let settings: Settings
    private let logger: Logger
    private let context: Context
    let security: BrokerSecurity?
    /// The service plane's thread: it owns the socket and the dispatcher.
    private let thread: PollThread
    private let state = Mutex(State())
    let metricsFactory: any MetricsFactory

    private struct State {
        var statistics = ServiceStatistics()
        var rebindRequested = false
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
        self.thread = try PollThread(name: "service-broker")
    }

    public var statistics: ServiceStatistics { state.withLock { $0.statistics } }

    /// Binds the endpoint and starts the thread; returns the bound endpoint.
    public func start() async throws -> String {
        try await thread.start { [self] ready in
            let core = try ServiceCore(broker: self)
            ready(core.endpoint)
            core.run()
            core.close()
        }
    }

    public func requestStop() { thread.requestStop() }

    /// Unbinds and binds the endpoint again at the next wake-up (see `Broker.dropAllConnections`).
    public func dropAllConnections() {
        state.withLock { $0.rebindRequested = true }
        thread.wakeUp.signal()
    }

    fileprivate func takeRebindRequest() -> Bool {
        state.withLock { state in
            defer { state.rebindRequested = false }
            return state.rebindRequested
        }
    }

    /// Waits until the thread has closed its socket (at once if it never started).
    public func waitUntilStopped() async { await thread.waitUntilStopped() }

    public func stop() async {
        requestStop()
        await waitUntilStopped()
    }

    fileprivate var stopRequested: Bool { thread.isStopRequested }
    fileprivate func update(_ body: (inout ServiceStatistics) -> Void) { state.withLock { body(&$0.statistics) } }
    fileprivate var loggerForCore: Logger { logger }
    fileprivate var contextForCore: Context { context }
    fileprivate var wakeUpForCore: WakeUpSignal { thread.wakeUp }
}

/// Everything the service broker thread owns: the socket, and the dispatcher whose actions it
/// carries out. The rules themselves live in `ServiceDispatcher`; this is only I/O.
private final class ServiceCore {
    let broker: ServiceBroker
    let settings: ServiceBroker.Settings
    let logger: Logger
    let socket: Socket
    let endpoint: String
    let poller = Poller()
    /// Handshake failures that ZAP never sees and connections the receive guard dropped; its
    /// PAIR is poller index 2.
    let connections: ConnectionWatch
    var dispatcher: ServiceDispatcher
    var dropLog = LogLimiter(perInterval: 20)
    let readBatch = 512
    let metrics: ServiceMetrics

    init(broker: ServiceBroker) throws {
        self.broker = broker
        self.settings = broker.settings
        self.logger = broker.loggerForCore
        self.metrics = ServiceMetrics(factory: broker.metricsFactory)
        dispatcher = ServiceDispatcher(settings: .init(broker.settings, curve: broker.security != nil), now: .now)
        socket = try broker.contextForCore.socket(.router, linger: 1000)
        try socket.set(
            [
                .sendHighWaterMark(settings.highWaterMark), .receiveHighWaterMark(settings.highWaterMark),
                .maxMessageSize(settings.maxFrameBytes), .routerMandatory(true),
            ] + (broker.security?.serverOptions(.service) ?? []))
        try socket.bind(settings.endpoint)
        endpoint = try socket.lastEndpoint()
        connections = try ConnectionWatch(
            context: broker.contextForCore, sockets: [(socket, .service, endpoint)], security: broker.security,
            limit: settings.maxPendingBytes, logger: logger)
        poller.add(fileDescriptor: broker.wakeUpForCore.fileDescriptor)
        poller.add(socket)
        _ = connections.add(to: poller)
        logger.info("service broker started", metadata: ["endpoint": "\(endpoint)"])
    }

    func run() {
        while !broker.stopRequested {
            // +1: a deadline less than a millisecond away would be a 0 ms poll, again and again
            // until it passed (the thread spun for the last millisecond before each heartbeat).
            let wait = max(0, ContinuousClock.now.duration(to: dispatcher.nextDeadline()).wholeMilliseconds + 1)
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
            if poller.returned(2).contains(.readable) { connections.drain(0) }
            let now = ContinuousClock.now
            if now >= dispatcher.nextHeartbeat {
                perform(dispatcher.heartbeat(at: now))
                metrics.workers(dispatcher.workerCounts)
            }
            perform(dispatcher.expireRequests(at: now))
            publishStatistics()
        }
    }

    func close() {
        // Workers are told to reconnect (to whatever broker comes next); clients are left to
        // their own time-outs and retries.
        for worker in dispatcher.registeredWorkers { perform([.command(.disconnect, to: worker)]) }
        socket.close()
        connections.close()
        logger.info("service broker stopped")
    }

    func publishStatistics() {
        var snapshot = dispatcher.statistics
        snapshot.workers = dispatcher.workers.count
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
        let security = broker.security
        perform(
            dispatcher.receive(frames, at: .now) { inbound in
                guard let security, let reason = authorise(inbound, principal: principal, security: security) else { return nil }
                security.refused("service", principal: principal, endpoint: .service, reason: reason)
                return reason
            })
    }

    /// The role checks of the service plane (nil: allowed).
    func authorise(_ inbound: Majordomo.Inbound, principal: String?, security: BrokerSecurity) -> String? {
        guard let certificate = security.certificate(of: principal) else { return "principal '\(principal ?? "?")' is no longer allowed" }
        let role = certificate.role
        switch inbound {
        case .client(let message):
            guard message.command == .request else { return nil }  // dropped as malformed later
            let operation = ServiceBody.peekOperation(message.body)
            if let reason = Policy.call(role, service: message.service, operation: operation) { return reason }
            guard message.service == "auth" else { return nil }
            return Policy.token(
                principal: certificate.name, allowed: certificate.tokenBackends, operation: operation,
                backend: ServiceBody.peekContentString(message.body, field: "backend"))
        case .worker(let message):
            guard message.command == .ready, let service = message.service else { return nil }
            return Policy.register(role, service: service)
        }
    }

    // MARK: Output

    /// Carries out the dispatcher's actions in order: frames to send, metrics, log lines.
    func perform(_ actions: [ServiceDispatcher.Action]) {
        for action in actions {
            switch action {
            case .reply(let request, _, true, let status):
                metrics.answered(service: request.service, status: status, after: request.received.duration(to: .now))
            case .note(let note):
                log(note)
            default:
                break
            }
            if let (peer, frames) = action.frames { sendRaw([peer] + frames) }
        }
    }

    func log(_ note: ServiceDispatcher.Note) {
        switch note {
        case .workerReady(let service, let worker, let version):
            logger.debug("worker ready", metadata: ["service": "\(service)", "worker": "\(worker.hex)", "protocol": "\(version)"])
        case .dropped(let peer, let reason):
            if let suppressed = dropLog.admit("dropped", at: .now) {
                logger.warning(
                    "malformed service message dropped",
                    metadata: withSuppressed(suppressed, ["peer": "\(peer.hex)", "reason": "\(reason)"]))
            }
        case .workerRefused(let worker, let reason):
            if let suppressed = dropLog.admit("worker-refused", at: .now) {
                logger.warning(
                    "worker disconnected", metadata: withSuppressed(suppressed, ["worker": "\(worker.hex)", "reason": "\(reason)"]))
            }
        case .workerRemoved(let service, let worker, let reason):
            logger.info("worker removed", metadata: ["service": "\(service)", "worker": "\(worker.hex)", "reason": "\(reason)"])
        }
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
