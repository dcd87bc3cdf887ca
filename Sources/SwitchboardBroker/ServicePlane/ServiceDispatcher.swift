import DequeModule
import Foundation
import SwitchboardProtocol
import SwitchboardRuntime

// The Majordomo broker's rules, as a value type with no I/O: which worker gets a request, when a
// silent worker is given up, what happens to the request a lost worker held, how long a request
// waits for a worker, and what the broker itself answers (MMI, errors). `ServiceBroker` owns
// one, feeds it what arrived on its socket and the time, and carries out the `Action`s it gets
// back (frames to send, lines to log). Time is always passed in, never read, so tests drive it
// with a manual clock and no socket.
//
// Workers are kept per service in least-recently-used order: a worker that becomes idle goes
// to the back of its service's idle list and the front one gets the next request. Every request
// a worker holds is remembered, so a worker that dies mid-request (heartbeats stop, or it
// disconnects) has its request handed to the next worker (`removeWorker`).

/// The service plane's dispatch, heartbeat, expiry and re-dispatch rules.
///
/// Promises, whatever the sequence of inputs:
/// - A worker holds at most one request; a request is held by at most one worker.
/// - A request is answered exactly once with a final reply: by a worker, or by the broker
///   (`no-worker`, `queue-full`, `worker-lost`, `forbidden`, MMI).
/// - A request whose worker is lost before any PARTIAL goes to the front of its service's queue,
///   at most `maxAttempts` times in all.
/// - Nothing grows without bound: queues stop at `queueLimit`, and services nobody serves or
///   waits for are forgotten at the next heartbeat.
struct ServiceDispatcher: Sendable {
    typealias Instant = ContinuousClock.Instant

    struct Settings: Sendable, Hashable {
        var heartbeat: Duration
        var liveness: Int
        var wait: Duration
        var queueLimit: Int
        var maxAttempts: Int
        /// Reported by `mmi.workers` (whether the service plane runs CURVE).
        var curve: Bool

        init(_ settings: ServiceBroker.Settings, curve: Bool) {
            heartbeat = settings.heartbeat
            liveness = settings.liveness
            wait = settings.wait
            queueLimit = settings.queueLimit
            maxAttempts = settings.maxAttempts
            self.curve = curve
        }

        /// A worker unheard of for this long is given up.
        var expiry: Duration { heartbeat * liveness }
    }

    /// Where to send to a worker (or to a peer that spoke as one), and in which dialect.
    struct Peer: Sendable, Hashable {
        var identity: Data
        var version: Majordomo.Version
        var delimited: Bool
    }

    /// A client request waiting for, or held by, a worker.
    struct Request: Sendable, Hashable {
        var client: Data
        var clientVersion: Majordomo.Version
        var clientDelimited: Bool
        var service: String
        var body: [Data]
        /// When the client's request arrived (for the latency metric).
        var received: Instant
        /// When it joined its service's queue: the request waits `wait` from here for a worker.
        var queued: Instant
        /// Workers it has been given to.
        var attempts = 0
        /// A PARTIAL was forwarded: the request can no longer be handed to another worker.
        var partialSent = false
    }

    /// What the broker must do after an input.
    enum Action: Sendable, Hashable {
        /// Send a REQUEST to a worker.
        case request(Peer, Request)
        /// Send a reply to a client: PARTIAL, or FINAL (with its status, for the metrics).
        case reply(Request, body: [Data], final: Bool, status: Int?)
        /// Send HEARTBEAT or DISCONNECT to a worker (or to a peer that spoke as one).
        case command(Majordomo.WorkerCommand, to: Peer)
        /// For the log.
        case note(Note)
    }

    enum Note: Sendable, Hashable {
        /// A malformed message, dropped unanswered.
        case dropped(peer: Data, reason: String)
        case workerReady(service: String, worker: Data, version: Majordomo.Version)
        /// A valid command the broker answered with DISCONNECT.
        case workerRefused(worker: Data, reason: String)
        case workerRemoved(service: String, worker: Data, reason: String)
    }

    struct Worker: Sendable, Hashable {
        var peer: Peer
        var service: String
        var expiry: Instant
        var request: Request?
    }

    struct Service: Sendable {
        let name: String
        var workers: Set<Data> = []
        /// Idle workers, least recently used first.
        var idle: Deque<Data> = []
        var queue: Deque<Request> = []
    }

    let settings: Settings
    private(set) var workers: [Data: Worker] = [:]
    private(set) var services: [String: Service] = [:]
    private(set) var nextHeartbeat: Instant
    private(set) var statistics = ServiceStatistics()

    init(settings: Settings, now: Instant) {
        self.settings = settings
        nextHeartbeat = now + settings.heartbeat
    }

    // MARK: Input

    /// A message as the ROUTER read it (the routing frame first): parsed, checked by
    /// `authorise` (which returns why the sender may not do this, or nil), then dispatched.
    /// A malformed message is dropped, never answered (counted, and noted for the log).
    mutating func receive(
        _ frames: [Data], at now: Instant, authorise: (Majordomo.Inbound) -> String? = { _ in nil }
    ) -> [Action] {
        guard frames.count >= 2 else {
            return drop(frames.first ?? Data(), "a message needs a routing frame and a protocol header")
        }
        let sender = frames[0]
        let inbound: Majordomo.Inbound
        do {
            inbound = try Majordomo.parse(frames[1...])
        } catch {
            return drop(sender, error.description)
        }
        if let reason = authorise(inbound) { return refuse(inbound, from: sender, reason: reason, at: now) }
        switch inbound {
        case .client(let message):
            guard message.command == .request else {
                return drop(sender, "a client may only send REQUEST, not \(message.command == .partial ? "PARTIAL" : "FINAL")")
            }
            return request(from: sender, message, at: now)
        case .worker(let message):
            return workerMessage(from: sender, message, at: now)
        }
    }

    private mutating func drop(_ sender: Data, _ reason: String) -> [Action] {
        statistics.malformed += 1
        return [.note(.dropped(peer: sender, reason: reason))]
    }

    // MARK: Clients

    /// A client's REQUEST: queued and dispatched, or answered at once (MMI, a full queue).
    mutating func request(from client: Data, _ message: Majordomo.ClientMessage, at now: Instant) -> [Action] {
        statistics.requests += 1
        let request = Request(
            client: client, clientVersion: message.version, clientDelimited: message.delimited, service: message.service,
            body: message.body, received: now, queued: now)
        if message.service.hasPrefix("mmi.") { return [answerMMI(request, at: now)] }
        guard (services[message.service]?.queue.count ?? 0) < settings.queueLimit else {
            return [
                fail(
                    request, status: ServiceStatus.unavailable,
                    ServiceFailure(
                        code: "queue-full", message: "service '\(message.service)' has \(settings.queueLimit) requests waiting",
                        retryable: true))
            ]
        }
        services[message.service, default: Service(name: message.service)].queue.append(request)
        return dispatch(message.service)
    }

    /// A refused message (the role check said no): a request gets a 403 reply, a worker's
    /// command a DISCONNECT.
    mutating func refuse(_ inbound: Majordomo.Inbound, from sender: Data, reason: String, at now: Instant) -> [Action] {
        switch inbound {
        case .client(let message):
            let request = Request(
                client: sender, clientVersion: message.version, clientDelimited: message.delimited, service: message.service,
                body: message.body, received: now, queued: now)
            return [fail(request, status: ServiceStatus.forbidden, ServiceFailure(code: "forbidden", message: reason))]
        case .worker(let message):
            statistics.disconnects += 1
            return [.command(.disconnect, to: Peer(identity: sender, version: message.version, delimited: message.delimited))]
        }
    }

    // MARK: Workers

    /// A worker's message. Any message from a registered worker is a sign of life; a valid
    /// command out of turn gets DISCONNECT and the worker is forgotten.
    mutating func workerMessage(from sender: Data, _ message: Majordomo.WorkerMessage, at now: Instant) -> [Action] {
        let peer = Peer(identity: sender, version: message.version, delimited: message.delimited)
        if let known = workers[sender] {
            guard known.peer.version == message.version else {
                return refuseWorker(peer, "switched from \(known.peer.version) to \(message.version)", at: now)
            }
            let expiry = now + settings.expiry
            workers[sender]?.expiry = expiry
        }
        let known = workers[sender]
        switch message.command {
        case .ready:
            guard known == nil else { return refuseWorker(peer, "READY from a worker that is already registered", at: now) }
            let name = message.service ?? ""
            guard !name.hasPrefix("mmi.") else { return refuseWorker(peer, "the mmi. services belong to the broker", at: now) }
            workers[sender] = Worker(peer: peer, service: name, expiry: now + settings.expiry)
            services[name, default: Service(name: name)].workers.insert(sender)
            services[name]?.idle.append(sender)
            return [.note(.workerReady(service: name, worker: sender, version: message.version))] + dispatch(name)
        case .heartbeat:
            guard known != nil else { return refuseWorker(peer, "HEARTBEAT before READY", at: now) }
            return []
        case .partial, .final:
            guard let worker = known, var request = worker.request else {
                return refuseWorker(peer, "\(message.command) without a request in hand", at: now)
            }
            guard message.client == request.client else {
                return refuseWorker(peer, "\(message.command) for a client it was not given", at: now)
            }
            if message.command == .partial {
                request.partialSent = true
                workers[sender]?.request = request
                return [reply(request, body: message.body, final: false)]
            }
            workers[sender]?.request = nil
            services[worker.service, default: Service(name: worker.service)].idle.append(sender)
            return [reply(request, body: message.body, final: true)] + dispatch(worker.service)
        case .disconnect:
            guard known != nil else { return [] }
            return removeWorker(sender, reason: "it disconnected", at: now)
        case .request:
            return refuseWorker(peer, "REQUEST is sent by the broker, not to it", at: now)
        }
    }

    /// Answers a valid but unexpected command with DISCONNECT, and forgets the worker (its
    /// request, if any, goes to the next worker).
    private mutating func refuseWorker(_ peer: Peer, _ reason: String, at now: Instant) -> [Action] {
        statistics.disconnects += 1
        var actions: [Action] = [.note(.workerRefused(worker: peer.identity, reason: reason)), .command(.disconnect, to: peer)]
        if workers[peer.identity] != nil { actions += removeWorker(peer.identity, reason: reason, at: now) }
        return actions
    }

    /// Forgets a worker that is gone (silent, disconnected, or refused). **A lost worker's
    /// request goes to the next worker**: to the front of its service's queue, before anything
    /// that arrived later, unless a PARTIAL already reached the client (it cannot be replayed)
    /// or it has reached `maxAttempts` workers in turn (a request that kills every worker it
    /// reaches stops there); then the client gets 502 `worker-lost`.
    mutating func removeWorker(_ identity: Data, reason: String, at now: Instant) -> [Action] {
        guard let worker = workers.removeValue(forKey: identity) else { return [] }
        let name = worker.service
        services[name, default: Service(name: name)].workers.remove(identity)
        services[name]?.idle.removeAll { $0 == identity }
        var actions: [Action] = [.note(.workerRemoved(service: name, worker: identity, reason: reason))]
        if var request = worker.request {
            if request.partialSent || request.attempts >= settings.maxAttempts {
                actions.append(
                    fail(
                        request, status: ServiceStatus.badGateway,
                        ServiceFailure(
                            code: "worker-lost",
                            message: request.partialSent
                                ? "the worker for '\(request.service)' was lost after sending partial replies"
                                : "the request was lost with \(request.attempts) workers of '\(request.service)' in turn",
                            retryable: false)))
            } else {
                request.queued = now
                services[name]?.queue.prepend(request)
                statistics.handedOver += 1
            }
        }
        return actions + dispatch(name)
    }

    /// Gives queued requests to idle workers, least recently used first.
    private mutating func dispatch(_ name: String) -> [Action] {
        var actions: [Action] = []
        // Checked through the dictionary, not a copy of the record: a copy would make every
        // removal below copy the queue.
        while services[name]?.idle.isEmpty == false, services[name]?.queue.isEmpty == false {
            let identity = services[name]!.idle.removeFirst()
            guard let worker = workers[identity] else { continue }
            var request = services[name]!.queue.removeFirst()
            request.attempts += 1
            workers[identity]?.request = request
            statistics.dispatched += 1
            actions.append(.request(worker.peer, request))
        }
        return actions
    }

    // MARK: Time

    /// Every `heartbeat`: workers unheard of for `liveness` intervals are removed (and told
    /// DISCONNECT, in case they are only slow); the others get a HEARTBEAT. Services nobody
    /// serves or waits for are forgotten, so the table cannot grow without bound.
    mutating func heartbeat(at now: Instant) -> [Action] {
        nextHeartbeat = now + settings.heartbeat
        var actions: [Action] = []
        for worker in workers.values.sorted(by: { $0.peer.identity.lexicographicallyPrecedes($1.peer.identity) }) {
            if worker.expiry <= now {
                statistics.expiredWorkers += 1
                actions.append(.command(.disconnect, to: worker.peer))
                actions += removeWorker(
                    worker.peer.identity, reason: "no heartbeat for \(DurationText.format(settings.expiry))", at: now)
            } else {
                actions.append(.command(.heartbeat, to: worker.peer))
            }
        }
        services = services.filter { !$0.value.workers.isEmpty || !$0.value.queue.isEmpty }
        return actions
    }

    /// Requests for a service without workers wait at most `wait`, then get 503 `no-worker`.
    mutating func expireRequests(at now: Instant) -> [Action] {
        var actions: [Action] = []
        for name in services.keys.sorted() where services[name]!.workers.isEmpty {
            while let first = services[name]!.queue.first, now - first.queued >= settings.wait {
                services[name]!.queue.removeFirst()
                actions.append(
                    fail(
                        first, status: ServiceStatus.unavailable,
                        ServiceFailure(
                            code: "no-worker", message: "no worker for service '\(name)' within \(DurationText.format(settings.wait))",
                            retryable: true)))
            }
        }
        return actions
    }

    /// When the next time-driven rule is due: the heartbeat, or the oldest request of a
    /// service without workers running out of waiting time.
    func nextDeadline() -> Instant {
        var next = nextHeartbeat
        for service in services.values where service.workers.isEmpty {
            if let first = service.queue.first { next = min(next, first.queued + settings.wait) }
        }
        return next
    }

    /// Each service's worker count (for the workers gauge).
    var workerCounts: [String: Int] { services.mapValues(\.workers.count) }

    /// Every registered worker, for DISCONNECT at shutdown.
    var registeredWorkers: [Peer] { workers.values.map(\.peer) }

    // MARK: Replies

    private mutating func reply(_ request: Request, body: [Data], final: Bool, status: Int? = nil) -> Action {
        if final { statistics.replies += 1 }
        return .reply(request, body: body, final: final, status: final ? status ?? ServiceBody.peekStatus(body) : nil)
    }

    /// An error REPLY written by the broker, naming the request's `request_id` and parent.
    private mutating func fail(_ request: Request, status: Int, _ failure: ServiceFailure) -> Action {
        let (requestID, parent) = ServiceBody.peekRequest(request.body)
        let body = ServiceBody.replyBody(ReplyHeader(requestID: requestID, status: status, error: failure), parent: parent)
        statistics.brokerErrors += 1
        return reply(request, body: body, final: true, status: status)
    }

    // MARK: MMI (RFC 8)

    private mutating func answerMMI(_ request: Request, at now: Instant) -> Action {
        switch request.service {
        case "mmi.service":
            let name = request.body.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
            let alive = !(services[name]?.workers.isEmpty ?? true)
            return reply(request, body: [Data((alive ? "200" : "404").utf8)], final: true)
        case "mmi.workers":
            return reply(request, body: [Data("200".utf8), workersReport(at: now)], final: true)
        default:
            return reply(request, body: [Data("501".utf8)], final: true)
        }
    }

    /// The `mmi.workers` extension: every service with its workers and queue (section 12).
    func workersReport(at now: Instant) -> Data {
        var list: [JSONValue] = []
        for service in services.values.sorted(by: { $0.name < $1.name }) {
            let oldest = service.queue.first.map { (now - $0.queued).wholeMilliseconds } ?? 0
            let versions = Set(service.workers.compactMap { workers[$0]?.peer.version.description }).sorted()
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
            "curve": .bool(settings.curve),
        ])
        var writer = JSONWriter()
        writer.value(report)
        return writer.data
    }
}

extension ServiceDispatcher.Action {
    /// The frames this action sends, after the routing frame; nil for a note, or a PARTIAL to an
    /// MDP/0.1 client (which has no partial replies).
    var frames: (to: Data, frames: [Data])? {
        switch self {
        case .request(let worker, let request):
            return (
                worker.identity,
                Majordomo.worker(worker.version, .request, client: request.client, body: request.body, delimited: worker.delimited)
            )
        case .reply(let request, let body, let final, _):
            if !final && request.clientVersion == .v01 { return nil }
            return (
                request.client,
                Majordomo.clientReply(
                    request.clientVersion, delimited: request.clientDelimited, final: final, service: request.service, body: body)
            )
        case .command(let command, let peer):
            return (peer.identity, Majordomo.worker(peer.version, command, delimited: peer.delimited))
        case .note:
            return nil
        }
    }
}
