public import Foundation
public import Logging
public import SwitchboardProtocol
import Synchronization
public import ZeroMQ

/// A request as a service handler sees it.
public struct ServiceRequest: Sendable {
    public var header: RequestHeader
    /// The operation's input, raw JSON.
    public var content: Data
    public var metadata: Data
    /// When the worker got it plus `timeout_ms`: past this the client has given up.
    public var deadline: ContinuousClock.Instant

    public var operation: String { header.operation }

    /// The content parsed (strictly) as JSON.
    public func json() throws(ServiceError) -> JSONValue {
        guard let value = JSONValue.parse(content) else { throw ServiceError.invalidContent("content is not valid JSON") }
        return value
    }
}

/// A failure a handler throws to answer with a status and error code.
public struct ServiceError: Error, Sendable, CustomStringConvertible {
    public var status: Int
    public var failure: ServiceFailure

    public init(status: Int, code: String, message: String, retryable: Bool? = nil) {
        self.status = status
        self.failure = ServiceFailure(code: code, message: message, retryable: retryable)
    }

    public var description: String { "\(status) \(failure)" }

    public static func unknownOperation(_ operation: String) -> ServiceError {
        ServiceError(status: ServiceStatus.notFound, code: "unknown-operation", message: "no operation '\(operation)'")
    }

    public static func invalidContent(_ message: String) -> ServiceError {
        ServiceError(status: ServiceStatus.unprocessable, code: "invalid-content", message: message)
    }
}

/// One socket slot's `WorkerLiveness`, shared by the slot's exchange loop and its heartbeat ticker.
final class SharedLiveness: Sendable {
    private let value: Mutex<WorkerLiveness>
    init(_ value: WorkerLiveness) { self.value = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout WorkerLiveness) -> R) -> R { value.withLock { body(&$0) } }
}

/// A send of one socket slot that went wrong after its caller moved on (a FINAL is posted, not
/// awaited): the slot's exchange loop finds it and ends the socket as an awaited send would have.
final class LostSend: Sendable {
    private let error = Mutex<(any Error)?>(nil)
    func record(_ error: any Error) { self.error.withLock { $0 = $0 ?? error } }
    func take() -> (any Error)? { error.withLock { $0.take() } }
}

/// Sends PARTIAL replies for the request in hand (MDP/0.2 streaming).
public struct PartialReplies: Sendable {
    let send: @Sendable (Data) async throws -> Void

    /// Sends one partial result; the handler's return value is the final one.
    public func send(_ content: Data) async throws { try await send(content) }
}

/// Serves one service through the broker's Majordomo endpoint (MDP/0.2).
///
/// `concurrency` worker sockets run side by side, each with one request at a time, so a
/// service process handles that many requests at once. Each socket heartbeats both ways,
/// and reconnects on a new socket after DISCONNECT or when the broker falls silent, backing off
/// exponentially up to `reconnectMax`. `stop()` drains: requests in hand are finished and
/// answered, then each socket says DISCONNECT and closes.
public final class ServiceWorker: Sendable {
    public typealias Handler = @Sendable (ServiceRequest, PartialReplies) async throws -> Data

    public struct Settings: Sendable {
        public var heartbeat: Duration = .milliseconds(2500)
        public var liveness = 3
        public var reconnectInitial: Duration = .milliseconds(100)
        public var reconnectMax: Duration = .seconds(5)
        /// Worker sockets (requests handled at once).
        public var concurrency = 1
        /// Set on every socket before it connects: CURVE client keys for a secure broker.
        public var socketOptions: [SocketOption] = []
        /// Runs each slot's task, the handler included, on the I/O thread (`IOThread` as its
        /// executor) instead of the global pool: a request then reaches the handler and its
        /// FINAL reaches the socket with no thread woken between. Only for handlers that never
        /// block (answers from memory, awaited HTTP): one that writes a file synchronously or
        /// computes for long holds up every socket of the thread meanwhile.
        public var runsOnIOThread = false

        public init() {}
    }

    /// What the worker has done, for tests and status output.
    public struct Statistics: Sendable, Hashable {
        public var handled = 0
        public var failed = 0
        /// Sessions opened (the first connection of each socket, and every reconnect).
        public var connections = 0
        public var disconnectsReceived = 0
        /// Times the broker fell silent for the liveness limit (each is followed by a reconnect).
        public var brokerSilences = 0
        /// HEARTBEATs received from the broker.
        public var brokerHeartbeats = 0
    }

    /// What a worker socket went through, as it happens: for tests and logs to wait on rather
    /// than poll `statistics`.
    public enum Notice: Sendable, Hashable {
        /// The socket in `slot` connected and said READY (first time, or again).
        case connected(slot: Int)
        case brokerHeartbeat(slot: Int)
        /// The broker fell silent for the liveness limit; the slot reconnects.
        case brokerSilent(slot: Int)
        /// The broker said DISCONNECT; the slot reconnects at once.
        case disconnected(slot: Int)
    }

    public let service: String
    /// The newest notices are kept when nobody reads them; the stream finishes when `run()`
    /// returns.
    public let notices: AsyncStream<Notice>
    private let noticeInput: AsyncStream<Notice>.Continuation
    private let io: IOThread
    /// The broker, or brokers to move between when one falls silent (`BrokerRotation`).
    private let brokers: BrokerRotation
    private let settings: Settings
    private let logger: Logger
    private let handler: Handler
    private let state = Mutex(State())

    private struct State {
        var stopping = false
        var statistics = Statistics()
    }

    public init(
        service: String, io: IOThread, endpoint: String, settings: Settings = Settings(), logger: Logger,
        handler: @escaping Handler
    ) {
        self.service = service
        self.io = io
        self.brokers = BrokerRotation(endpoint)
        self.settings = settings
        self.logger = logger
        self.handler = handler
        (notices, noticeInput) = AsyncStream.makeStream(of: Notice.self, bufferingPolicy: .bufferingNewest(64))
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Asks every socket to finish the request in hand, say DISCONNECT and stop; `run()` returns then.
    public func stop() {
        state.withLock { $0.stopping = true }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    /// Serves until `stop()` or cancellation (cancellation also drains the request in hand).
    public func run() async throws {
        defer { noticeInput.finish() }
        try await withTaskCancellationHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for slot in 0..<max(1, settings.concurrency) {
                    group.addTask(executorPreference: settings.runsOnIOThread ? io : nil) { try await self.session(slot: slot) }
                }
                try await group.waitForAll()
            }
        } onCancel: {
            stop()
        }
    }

    /// One worker socket's life: connect, READY, serve, reconnect when `WorkerLiveness` says.
    private func session(slot: Int) async throws {
        let liveness = SharedLiveness(
            WorkerLiveness(
                settings: .init(
                    heartbeat: settings.heartbeat, liveness: settings.liveness, reconnectInitial: settings.reconnectInitial,
                    reconnectMax: settings.reconnectMax),
                now: .now))
        while !stopping {
            // A short linger lets the last DISCONNECT out before the socket closes. A send no
            // connection takes within the silence limit ends the socket: libzmq never reconnects a
            // connection whose handshake the broker refused (a key revoked, then allowed again),
            // and only a fresh socket gets in.
            let endpoint = brokers.current
            let socket = try await io.open(
                .dealer, linger: 200, inboxCapacity: 64, sendTimeout: settings.heartbeat * settings.liveness
            ) { [options = settings.socketOptions] socket in
                try socket.set([.maxMessageSize(1 << 20)] + options)
                try socket.connect(endpoint)
            }
            state.withLock { $0.statistics.connections += 1 }
            let ending: WorkerLiveness.Ending?
            do {
                ending = try await serve(socket, slot: slot, liveness: liveness)
            } catch let error as ZMQError where error.isWouldBlock {
                logger.warning(
                    "no connection to the broker took a message; reconnecting on a fresh socket",
                    metadata: ["service": "\(service)", "slot": "\(slot)"])
                noticeInput.yield(.brokerSilent(slot: slot))
                ending = .brokerSilent
            } catch {
                await socket.close()
                throw error
            }
            await socket.close()
            guard let ending else { return }
            let wait = liveness.withLock { $0.ended(ending) }
            if ending == .brokerSilent {
                // With several brokers, the next socket tries the next one.
                let next = brokers.failed(endpoint)
                logger.warning(
                    "broker silent; reconnecting",
                    metadata: ["service": "\(service)", "slot": "\(slot)", "after": "\(wait)", "endpoint": "\(next)"])
            }
            if wait > .zero { try? await Task.sleep(for: wait) }
        }
    }

    /// Serves one socket; returns how it ended, or nil when the worker stopped.
    private func serve(_ socket: AsyncSocket, slot: Int, liveness: SharedLiveness) async throws -> WorkerLiveness.Ending? {
        try await socket.send(Majordomo.worker(.v02, .ready, service: service))
        liveness.withLock { $0.connected(now: .now) }
        noticeInput.yield(.connected(slot: slot))
        // One ticker per socket sends HEARTBEAT whenever nothing else went out for an interval,
        // also while a handler is busy, so a long request does not make the broker think this
        // worker died.
        return try await withThrowingTaskGroup(of: Void.self) { ticker in
            ticker.addTask {
                while !Task.isCancelled {
                    let due = liveness.withLock { $0.nextHeartbeat }
                    do { try await Task.sleep(until: due, clock: .continuous) } catch { return }
                    guard liveness.withLock({ $0.heartbeatDue(now: .now) }) else { continue }
                    _ = try? await socket.send(Majordomo.worker(.v02, .heartbeat), timeout: self.settings.heartbeat)
                    liveness.withLock { $0.sent(now: .now) }
                }
            }
            defer { ticker.cancelAll() }
            return try await exchange(socket, slot: slot, liveness: liveness, lost: LostSend())
        }
    }

    /// Answers the broker on `socket` until the worker stops (nil), or the broker disconnects or
    /// falls silent.
    private func exchange(
        _ socket: AsyncSocket, slot: Int, liveness: SharedLiveness, lost: LostSend
    ) async throws -> WorkerLiveness.Ending? {
        while true {
            if let error = lost.take() { throw error }
            if stopping {
                _ = try? await socket.send(Majordomo.worker(.v02, .disconnect), timeout: settings.heartbeat)
                return nil
            }
            let now = ContinuousClock.now
            let silence = liveness.withLock { $0.silenceDeadline }
            if now >= silence {
                state.withLock { $0.statistics.brokerSilences += 1 }
                noticeInput.yield(.brokerSilent(slot: slot))
                // If the broker is alive after all, this lets it hand our request (if any) over
                // at once instead of waiting for our heartbeats to stop.
                _ = try? await socket.send(Majordomo.worker(.v02, .disconnect), timeout: settings.heartbeat)
                return .brokerSilent
            }
            // `stop()` only sets a flag: it is looked at four times a second.
            guard let message = try await socket.receive(timeout: min(now.duration(to: silence), .milliseconds(250))) else { continue }
            let parsed: Majordomo.WorkerMessage
            do {
                guard case .worker(let worker) = try Majordomo.parse(message.frames[...]), worker.version == .v02 else {
                    liveness.withLock { $0.heard(heartbeat: false, now: .now) }
                    logger.warning("not an MDP/0.2 worker message from the broker; ignored", metadata: ["service": "\(service)"])
                    continue
                }
                parsed = worker
            } catch {
                liveness.withLock { $0.heard(heartbeat: false, now: .now) }
                logger.warning("malformed message from the broker; ignored", metadata: ["error": "\(error)"])
                continue
            }
            liveness.withLock { $0.heard(heartbeat: parsed.command == .heartbeat, now: .now) }
            switch parsed.command {
            case .heartbeat:
                state.withLock { $0.statistics.brokerHeartbeats += 1 }
                noticeInput.yield(.brokerHeartbeat(slot: slot))
            case .disconnect:
                state.withLock { $0.statistics.disconnectsReceived += 1 }
                noticeInput.yield(.disconnected(slot: slot))
                return .disconnected
            case .request:
                guard let client = parsed.client else { continue }
                try await handle(client: client, body: parsed.body, on: socket, liveness: liveness, lost: lost)
                liveness.withLock { $0.requestAnswered(now: .now) }
            case .ready, .partial, .final:
                logger.warning("unexpected \(parsed.command) from the broker; ignored", metadata: ["service": "\(service)"])
            }
        }
    }

    /// Runs the handler (the socket's ticker keeps heartbeating meanwhile), then sends FINAL.
    ///
    /// The FINAL is posted, not awaited: the slot waits for the broker's next message anyway,
    /// so the send costs the task no wake-up of its own. One that fails, or that no connection
    /// takes within the socket's send time, is recorded in `lost`, and the exchange loop (which
    /// looks at least four times a second) ends the socket just as an awaited send would.
    private func handle(client: Data, body: [Data], on socket: AsyncSocket, liveness: SharedLiveness, lost: LostSend) async throws {
        let received = ContinuousClock.now
        let final: [Data]
        switch Result(catching: { () throws(ProtocolError) in try ServiceBody.request(body) }) {
        case .failure(let error):
            let (requestID, parent) = ServiceBody.peekRequest(body)
            final = ServiceBody.replyBody(
                ReplyHeader(
                    requestID: requestID, status: ServiceStatus.badRequest,
                    error: ServiceFailure(code: "bad-request", message: error.description)),
                parent: parent)
            state.withLock { $0.statistics.failed += 1 }
        case .success(let (header, envelope)):
            let request = ServiceRequest(
                header: header, content: envelope.content, metadata: envelope.metadata,
                deadline: received + .milliseconds(header.timeoutMilliseconds))
            let partials = PartialReplies { content in
                let reply = ServiceBody.replyBody(ReplyHeader(requestID: header.requestID), content: content, parent: envelope.header)
                try await socket.send(Majordomo.worker(.v02, .partial, client: client, body: reply))
                liveness.withLock { $0.sent(now: .now) }
            }
            final = await answer(request, envelope: envelope, partials: partials)
        }
        let sendTimeout = socket.sendTimeout
        socket.post(Majordomo.worker(.v02, .final, client: client, body: final), deadline: sendTimeout.map { .now + $0 }) { result in
            switch result {
            case .success(true): break
            case .success(false):
                lost.record(
                    ZMQError(
                        errno: EAGAIN, message: "no peer took the message within \(sendTimeout ?? .zero) (no live connection)",
                        operation: "send"))
            case .failure(let error): lost.record(error)
            }
        }
        liveness.withLock { $0.sent(now: .now) }
    }

    private func answer(_ request: ServiceRequest, envelope: Envelope, partials: PartialReplies) async -> [Data] {
        let header = request.header
        func failure(_ status: Int, _ failure: ServiceFailure) -> [Data] {
            state.withLock { $0.statistics.failed += 1 }
            return ServiceBody.replyBody(
                ReplyHeader(requestID: header.requestID, status: status, error: failure), parent: envelope.header)
        }
        if ContinuousClock.now >= request.deadline {
            return failure(
                ServiceStatus.gatewayTimeout,
                ServiceFailure(
                    code: "deadline-exceeded", message: "the request's \(header.timeoutMilliseconds) ms ran out", retryable: true))
        }
        do {
            let content = try await handler(request, partials)
            state.withLock { $0.statistics.handled += 1 }
            return ServiceBody.replyBody(ReplyHeader(requestID: header.requestID), content: content, parent: envelope.header)
        } catch let error as ServiceError {
            return failure(error.status, error.failure)
        } catch {
            logger.error(
                "handler failed", metadata: ["service": "\(service)", "operation": "\(header.operation)", "error": "\(error)"])
            return failure(
                ServiceStatus.internalError,
                ServiceFailure(code: "internal", message: "the \(service) service failed on '\(header.operation)'; see its log"))
        }
    }
}
