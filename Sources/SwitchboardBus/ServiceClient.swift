public import Foundation
public import Logging
public import SwitchboardProtocol
import SwitchboardRuntime
import Synchronization
public import ZeroMQ

/// One reply from a service: a PARTIAL (`final == false`) or the FINAL.
public struct ServiceReply: Sendable, Hashable {
    public var header: ReplyHeader
    /// The result, raw JSON.
    public var content: Data
    public var final: Bool

    public var status: Int { header.status }
}

/// Why a request did not get a successful answer.
public enum ServiceClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No final reply within the request's time (after every retry, for idempotent requests).
    case timeout(service: String, operation: String, after: Duration)
    /// No worker serves the service (the broker's 503 `no-worker`, or MMI's 404).
    case noSuchService(String)
    /// The service answered with an error status.
    case serviceError(status: Int, ServiceFailure)
    /// What came back does not follow the protocol (section 12); the text says how.
    case protocolViolation(String)
    /// No connection to the broker took the request in all its time: the broker is down or
    /// unreachable, or it refused this client's key (CURVE).
    case unreachable(endpoint: String, after: Duration)
    /// The client was closed, or its I/O thread stopped.
    case closed

    public var description: String {
        switch self {
        case .timeout(let service, let operation, let after):
            "no reply from service '\(service)' to '\(operation)' within \(after)"
        case .noSuchService(let service): "no worker serves '\(service)'"
        case .serviceError(let status, let failure): "service error \(status) \(failure)"
        case .protocolViolation(let what): "protocol violation: \(what)"
        case .unreachable(let endpoint, let after):
            "no connection to the broker at \(endpoint) within \(after): it is down or unreachable, or it refused this program's key (is the certificate on the broker's allow-list?)"
        case .closed: "the service client is closed"
        }
    }
}

/// Sends requests to services through the broker's Majordomo endpoint (MDP/0.2).
///
/// Many requests share one DEALER socket and are told apart by `request_id`. A request marked
/// idempotent that gets no final reply within its attempt time is sent again, with the same
/// `request_id`, on a fresh socket (the Lazy Pirate pattern) until its whole time is used; other
/// requests time out instead. Safe to use from any task.
public final class ServiceClient: Sendable {
    public struct Settings: Sendable {
        /// The whole time a request may take, unless the call gives its own.
        public var timeout: Duration = .seconds(5)
        /// How long one attempt of an idempotent request waits before it is sent again on a
        /// fresh socket; by default a third of the request's time.
        public var attemptTimeout: Duration?
        /// Set on every socket before it connects: CURVE client keys for a secure broker.
        public var socketOptions: [SocketOption] = []

        public init() {}
    }

    private let io: IOThread
    /// The broker, or brokers to move between (`BrokerRotation`).
    private let brokers: BrokerRotation
    private let settings: Settings
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var socket: AsyncSocket?
        var opening = false
        var openWaiters: [CheckedContinuation<AsyncSocket, any Error>] = []
        var routes: [String: Route] = [:]
        var reader: Task<Void, Never>?
        var closed = false
        /// The broker the shared socket connected to.
        var socketEndpoint = ""
    }

    /// Where the replies of one request go.
    private final class Route: Sendable {
        let service: String
        let continuation: AsyncThrowingStream<ServiceReply, any Error>.Continuation
        let progress = Mutex(Progress())

        struct Progress {
            var partials = 0
            var finished = false
            var waiter: CheckedContinuation<Bool, Never>?
        }

        init(service: String, continuation: AsyncThrowingStream<ServiceReply, any Error>.Continuation) {
            self.service = service
            self.continuation = continuation
        }

        /// Delivers one reply; returns true if it was the final one.
        @discardableResult
        func deliver(_ reply: ServiceReply) -> Bool {
            let accepted = progress.withLock { progress -> Bool in
                guard !progress.finished else { return false }
                if reply.final { progress.finished = true } else { progress.partials += 1 }
                return true
            }
            guard accepted else { return false }
            if !reply.final {
                continuation.yield(reply)
                return false
            }
            if (200...299).contains(reply.status) {
                continuation.yield(reply)
                continuation.finish()
            } else if reply.status == ServiceStatus.unavailable && reply.header.error?.code == "no-worker" {
                continuation.finish(throwing: ServiceClientError.noSuchService(service))
            } else {
                let failure = reply.header.error ?? ServiceFailure(code: "unknown", message: "status \(reply.status)")
                continuation.finish(throwing: ServiceClientError.serviceError(status: reply.status, failure))
            }
            wake(true)
            return true
        }

        func fail(_ error: ServiceClientError) {
            let first = progress.withLock { progress -> Bool in
                defer { progress.finished = true }
                return !progress.finished
            }
            guard first else { return }
            continuation.finish(throwing: error)
            wake(true)
        }

        private func wake(_ value: Bool) {
            let waiter = progress.withLock { progress -> CheckedContinuation<Bool, Never>? in
                defer { progress.waiter = nil }
                return progress.waiter
            }
            waiter?.resume(returning: value)
        }

        var partialsSeen: Bool { progress.withLock { $0.partials > 0 } }

        /// Waits until the final reply has come (true) or `deadline` passes (false). The time-out
        /// is a dispatch timer, not a task: requests are many and short.
        func waitFinished(until deadline: ContinuousClock.Instant) async -> Bool {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let resumeNow = progress.withLock { progress -> Bool? in
                        if progress.finished { return true }
                        if Task.isCancelled { return false }
                        progress.waiter = continuation
                        return nil
                    }
                    if let resumeNow {
                        continuation.resume(returning: resumeNow)
                        return
                    }
                    let remaining = max(0, (deadline - .now).wholeMilliseconds)
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(remaining))) { [self] in
                        wake(progress.withLock { $0.finished })
                    }
                }
            } onCancel: {
                wake(false)
            }
        }
    }

    public init(io: IOThread, endpoint: String, settings: Settings = Settings(), logger: Logger) {
        self.io = io
        self.brokers = BrokerRotation(endpoint)
        self.settings = settings
        self.logger = logger
    }

    // MARK: Requests

    /// Sends a request and returns the final reply (partial replies are skipped).
    /// - Throws: `ServiceClientError`.
    public func request(
        service: String, operation: String, content: Data = Data("{}".utf8), timeout: Duration? = nil, idempotent: Bool = false
    ) async throws(ServiceClientError) -> ServiceReply {
        // The caller's task does the work (no task of its own, unlike `stream`); the replies
        // wait in the stream's buffer until it is read below.
        let (replies, continuation) = AsyncThrowingStream<ServiceReply, any Error>.makeStream()
        let route = Route(service: service, continuation: continuation)
        await perform(
            route: route, service: service, operation: operation, content: content, timeout: timeout ?? settings.timeout,
            idempotent: idempotent)
        do {
            var last: ServiceReply?
            for try await reply in replies where reply.final { last = reply }
            guard let last else { throw ServiceClientError.protocolViolation("the reply stream ended without a final reply") }
            return last
        } catch let error as ServiceClientError {
            throw error
        } catch {
            throw .protocolViolation("\(error)")
        }
    }

    /// Sends a request and yields each PARTIAL reply, then the FINAL one; a final error ends
    /// the sequence with a `ServiceClientError`. Ending the iteration early abandons the request.
    public func stream(
        service: String, operation: String, content: Data = Data("{}".utf8), timeout: Duration? = nil, idempotent: Bool = false
    ) -> AsyncThrowingStream<ServiceReply, any Error> {
        let (stream, continuation) = AsyncThrowingStream<ServiceReply, any Error>.makeStream()
        let route = Route(service: service, continuation: continuation)
        let total = timeout ?? settings.timeout
        // Unstructured because the stream is handed back before anything is sent: the request
        // runs while the caller iterates, in no scope of the caller's, and ends with the stream
        // (finished, failed, or abandoned: `onTermination` cancels it).
        let task = Task {
            await self.perform(
                route: route, service: service, operation: operation, content: content, timeout: total, idempotent: idempotent)
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func perform(
        route: Route, service: String, operation: String, content: Data, timeout: Duration, idempotent: Bool
    ) async {
        let header = RequestHeader(
            operation: operation, timeoutMilliseconds: max(1, timeout.wholeMilliseconds), idempotent: idempotent ? true : nil)
        do {
            try header.validate()
        } catch {
            route.fail(.protocolViolation("the request itself is invalid: \(error)"))
            return
        }
        let body: [Data]
        do {
            body = try ServiceBody.requestBody(header, content: content)
        } catch {
            route.fail(.protocolViolation("the request could not be encoded: \(error)"))
            return
        }
        let frames = Majordomo.clientRequest(.v02, service: service, body: body)
        let id = header.requestID
        var pirate = LazyPirate(timeout: timeout, attemptTimeout: settings.attemptTimeout, idempotent: idempotent, now: .now)
        defer { _ = state.withLock { $0.routes.removeValue(forKey: id) } }
        while true {
            do {
                switch pirate.next(now: .now) {
                case .sendOnSharedSocket(let until):
                    let socket = try await sharedSocket()
                    state.withLock { $0.routes[id] = route }
                    // A third of the attempt for the send: a shared socket with no pipe left takes
                    // nothing ever, and the rest of the time goes to a fresh socket.
                    let sendLimit = max(ContinuousClock.now.duration(to: until) / 3, .milliseconds(200))
                    guard try await socket.send(frames, timeout: sendLimit) else {
                        // No connection took it: this socket's connection is gone for good (a
                        // refused key) or not up yet. This request and the next open fresh ones.
                        await retire(socket)
                        continue
                    }
                    pirate.sent()
                    if await route.waitFinished(until: until) {
                        pirate.finished()
                    } else if brokers.rotates && !route.partialsSeen {
                        // Not a word in a whole attempt, with several brokers: the shared socket
                        // may point at a standby (it takes sends, and never answers). The next
                        // attempt, and the next shared socket, go to the next broker.
                        await retire(socket)
                    }
                    _ = state.withLock { $0.routes.removeValue(forKey: id) }
                case .sendOnFreshSocket(let until):
                    logger.debug("sending again on a fresh socket", metadata: ["service": "\(service)", "request_id": "\(id)"])
                    try await withFreshSocket { socket, endpoint in
                        guard try await socket.send(frames, timeout: ContinuousClock.now.duration(to: until)) else {
                            brokers.failed(endpoint)
                            return
                        }
                        pirate.sent()
                        while ContinuousClock.now < until {
                            guard let message = try await socket.receive(timeout: ContinuousClock.now.duration(to: until)) else {
                                // Not a word from this broker in a whole attempt: with several, the
                                // next attempt asks the next (a standby does not listen).
                                brokers.failed(endpoint)
                                break
                            }
                            if routeReply(message.frames, expecting: id, lookup: { $0 == id ? route : nil }) == true { break }
                            if route.progress.withLock({ $0.finished }) { break }
                        }
                    }
                    if route.partialsSeen { pirate.partial() }
                    if route.progress.withLock({ $0.finished }) { pirate.finished() }
                case .finished:
                    return
                case .timedOut:
                    route.fail(.timeout(service: service, operation: operation, after: timeout))
                    return
                case .unreachable:
                    route.fail(.unreachable(endpoint: brokers.description, after: timeout))
                    return
                }
            } catch {
                route.fail(Self.clientError(error))
                return
            }
            if Task.isCancelled {
                route.fail(.closed)
                return
            }
            if route.partialsSeen { pirate.partial() }
        }
    }

    /// Stops using `socket` as the shared socket (if it still is): a request that no connection
    /// took on it means it has none, and libzmq never reconnects one whose handshake the broker
    /// refused. Requests still waiting on it run out their attempt and go on as their rules say.
    /// With several brokers, the next socket connects to the next one.
    private func retire(_ socket: AsyncSocket) async {
        let retired = state.withLock { state -> (reader: Task<Void, Never>?, endpoint: String)? in
            guard state.socket == socket else { return nil }
            state.socket = nil
            defer { state.reader = nil }
            return (state.reader, state.socketEndpoint)
        }
        guard let retired else { return }
        let next = brokers.failed(retired.endpoint)
        logger.debug(
            "no connection to the broker took a request; the next opens a fresh socket",
            metadata: ["endpoint": "\(retired.endpoint)", "next": "\(next)"])
        retired.reader?.cancel()
        await socket.close()
    }

    static func clientError(_ error: any Error) -> ServiceClientError {
        if let error = error as? ServiceClientError { return error }
        if error is CancellationError { return .closed }
        return .closed
    }

    /// Runs `body` on a socket of its own, connected to the current broker (given to `body`),
    /// closed before this returns, whichever way `body` ends.
    private func withFreshSocket<T>(_ body: (AsyncSocket, String) async throws -> T) async throws -> T {
        let endpoint = brokers.current
        let socket = try await io.open(.dealer, linger: 0) { [options = settings.socketOptions] in
            // No ZMQ_IMMEDIATE (protocol section 1): a socket whose connection the broker refused
            // has no pipe left, so a send there is still not taken.
            try $0.set(options)
            try $0.connect(endpoint)
        }
        do {
            let result = try await body(socket, endpoint)
            await socket.close()
            return result
        } catch {
            await socket.close()
            throw error
        }
    }

    // MARK: The shared socket and its reader

    private func sharedSocket() async throws -> AsyncSocket {
        enum Next { case ready(AsyncSocket), open, wait, closed }
        let next = state.withLock { state -> Next in
            if state.closed { return .closed }
            if let socket = state.socket { return .ready(socket) }
            if state.opening { return .wait }
            state.opening = true
            return .open
        }
        switch next {
        case .ready(let socket):
            return socket
        case .closed:
            throw ServiceClientError.closed
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<AsyncSocket, any Error>? in
                    if let socket = state.socket { return .success(socket) }
                    if state.closed { return .failure(ServiceClientError.closed) }
                    state.openWaiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        case .open:
            let result: Result<AsyncSocket, any Error>
            let endpoint = brokers.current
            do {
                let socket = try await io.open(.dealer, linger: 0, inboxCapacity: 4096) {
                    [options = settings.socketOptions] socket in
                    try socket.set([.maxMessageSize(1 << 20)] + options)
                    try socket.connect(endpoint)
                }
                result = .success(socket)
            } catch {
                result = .failure(error)
            }
            let waiters = state.withLock { state -> [CheckedContinuation<AsyncSocket, any Error>] in
                state.opening = false
                if case .success(let socket) = result {
                    state.socket = socket
                    state.socketEndpoint = endpoint
                    // Unstructured because the shared socket outlives any one request: its reader
                    // routes replies to every caller, belongs to the client, and is cancelled by
                    // `close()`.
                    state.reader = Task { await self.read(socket) }
                }
                defer { state.openWaiters = [] }
                return state.openWaiters
            }
            for waiter in waiters { waiter.resume(with: result) }
            return try result.get()
        }
    }

    private func read(_ socket: AsyncSocket) async {
        while !Task.isCancelled {
            let message: Message
            do {
                message = try await socket.receive()
            } catch {
                break
            }
            _ = routeReply(message.frames, expecting: nil) { id in self.state.withLock { $0.routes[id] } }
        }
        // The socket is gone: every request waiting on it fails now rather than at its time-out,
        // unless it was retired (then they run out their attempt and go on by their rules).
        let waiting = state.withLock { state -> [Route] in
            guard state.socket == socket else { return [] }
            state.socket = nil
            defer { state.routes = [:] }
            return Array(state.routes.values)
        }
        for route in waiting { route.fail(.closed) }
    }

    /// Hands one message from the broker to the request it answers (found by `lookup` from
    /// its `request_id`). Returns whether it finished that request; nil if it was for none.
    /// `expecting` is the request a dedicated retry socket carries: a broker reply without
    /// `request_id` (its answer to a body it could not read) goes to it.
    private func routeReply(_ frames: [Data], expecting id: String?, lookup: (String) -> Route?) -> Bool? {
        let message: Majordomo.ClientMessage
        do {
            guard case .client(let client) = try Majordomo.parse(frames[...]), client.version == .v02, client.command != .request
            else {
                logger.warning("unexpected message on a client socket; dropped")
                return nil
            }
            message = client
        } catch {
            logger.warning("malformed reply from the broker; dropped", metadata: ["error": "\(error)"])
            return nil
        }
        let header: ReplyHeader
        let envelope: Envelope
        do {
            (header, envelope) = try ServiceBody.reply(message.body)
        } catch {
            // Unreadable: if the request id can be found, that request fails; else it is dropped.
            if let requestID = try? Envelope.decode(message.body).decodeHeader(ReplyHeader.self).requestID,
                let route = lookup(requestID)
            {
                route.fail(.protocolViolation("reply from '\(message.service)' is not a valid REPLY: \(error.message)"))
                return true
            }
            logger.warning("unreadable reply dropped", metadata: ["service": "\(message.service)", "error": "\(error)"])
            return nil
        }
        guard let requestID = header.requestID, let route = lookup(requestID) else {
            if header.requestID == nil, let id, let route = lookup(id) {
                // The broker could not read our request (it has no id to give back).
                return route.deliver(ServiceReply(header: header, content: envelope.content, final: message.command == .final))
            }
            return nil  // a late answer to a request that has already ended
        }
        return route.deliver(ServiceReply(header: header, content: envelope.content, final: message.command == .final))
    }

    // MARK: MMI

    /// Asks the broker an MMI question (`mmi.service`, `mmi.workers`) on a socket of its own.
    public func mmi(_ service: String, body: [Data] = [], timeout: Duration? = nil) async throws(ServiceClientError) -> [Data] {
        let wait = timeout ?? settings.timeout
        let deadline = ContinuousClock.now + wait
        // With several brokers, each gets its share of the time, the current one first: the
        // answer comes from the one that took the question.
        for tried in 1...brokers.endpoints.count {
            let share = ContinuousClock.now.duration(to: deadline) / (brokers.endpoints.count - tried + 1)
            do {
                let answer = try await withFreshSocket { socket, endpoint -> [Data]? in
                    guard try await socket.send(Majordomo.clientRequest(.v02, service: service, body: body), timeout: share) else {
                        brokers.failed(endpoint)
                        return nil
                    }
                    // The broker answers MMI itself, at once: silence means it is not there.
                    guard
                        let answer = try await socket.receive(
                            timeout: ContinuousClock.now.duration(to: deadline) / (brokers.endpoints.count - tried + 1))
                    else {
                        brokers.failed(endpoint)
                        return nil
                    }
                    guard case .client(let message) = try Majordomo.parse(answer.frames[...]), message.service == service else {
                        throw ServiceClientError.protocolViolation("the answer to \(service) is not an MDP/0.2 client reply for it")
                    }
                    return message.body
                }
                if let answer { return answer }
            } catch let error as ServiceClientError {
                throw error
            } catch let error as Majordomo.Malformed {
                throw .protocolViolation("the answer to \(service) is malformed: \(error)")
            } catch {
                throw Self.clientError(error)
            }
        }
        throw .timeout(service: service, operation: "mmi", after: wait)
    }

    /// `mmi.service`: whether the service has a live worker.
    public func isAlive(_ service: String, timeout: Duration? = nil) async throws(ServiceClientError) -> Bool {
        let body = try await mmi("mmi.service", body: [Data(service.utf8)], timeout: timeout)
        switch body.first.map({ String(decoding: $0, as: UTF8.self) }) {
        case "200": return true
        case "404": return false
        case let other: throw .protocolViolation("mmi.service answered '\(other ?? "")', not 200 or 404")
        }
    }

    /// `mmi.workers`: every service with its workers and queue.
    public func directory(timeout: Duration? = nil) async throws(ServiceClientError) -> ServiceDirectory {
        let body = try await mmi("mmi.workers", timeout: timeout)
        guard body.count == 2, body[0] == Data("200".utf8) else {
            throw .protocolViolation("mmi.workers answered \(body.count) frames, not [\"200\"][json]")
        }
        do {
            return try JSONDecoder().decode(ServiceDirectory.self, from: body[1])
        } catch {
            throw .protocolViolation("mmi.workers JSON does not decode: \(error)")
        }
    }

    /// Fails every waiting request with `.closed` and closes the shared socket.
    public func close() async {
        let (socket, reader, routes, waiters) = state.withLock { state in
            state.closed = true
            defer {
                state.socket = nil
                state.routes = [:]
                state.openWaiters = []
            }
            return (state.socket, state.reader, Array(state.routes.values), state.openWaiters)
        }
        for route in routes { route.fail(.closed) }
        for waiter in waiters { waiter.resume(throwing: ServiceClientError.closed) }
        reader?.cancel()
        await socket?.close()
    }
}

/// The answer of `mmi.workers` (protocol/README.md, 12.4).
public struct ServiceDirectory: Codable, Sendable, Hashable {
    public struct Service: Codable, Sendable, Hashable {
        public var name: String
        public var workers: Int
        public var idle: Int
        public var busy: Int
        public var queued: Int
        public var oldestQueuedMilliseconds: Int
        public var protocols: [String]

        enum CodingKeys: String, CodingKey {
            case name, workers, idle, busy, queued, oldestQueuedMilliseconds = "oldest_queued_ms", protocols
        }
    }

    public var services: [Service]
    public var workers: Int
    public var heartbeatMilliseconds: Int
    public var liveness: Int
    /// Whether the broker's endpoints run CURVE (absent from brokers before section 13).
    public var curve: Bool?

    enum CodingKeys: String, CodingKey {
        case services, workers, heartbeatMilliseconds = "heartbeat_ms", liveness, curve
    }
}
