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
    /// The client was closed, or its I/O thread stopped.
    case closed

    public var description: String {
        switch self {
        case .timeout(let service, let operation, let after):
            "no reply from service '\(service)' to '\(operation)' within \(after)"
        case .noSuchService(let service): "no worker serves '\(service)'"
        case .serviceError(let status, let failure): "service error \(status) \(failure)"
        case .protocolViolation(let what): "protocol violation: \(what)"
        case .closed: "the service client is closed"
        }
    }
}

/// Sends requests to services through the broker's Majordomo endpoint (MDP/0.2).
///
/// Many requests share one DEALER socket and are told apart by `request_id`. A request marked
/// idempotent that gets no final reply within its attempt time is sent again, with the same
/// `request_id`, on a fresh socket (the Lazy Pirate pattern, `LazyPirate`) until its whole time
/// is used; other requests time out instead. Safe to use from any task.
///
/// No task of its own reads the shared socket: the requests waiting on it do, in their callers'
/// tasks. Each reads until its own reply has come (whichever waiting request read it) or its
/// attempt time is up, and hands every reply it reads to the request it answers; a request that
/// is not waiting (a stream between two `next()` calls) finds its replies buffered.
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
    private let endpoint: String
    fileprivate let settings: Settings
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var socket: AsyncSocket?
        var opening = false
        var openWaiters: [CheckedContinuation<AsyncSocket, any Error>] = []
        var routes: [String: ReplyRoute] = [:]
        var closed = false
    }

    public init(io: IOThread, endpoint: String, settings: Settings = Settings(), logger: Logger) {
        self.io = io
        self.endpoint = endpoint
        self.settings = settings
        self.logger = logger
    }

    // MARK: Requests

    /// Sends a request and returns the final reply (partial replies are skipped).
    /// - Throws: `ServiceClientError`.
    public func request(
        service: String, operation: String, content: Data = Data("{}".utf8), timeout: Duration? = nil, idempotent: Bool = false
    ) async throws(ServiceClientError) -> ServiceReply {
        let request = PendingRequest(
            client: self, service: service, operation: operation, content: content, timeout: timeout ?? settings.timeout,
            idempotent: idempotent)
        while let reply = try await request.next() {
            if reply.final { return reply }
        }
        throw .protocolViolation("the reply stream ended without a final reply")
    }

    /// Sends a request when iterated and yields each PARTIAL reply, then the FINAL one; a final
    /// error ends the sequence with a `ServiceClientError`. The request runs in the iterating
    /// task; ending the iteration early abandons it.
    public func stream(
        service: String, operation: String, content: Data = Data("{}".utf8), timeout: Duration? = nil, idempotent: Bool = false
    ) -> ServiceReplies {
        ServiceReplies(
            client: self, service: service, operation: operation, content: content, timeout: timeout ?? settings.timeout,
            idempotent: idempotent)
    }

    /// Sends the request's first attempt on the shared socket, registering its route first.
    fileprivate func sendShared(_ frames: [Data], id: String, route: ReplyRoute) async throws(ServiceClientError) -> AsyncSocket {
        do {
            let socket = try await sharedSocket()
            state.withLock { $0.routes[id] = route }
            try await socket.send(frames)
            return socket
        } catch {
            throw Self.clientError(error)
        }
    }

    /// Replies for `id` that come on the shared socket from now on are dropped.
    fileprivate func forget(_ id: String) {
        _ = state.withLock { $0.routes.removeValue(forKey: id) }
    }

    /// Waits until `route` has a reply (or failed) or `deadline` passes, reading the shared socket
    /// meanwhile and handing what comes to the requests it answers.
    fileprivate func awaitShared(_ route: ReplyRoute, on socket: AsyncSocket, until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await route.waitForMail() }
            group.addTask { await self.readShared(socket, until: deadline, for: route) }
            await group.next()
            group.cancelAll()
        }
    }

    private func readShared(_ socket: AsyncSocket, until deadline: ContinuousClock.Instant, for route: ReplyRoute) async {
        while !route.hasMail {
            let message: Message?
            do {
                message = try await socket.receive(timeout: ContinuousClock.now.duration(to: deadline))
            } catch is CancellationError {
                return
            } catch {
                socketFailed(socket)
                return
            }
            // Routed even when this task was cancelled meanwhile: a message taken off the
            // socket is nobody else's to read.
            guard let message else { return }
            _ = routeReply(message.frames, expecting: nil) { id in self.state.withLock { $0.routes[id] } }
            if Task.isCancelled { return }
        }
    }

    /// The shared socket failed: every request waiting on it fails now rather than at its time-out.
    private func socketFailed(_ socket: AsyncSocket) {
        let waiting = state.withLock { state -> [ReplyRoute] in
            guard state.socket == socket else { return [] }
            state.socket = nil
            defer { state.routes = [:] }
            return Array(state.routes.values)
        }
        for route in waiting { route.fail(.closed) }
    }

    /// Sends the request again on a socket of its own and reads its replies until the final one
    /// or `deadline`; the socket is closed before this returns.
    fileprivate func attemptOnFreshSocket(
        _ frames: [Data], id: String, route: ReplyRoute, until deadline: ContinuousClock.Instant
    ) async throws(ServiceClientError) {
        logger.debug("retrying on a fresh socket", metadata: ["service": "\(route.service)", "request_id": "\(id)"])
        do {
            try await withFreshSocket { socket in
                try await socket.send(frames)
                while !route.isFinished, let message = try await socket.receive(timeout: ContinuousClock.now.duration(to: deadline)) {
                    _ = routeReply(message.frames, expecting: id) { $0 == id ? route : nil }
                }
            }
        } catch {
            throw Self.clientError(error)
        }
    }

    static func clientError(_ error: any Error) -> ServiceClientError {
        if let error = error as? ServiceClientError { return error }
        return .closed
    }

    /// Runs `body` on a socket of its own, closed before this returns, whichever way `body` ends.
    private func withFreshSocket<T>(_ body: (AsyncSocket) async throws -> T) async throws -> T {
        let socket = try await io.open(.dealer, linger: 0) { [endpoint, options = settings.socketOptions] in
            try $0.set(options)
            try $0.connect(endpoint)
        }
        do {
            let result = try await body(socket)
            await socket.close()
            return result
        } catch {
            await socket.close()
            throw error
        }
    }

    // MARK: The shared socket

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
            do {
                let socket = try await io.open(.dealer, linger: 0, inboxCapacity: 4096) {
                    [endpoint, options = settings.socketOptions] socket in
                    try socket.set([.maxMessageSize(1 << 20)] + options)
                    try socket.connect(endpoint)
                }
                result = .success(socket)
            } catch {
                result = .failure(error)
            }
            let waiters = state.withLock { state -> [CheckedContinuation<AsyncSocket, any Error>] in
                state.opening = false
                if case .success(let socket) = result { state.socket = socket }
                defer { state.openWaiters = [] }
                return state.openWaiters
            }
            for waiter in waiters { waiter.resume(with: result) }
            return try result.get()
        }
    }

    /// Hands one message from the broker to the request it answers (found by `lookup` from
    /// its `request_id`). Returns whether it finished that request; nil if it was for none.
    /// `expecting` is the request a dedicated retry socket carries: a broker reply without
    /// `request_id` (its answer to a body it could not read) goes to it.
    private func routeReply(_ frames: [Data], expecting id: String?, lookup: (String) -> ReplyRoute?) -> Bool? {
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
        do {
            return try await withFreshSocket { socket in
                try await socket.send(Majordomo.clientRequest(.v02, service: service, body: body))
                guard let answer = try await socket.receive(timeout: wait) else {
                    throw ServiceClientError.timeout(service: service, operation: "mmi", after: wait)
                }
                guard case .client(let message) = try Majordomo.parse(answer.frames[...]), message.service == service else {
                    throw ServiceClientError.protocolViolation("the answer to \(service) is not an MDP/0.2 client reply for it")
                }
                return message.body
            }
        } catch let error as ServiceClientError {
            throw error
        } catch let error as Majordomo.Malformed {
            throw .protocolViolation("the answer to \(service) is malformed: \(error)")
        } catch {
            throw Self.clientError(error)
        }
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

/// A request's replies, yielded as they come: each PARTIAL, then the FINAL. The request is sent
/// when iteration starts and runs in the iterating task; a final error ends the sequence with a
/// `ServiceClientError`.
public struct ServiceReplies: AsyncSequence, Sendable {
    public typealias Element = ServiceReply

    let client: ServiceClient
    let service: String
    let operation: String
    let content: Data
    let timeout: Duration
    let idempotent: Bool

    public func makeAsyncIterator() -> Iterator {
        Iterator(
            request: PendingRequest(
                client: client, service: service, operation: operation, content: content, timeout: timeout, idempotent: idempotent))
    }

    public struct Iterator: AsyncIteratorProtocol {
        let request: PendingRequest

        public mutating func next() async throws -> ServiceReply? {
            try await request.next()
        }
    }
}

/// Where the replies of one request go: filled by whichever task reads them, emptied by the
/// request's own task.
final class ReplyRoute: Sendable {
    let service: String
    private let mail = Mutex(Mail())

    private struct Mail {
        var replies: [ServiceReply] = []
        var failure: ServiceClientError?
        var finished = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    /// What the request's task takes out.
    enum Taken {
        case reply(ServiceReply)
        case failure(ServiceClientError)
    }

    init(service: String) {
        self.service = service
    }

    /// Delivers one reply; returns true if it was the final one.
    @discardableResult
    func deliver(_ reply: ServiceReply) -> Bool {
        let waiter = mail.withLock { mail -> CheckedContinuation<Void, Never>?? in
            guard !mail.finished else { return .none }
            if reply.final { mail.finished = true }
            mail.replies.append(reply)
            defer { mail.waiter = nil }
            return .some(mail.waiter)
        }
        guard let waiter else { return false }
        waiter?.resume()
        return reply.final
    }

    func fail(_ error: ServiceClientError) {
        let waiter = mail.withLock { mail -> CheckedContinuation<Void, Never>?? in
            guard !mail.finished else { return .none }
            mail.finished = true
            mail.failure = error
            defer { mail.waiter = nil }
            return .some(mail.waiter)
        }
        waiter??.resume()
    }

    var isFinished: Bool { mail.withLock { $0.finished } }
    var hasMail: Bool { mail.withLock { !$0.replies.isEmpty || $0.failure != nil } }

    /// The next reply in order, then the failure if there is one.
    func take() -> Taken? {
        mail.withLock { mail -> Taken? in
            if !mail.replies.isEmpty { return .reply(mail.replies.removeFirst()) }
            return mail.failure.map { .failure($0) }
        }
    }

    /// Returns when there is something to take, or the task is cancelled.
    func waitForMail() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = mail.withLock { mail -> Bool in
                    if !mail.replies.isEmpty || mail.failure != nil || Task.isCancelled { return true }
                    mail.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = mail.withLock { mail -> CheckedContinuation<Void, Never>? in
                defer { mail.waiter = nil }
                return mail.waiter
            }
            waiter?.resume()
        }
    }
}

/// One request in flight: carries out what its `LazyPirate` says, in the task that asks for
/// its next reply. Dropping it abandons the request.
final class PendingRequest {
    private let client: ServiceClient
    private let service: String
    private let operation: String
    private let timeout: Duration
    private let idempotent: Bool
    private let route: ReplyRoute
    /// The request's frames and id, or why it cannot be sent.
    private let prepared: Result<(frames: [Data], id: String), ServiceClientError>
    private var pirate: LazyPirate?
    private var shared: AsyncSocket?
    private var done = false

    init(client: ServiceClient, service: String, operation: String, content: Data, timeout: Duration, idempotent: Bool) {
        self.client = client
        self.service = service
        self.operation = operation
        self.timeout = timeout
        self.idempotent = idempotent
        route = ReplyRoute(service: service)
        let header = RequestHeader(
            operation: operation, timeoutMilliseconds: max(1, timeout.wholeMilliseconds), idempotent: idempotent ? true : nil)
        prepared = Result { () throws(ServiceClientError) -> (frames: [Data], id: String) in
            do {
                try header.validate()
            } catch {
                throw .protocolViolation("the request itself is invalid: \(error)")
            }
            do {
                let body = try ServiceBody.requestBody(header, content: content)
                return (Majordomo.clientRequest(.v02, service: service, body: body), header.requestID)
            } catch {
                throw .protocolViolation("the request could not be encoded: \(error)")
            }
        }
    }

    deinit {
        if case .success(let request) = prepared { client.forget(request.id) }
    }

    /// The next reply (PARTIALs, then the FINAL), nil after the FINAL.
    func next() async throws(ServiceClientError) -> ServiceReply? {
        guard !done else { return nil }
        do {
            let reply = try await nextReply()
            if reply.final { finish() }
            return reply
        } catch {
            finish()
            throw error
        }
    }

    private func finish() {
        done = true
        pirate?.finished()
        if case .success(let request) = prepared { client.forget(request.id) }
    }

    private func nextReply() async throws(ServiceClientError) -> ServiceReply {
        let (frames, id) = try prepared.get()
        var pirate =
            self.pirate
            ?? LazyPirate(timeout: timeout, attemptTimeout: client.settings.attemptTimeout, idempotent: idempotent, now: .now)
        defer { self.pirate = pirate }
        while true {
            switch route.take() {
            case .reply(let reply):
                guard reply.final else {
                    pirate.partial()
                    return reply
                }
                return try Self.outcome(of: reply, service: service)
            case .failure(let error):
                throw error
            case nil:
                break
            }
            if Task.isCancelled { throw .closed }
            switch pirate.next(now: .now) {
            case .sendOnSharedSocket(let until):
                let socket = try await client.sendShared(frames, id: id, route: route)
                shared = socket
                await client.awaitShared(route, on: socket, until: until)
            case .wait(let until):
                // Only the shared socket's attempt is waited on across calls: a fresh socket's
                // attempt is read through before its replies are handed out.
                if let shared {
                    await client.awaitShared(route, on: shared, until: until)
                } else {
                    try? await Task.sleep(until: until, clock: .continuous)
                }
            case .resendOnFreshSocket(let until):
                client.forget(id)
                shared = nil
                try await client.attemptOnFreshSocket(frames, id: id, route: route, until: until)
            case .timedOut:
                throw .timeout(service: service, operation: operation, after: timeout)
            case .finished:
                throw .protocolViolation("the reply stream ended without a final reply")
            }
        }
    }

    /// A final reply as the caller sees it: itself when it succeeded, else its error.
    static func outcome(of reply: ServiceReply, service: String) throws(ServiceClientError) -> ServiceReply {
        if (200...299).contains(reply.status) { return reply }
        if reply.status == ServiceStatus.unavailable && reply.header.error?.code == "no-worker" {
            throw .noSuchService(service)
        }
        throw .serviceError(status: reply.status, reply.header.error ?? ServiceFailure(code: "unknown", message: "status \(reply.status)"))
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
