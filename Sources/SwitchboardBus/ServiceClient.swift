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
        var closed = false
        /// The broker the shared socket connected to.
        var socketEndpoint = ""
        /// Counts the shared sockets opened, so the reader of a socket that is no longer the
        /// shared one (retired, replaced) knows it.
        var generation = 0
    }

    /// Where the replies of one request go, and what its task waits for.
    ///
    /// `request` has no stream: the final reply is kept in `outcome` for its caller, so a round
    /// trip wakes the caller's task once (from the socket's reader, on the I/O thread). `stream`
    /// yields every reply to its stream as well.
    private final class Route: Sendable {
        let service: String
        let continuation: AsyncThrowingStream<ServiceReply, any Error>.Continuation?
        let progress = Mutex(Progress())

        /// What became of the message of the attempt in hand.
        enum Send { case pending, taken, notTaken, failed(ServiceClientError) }

        /// How one attempt ended.
        enum AttemptEnd { case finished, timedOut, notTaken, failed(ServiceClientError), cancelled }

        struct Progress {
            var partials = 0
            var finished = false
            var outcome: Result<ServiceReply, ServiceClientError>?
            var send = Send.taken
            /// The attempt's time is up (it ends as soon as its message has been taken or not).
            var attemptOver = false
            var cancelled = false
            var waiter: CheckedContinuation<Void, Never>?
            /// The attempt's time-out on the I/O thread, cancelled when the attempt ends first.
            var timer: IOThread.TimerID?
            /// The attempt's message, withdrawn if the task is cancelled before a peer took it.
            var posted: AsyncSocket.PostedSend?

            /// Whether the attempt in hand has ended; then its waiter, if any, is to be resumed.
            var attemptEnded: Bool {
                if finished || cancelled { return true }
                switch send {
                case .notTaken, .failed: return true
                case .pending: return false
                case .taken: return attemptOver
                }
            }

            mutating func takeWaiterIfEnded() -> CheckedContinuation<Void, Never>? {
                guard attemptEnded else { return nil }
                defer { waiter = nil }
                return waiter
            }
        }

        init(service: String, continuation: AsyncThrowingStream<ServiceReply, any Error>.Continuation?) {
            self.service = service
            self.continuation = continuation
        }

        /// Delivers one reply; returns true if it was the final one.
        @discardableResult
        func deliver(_ reply: ServiceReply) -> Bool {
            let outcome: Result<ServiceReply, ServiceClientError>
            if !reply.final || (200...299).contains(reply.status) {
                outcome = .success(reply)
            } else if reply.status == ServiceStatus.unavailable && reply.header.error?.code == "no-worker" {
                outcome = .failure(.noSuchService(service))
            } else {
                let failure = reply.header.error ?? ServiceFailure(code: "unknown", message: "status \(reply.status)")
                outcome = .failure(.serviceError(status: reply.status, failure))
            }
            let (accepted, waiter) = progress.withLock { progress -> (Bool, CheckedContinuation<Void, Never>?) in
                guard !progress.finished else { return (false, nil) }
                guard reply.final else {
                    progress.partials += 1
                    return (true, nil)
                }
                progress.finished = true
                progress.outcome = outcome
                return (true, progress.takeWaiterIfEnded())
            }
            guard accepted else { return false }
            if let continuation {
                switch outcome {
                case .success(let reply):
                    continuation.yield(reply)
                    if reply.final { continuation.finish() }
                case .failure(let error):
                    continuation.finish(throwing: error)
                }
            }
            waiter?.resume()
            return reply.final
        }

        func fail(_ error: ServiceClientError) {
            let (first, waiter) = progress.withLock { progress -> (Bool, CheckedContinuation<Void, Never>?) in
                guard !progress.finished else { return (false, nil) }
                progress.finished = true
                progress.outcome = .failure(error)
                return (true, progress.takeWaiterIfEnded())
            }
            guard first else { return }
            continuation?.finish(throwing: error)
            waiter?.resume()
        }

        var partialsSeen: Bool { progress.withLock { $0.partials > 0 } }
        var isFinished: Bool { progress.withLock { $0.finished } }

        /// Sends `frames` on the shared socket and waits, in one suspension, until the final
        /// reply has come, no connection took the message by `sendDeadline`, or `until` has
        /// passed with the message taken. The send and the time-out report on the I/O thread
        /// (a timer there, not a task or a dispatch timer per request), and the reply comes
        /// from the socket's reader there too: the caller's task wakes once.
        func attempt(
            on socket: AsyncSocket, io: IOThread, frames: [Data], sendDeadline: ContinuousClock.Instant,
            until: ContinuousClock.Instant
        ) async -> (end: AttemptEnd, taken: Bool) {
            progress.withLock { progress in
                progress.send = .pending
                progress.attemptOver = false
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ended = progress.withLock { progress -> Bool in
                        if Task.isCancelled { progress.cancelled = true }
                        if progress.attemptEnded { return true }
                        progress.waiter = continuation
                        return false
                    }
                    if ended {
                        continuation.resume()
                        return
                    }
                    let posted = socket.post(frames, deadline: sendDeadline) { [self] result in
                        let waiter = progress.withLock { progress -> CheckedContinuation<Void, Never>? in
                            switch result {
                            case .success(true): progress.send = .taken
                            case .success(false): progress.send = .notTaken
                            case .failure(let error): progress.send = .failed(ServiceClient.clientError(error))
                            }
                            return progress.takeWaiterIfEnded()
                        }
                        waiter?.resume()
                    }
                    let id = io.schedule(at: until) { [self] in
                        let waiter = progress.withLock { progress -> CheckedContinuation<Void, Never>? in
                            progress.attemptOver = true
                            return progress.takeWaiterIfEnded()
                        }
                        waiter?.resume()
                    }
                    progress.withLock { progress in
                        progress.timer = id
                        progress.posted = posted
                    }
                }
            } onCancel: {
                let (waiter, unsent) = progress.withLock { progress -> (CheckedContinuation<Void, Never>?, AsyncSocket.PostedSend?) in
                    progress.cancelled = true
                    if case .pending = progress.send { return (progress.takeWaiterIfEnded(), progress.posted) }
                    return (progress.takeWaiterIfEnded(), nil)
                }
                // As an awaited send was: a request cancelled before any peer took it never goes.
                if let unsent { socket.withdraw(unsent) }
                waiter?.resume()
            }
            return progress.withLock { progress in
                if let timer = progress.timer {
                    io.cancel(timer)
                    progress.timer = nil
                }
                let taken: Bool
                if case .taken = progress.send { taken = true } else { taken = false }
                if progress.finished { return (.finished, taken) }
                switch progress.send {
                case .notTaken: return (.notTaken, false)
                case .failed(let error): return (.failed(error), false)
                case .pending, .taken: return (progress.cancelled ? .cancelled : .timedOut, taken)
                }
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
        // The caller's task does the work (no task of its own, unlike `stream`), and the final
        // reply waits in the route, with no stream between.
        let route = Route(service: service, continuation: nil)
        await perform(
            route: route, service: service, operation: operation, content: content, timeout: timeout ?? settings.timeout,
            idempotent: idempotent)
        switch route.progress.withLock({ $0.outcome }) {
        case .success(let reply)?: return reply
        case .failure(let error)?: throw error
        case nil: throw .protocolViolation("the request ended without a final reply")
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
                    let now = ContinuousClock.now
                    let sendDeadline = now + max(now.duration(to: until) / 3, .milliseconds(200))
                    let (end, taken) = await route.attempt(on: socket, io: io, frames: frames, sendDeadline: sendDeadline, until: until)
                    if taken { pirate.sent() }
                    switch end {
                    case .finished:
                        pirate.finished()
                    case .notTaken:
                        // No connection took it: this socket's connection is gone for good (a
                        // refused key) or not up yet. This request and the next open fresh ones.
                        _ = state.withLock { $0.routes.removeValue(forKey: id) }
                        await retire(socket)
                        continue
                    case .failed(let error):
                        throw error
                    case .timedOut, .cancelled:
                        if brokers.rotates && !route.partialsSeen {
                            // Not a word in a whole attempt, with several brokers: the shared
                            // socket may point at a standby (it takes sends, and never answers).
                            // The next attempt, and the next shared socket, go to the next broker.
                            await retire(socket)
                        }
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
                            if route.isFinished { break }
                        }
                    }
                    if route.partialsSeen { pirate.partial() }
                    if route.isFinished { pirate.finished() }
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
        let retired = state.withLock { state -> String? in
            guard state.socket == socket else { return nil }
            state.socket = nil
            return state.socketEndpoint
        }
        guard let retired else { return }
        let next = brokers.failed(retired)
        logger.debug(
            "no connection to the broker took a request; the next opens a fresh socket",
            metadata: ["endpoint": "\(retired)", "next": "\(next)"])
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
            let generation = state.withLock { state in
                state.generation += 1
                return state.generation
            }
            do {
                // The reader is the I/O thread itself: it hands each batch of replies to `read`,
                // which resumes the requests they answer, with no task of its own in between.
                let socket = try await io.open(
                    .dealer, linger: 0,
                    configure: { [options = settings.socketOptions] socket in
                        try socket.set([.maxMessageSize(1 << 20)] + options)
                        try socket.connect(endpoint)
                    },
                    onReceive: { [weak self] batch in self?.read(batch, generation: generation) })
                result = .success(socket)
            } catch {
                result = .failure(error)
            }
            let waiters = state.withLock { state -> [CheckedContinuation<AsyncSocket, any Error>] in
                state.opening = false
                if case .success(let socket) = result {
                    state.socket = socket
                    state.socketEndpoint = endpoint
                }
                defer { state.openWaiters = [] }
                return state.openWaiters
            }
            for waiter in waiters { waiter.resume(with: result) }
            return try result.get()
        }
    }

    /// The shared socket's reader, on the I/O thread: routes each reply to its request.
    private func read(_ batch: Result<[Message], ZMQError>, generation: Int) {
        switch batch {
        case .success(let messages):
            for message in messages {
                _ = routeReply(message.frames, expecting: nil) { id in self.state.withLock { $0.routes[id] } }
            }
        case .failure:
            // The socket is gone: every request waiting on it fails now rather than at its
            // time-out, unless it was retired (then they run out their attempt and go on by
            // their rules).
            let waiting = state.withLock { state -> [Route] in
                guard state.socket != nil, state.generation == generation else { return [] }
                state.socket = nil
                defer { state.routes = [:] }
                return Array(state.routes.values)
            }
            for route in waiting { route.fail(.closed) }
        }
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
        let (socket, routes, waiters) = state.withLock { state in
            state.closed = true
            defer {
                state.socket = nil
                state.routes = [:]
                state.openWaiters = []
            }
            return (state.socket, Array(state.routes.values), state.openWaiters)
        }
        for route in routes { route.fail(.closed) }
        for waiter in waiters { waiter.resume(throwing: ServiceClientError.closed) }
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
