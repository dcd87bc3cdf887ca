// A member of a consumer group (protocol/README.md, section 15), shaped like
// swift-kafka-client's consumer: `run()` owns the connection (join, heartbeats, rejoin after a
// broker silence or restart) and must run for as long as deliveries are wanted; `deliveries`
// is the AsyncSequence the application reads. Settling goes through the delivery itself
// (`ack()`, `nack(after:)`, `term(code:message:)`, `inProgress()`), so nothing is acknowledged
// that the application did not say it finished.

public import Foundation
public import Logging
public import SwitchboardProtocol
import Synchronization
public import ZeroMQ

/// One event delivered to this member. Settle it exactly once with `ack`, `nack` or `term`;
/// `inProgress` may come before, as often as needed.
public struct GroupDelivery: Sendable {
    public let group: String
    public let busSeq: Int64
    /// 1 for the first delivery of this event to the group.
    public let attempt: Int
    /// The broker knows no member was given this event before (DELIVER's `first`). False says
    /// nothing: attempt 1 can follow an earlier delivery (a replay, a reset, a broker crash that
    /// lost the count).
    public let first: Bool
    /// When the broker takes the event back if it is not settled (broker clock).
    public let deadline: String
    /// How long the broker waits for a settle, counted from receipt: a member whose work may take
    /// longer sends `inProgress()` before it runs out.
    public let ackWait: Duration
    /// The event's journaled header (its `bus_seq` included).
    public let header: EventHeader
    public let rawHeader: Data
    public let metadata: Data
    public let content: Data
    let consumer: GroupConsumer
    let connection: Int

    /// The side effect succeeded: the group never gets this event again. ACKs finished while the
    /// consumer's previous ACK was being sent go out together, as one ACKS (protocol 1.2), when the
    /// broker takes it.
    public func ack() async throws { try await settle(SettleHeader(.ack, group: group, busSeq: busSeq, attempt: attempt)) }

    /// It failed for now: deliver it again after `delay`, or after the group's back-off when nil.
    public func nack(after delay: Duration? = nil, code: String? = nil, message: String? = nil) async throws {
        let milliseconds = delay.map { delay in
            max(0, min(Int64((delay / .milliseconds(1)).rounded()), SettleHeader.maximumDelayMilliseconds))
        }
        try await settle(
            SettleHeader(
                .nack, group: group, busSeq: busSeq, attempt: attempt, delayMilliseconds: milliseconds, code: code, message: message))
    }

    /// It can never succeed: make it a dead letter now, with this reason (no secret in it).
    public func term(code: String, message: String) async throws {
        try await settle(SettleHeader(.term, group: group, busSeq: busSeq, attempt: attempt, code: code, message: message))
    }

    /// Still working: the broker extends the deadline by its ack wait.
    public func inProgress() async throws { try await settle(SettleHeader(.progress, group: group, busSeq: busSeq, attempt: attempt)) }

    func settle(_ header: SettleHeader) async throws {
        try await consumer.send(
            Envelope(command: header.command, header: header.wireJSON()), connection: connection,
            settling: (busSeq, attempt, final: header.outcome != .progress))
    }
}

/// A member of one consumer group. Thread-safe; use one `run()` per consumer.
public final class GroupConsumer: Sendable {
    public struct Settings: Sendable {
        public var group: String
        /// Type prefixes; must equal the group's filter when the group exists.
        public var topics: [String]
        /// Deliveries in flight to this member at once.
        public var credit: Int
        /// For the broker's logs and status (a process name: `filemaker@host-1`).
        public var member: String?
        /// Where a group this JOIN creates starts.
        public var start: GroupStart
        /// CURVE client options for a secure broker.
        public var socketOptions: [SocketOption]
        /// How long to wait for JOINED before trying again on a fresh socket.
        public var joinTimeout: Duration
        /// The most deliveries one DELIVER brings (protocol 1.3; at most `credit`): fewer
        /// messages, and fewer wake-ups of this process and the broker, when many are ready at
        /// once. A broker older than 1.3 sends one per DELIVER whatever this says.
        public var batch: Int

        public init(
            group: String, topics: [String], credit: Int = 16, member: String? = nil, start: GroupStart = .earliest,
            socketOptions: [SocketOption] = [], joinTimeout: Duration = .seconds(5), batch: Int = 16
        ) {
            self.batch = batch
            self.group = group
            self.topics = topics
            self.credit = credit
            self.member = member
            self.start = start
            self.socketOptions = socketOptions
            self.joinTimeout = joinTimeout
        }
    }

    /// What a consumer tells about its connection, for tests and logs.
    public enum Notice: Sendable, Hashable {
        case joined(JoinedHeader)
        /// The broker was silent past the liveness period, or said this connection is no member.
        case rejoining(reason: String)
        /// The broker refused a settle (a stale attempt after a redelivery, for example).
        case refused(code: String, message: String)
    }

    public let settings: Settings
    public let deliveries: AsyncStream<GroupDelivery>
    public let notices: AsyncStream<Notice>
    private let deliveryInput: AsyncStream<GroupDelivery>.Continuation
    private let noticeInput: AsyncStream<Notice>.Continuation
    private let io: IOThread
    /// The broker, or brokers to move between when a JOIN gets no JOINED or the broker falls
    /// silent (`BrokerRotation`).
    private let brokers: BrokerRotation
    private let logger: Logger
    /// The socket in use, and the session's rules and bookkeeping (which connection is current,
    /// the deliveries not settled yet and the connection each belongs to).
    private struct Current {
        var socket: AsyncSocket?
        var session: MemberSession
        /// Handlers waiting in `mayAct(on:)` for a delivery's standing to be known; woken by
        /// anything heard, a JOINED, or a connection given up.
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
        /// Counts wake-ups, so a handler that looked before one and waits after it does not miss it.
        var generation: UInt64 = 0
        /// Set by `stopWaiting()`, `leave()` and the end of `run()`: a delivery in doubt is
        /// answered false at once.
        var waitingStopped = false
        /// The broker of the joined connection takes ACKS (JOINED's `takes_acks`).
        var takesAcks = false

        /// Takes the waiting handlers out, for the caller to resume outside the lock.
        mutating func wake() -> [CheckedContinuation<Void, Never>] {
            generation &+= 1
            guard !waiting.isEmpty else { return [] }
            defer { waiting = [:] }
            return Array(waiting.values)
        }
    }
    private let current: Mutex<Current>
    /// ACKs waiting to go out with the next ACKS, and whether an ACK's sender is at work: the
    /// first `ack()` to find none sends, and the ones that come meanwhile wait here; when its send
    /// is done, the first of them sends them all, its own included, and so on. One ACKS per send
    /// in progress, and no task of its own.
    private struct AckQueue {
        var waiting: [(delivery: HeldDelivery, socket: AsyncSocket, done: CheckedContinuation<Bool, any Error>)] = []
        var sending = false
    }
    private let acks = Mutex(AckQueue())
    private let leaving = Mutex(false)
    private let joinedNow = Mutex(false)

    /// Whether the consumer is a member now: the broker said JOINED and the connection has not
    /// been given up since (what a worker's readiness reports).
    public var isJoined: Bool { joinedNow.withLock { $0 } }

    public init(io: IOThread, endpoint: String, settings: Settings, logger: Logger) {
        self.io = io
        self.brokers = BrokerRotation(endpoint)
        self.settings = settings
        self.logger = logger
        current = Mutex(Current(session: MemberSession(joinTimeout: settings.joinTimeout)))
        (deliveries, deliveryInput) = AsyncStream.makeStream(of: GroupDelivery.self)
        (notices, noticeInput) = AsyncStream.makeStream(of: Notice.self, bufferingPolicy: .bufferingNewest(64))
    }

    /// Asks `run()` to leave the group: within a heartbeat it sends LEAVE (what the broker still
    /// counts as held by this member goes to other members at once), closes the socket with a
    /// short linger so settles already sent get out, and returns. For a graceful stop: settle
    /// what you hold first, then call this.
    public func leave() {
        leaving.withLock { $0 = true }
        stopWaiting()
    }

    /// From now on `mayAct(on:)` answers false at once for a delivery in doubt instead of waiting
    /// (a graceful shutdown: start nothing whose delivery may be elsewhere).
    public func stopWaiting() {
        changed { $0.waitingStopped = true }
    }

    private var isLeaving: Bool { leaving.withLock { $0 } }

    /// Whether a delivery belongs to the connection in use now: it came on it, or this member
    /// claimed it back when it rejoined. Any other was taken back by the broker (and may be at
    /// another member): do not start work on it.
    public func isCurrent(_ delivery: GroupDelivery) -> Bool {
        current.withLock { $0.session.isCurrent(busSeq: delivery.busSeq, attempt: delivery.attempt, cameOn: delivery.connection) }
    }

    /// Whether this member may start an effect for `delivery` now (`DeliveryStanding`).
    public func standing(of delivery: GroupDelivery) -> DeliveryStanding {
        current.withLock {
            $0.session.standing(busSeq: delivery.busSeq, attempt: delivery.attempt, cameOn: delivery.connection, now: .now)
        }
    }

    /// Call right before an effect that must not happen twice (a write to a back end with no
    /// uniqueness of its own). Returns true while the broker surely counts the delivery as this
    /// member's. When that is in doubt (the broker silent, or a new connection being joined) it
    /// waits until it is known: true when the broker is heard again or gives the delivery back
    /// in JOINED, false when it went to another member (then do nothing more for it: its settle
    /// is not sent) or the task is cancelled. Protocol section 15.3, **Fencing**.
    public func mayAct(on delivery: GroupDelivery) async -> Bool {
        while !Task.isCancelled {
            let (standing, id, seen) = current.withLock { state in
                state.nextWaiter += 1
                return (
                    state.session.standing(busSeq: delivery.busSeq, attempt: delivery.attempt, cameOn: delivery.connection, now: .now),
                    state.nextWaiter, state.generation
                )
            }
            switch standing {
            case .held: return true
            case .lost: return false
            case .inDoubt: if current.withLock({ $0.waitingStopped }) { return false }
            }
            await waitForChange(waiter: id, since: seen)
        }
        return false
    }

    /// Returns once something changed since generation `seen` (a message heard, a HEAD's echo, a
    /// JOINED, a connection given up, the end of waiting), or the task is cancelled.
    private func waitForChange(waiter id: Int, since seen: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = current.withLock { state -> Bool in
                    // Woken (or cancelled) since it looked: look again at once.
                    guard state.generation == seen, !Task.isCancelled else { return true }
                    state.waiting[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            current.withLock { $0.waiting.removeValue(forKey: id) }?.resume()
        }
    }

    /// Wakes the handlers waiting in `mayAct(on:)`.
    private func changed(_ body: (inout Current) -> Void) {
        let woken = current.withLock { state in
            body(&state)
            return state.wake()
        }
        for continuation in woken { continuation.resume() }
    }

    /// Joins and serves the connection until `leave()` or cancellation: heartbeats while idle, a
    /// new socket and a new JOIN when the broker falls silent for its liveness period or says
    /// this connection is not a member. On `leave()` it sends LEAVE, closes the socket and
    /// finishes `deliveries`; on cancellation it tries the same (a cancelled task may not get the
    /// LEAVE out; the broker then takes the work back after its liveness period).
    public func run() async throws {
        defer {
            deliveryInput.finish()
            noticeInput.finish()
            stopWaiting()
        }
        var reason = ""
        while !Task.isCancelled && !isLeaving {
            let socket: AsyncSocket
            let joined: JoinedHeader
            let endpoint = brokers.current
            do {
                (socket, joined) = try await connectAndJoin(endpoint)
            } catch is CancellationError {
                return
            } catch let error as ProtocolError
                where error.code == .forbidden || error.code == .groupConflict || error.code == .invalidHeader
            {
                throw error
            } catch {
                // No JOINED in time, or nothing took the JOIN: with several brokers, try the next.
                let next = brokers.failed(endpoint)
                logger.warning(
                    "could not join the group; trying again",
                    metadata: ["group": "\(settings.group)", "error": "\(error)", "endpoint": "\(next)"])
                let wait = current.withLock { $0.session.joinFailed() }
                try? await Task.sleep(for: wait)
                continue
            }
            noticeInput.yield(.joined(joined))
            joinedNow.withLock { $0 = true }
            let moveOn: Bool
            (reason, moveOn) = await serve(socket)
            if moveOn { brokers.failed(endpoint) }
            joinedNow.withLock { $0 = false }
            changed { $0.session.lost() }
            if Task.isCancelled || isLeaving {
                let leave = try? Envelope(command: .leave, header: LeaveHeader(group: settings.group))
                if let leave { try? await socket.send(leave.frames()) }
                await socket.close()
                return
            }
            await socket.close()
            noticeInput.yield(.rejoining(reason: reason))
            logger.notice("rejoining the group", metadata: ["group": "\(settings.group)", "reason": "\(reason)"])
        }
    }

    private func connectAndJoin(_ endpoint: String) async throws -> (AsyncSocket, JoinedHeader) {
        let options = settings.socketOptions
        // A short linger: the last settles and the LEAVE get out when the socket closes. Sends
        // give up after the join time: libzmq never reconnects a connection whose handshake the
        // broker refused (a key revoked, then allowed again), so a heartbeat waiting for it would
        // keep this loop from noticing the silence and joining again on a fresh socket.
        let socket = try await io.open(.dealer, linger: 200, sendTimeout: settings.joinTimeout) { socket in
            try socket.set(options + [.heartbeatInterval(milliseconds: 2000), .heartbeatTimeout(milliseconds: 6000)])
            try socket.connect(endpoint)
        }
        // What this member still works on from earlier connections: the broker gives each back
        // unless it went to another member meanwhile (protocol section 15.2, JOIN `holding`).
        let holding = current.withLock { $0.session.joining(now: .now) }
        let join = JoinHeader(
            group: settings.group, topics: settings.topics, credit: settings.credit, member: settings.member, start: settings.start,
            holding: holding, batch: max(1, min(settings.batch, settings.credit, JoinHeader.maximumBatch)))
        do {
            try await socket.send(join.envelope().frames())
            let deadline = current.withLock { $0.session.joinDeadline } ?? .now
            while ContinuousClock.now < deadline {
                guard let message = try await socket.receive(timeout: ContinuousClock.now.duration(to: deadline)) else { break }
                let envelope = try Envelope.decode(message.frames, limits: .groups)
                switch envelope.command {
                case .joined:
                    let joined = try envelope.decodeHeader(JoinedHeader.self)
                    let kept = Set(joined.held ?? [])
                    changed { state in
                        state.socket = socket
                        state.session.joined(joined, now: .now)
                        state.takesAcks = joined.takesAcks == true
                    }
                    if !holding.isEmpty {
                        logger.notice(
                            "rejoined holding deliveries",
                            metadata: [
                                "group": "\(settings.group)", "claimed": "\(holding.count)", "kept": "\(kept.count)",
                                "lost": "\(holding.count - kept.count)",
                            ])
                    }
                    return (socket, joined)
                case .error:
                    let error = try envelope.decodeHeader(ErrorHeader.self)
                    throw ProtocolError(error.code, error.message)
                default:
                    continue
                }
            }
            throw ProtocolError(.unavailable, "no JOINED from \(endpoint) within \(settings.joinTimeout)")
        } catch {
            await socket.close()
            throw error
        }
    }

    /// Serves one connection until the broker falls silent or disowns it; returns why it ended,
    /// and whether the broker is gone (silent, or the socket failed: with several brokers, the
    /// next JOIN goes to the next) rather than disowning this connection.
    private func serve(_ socket: AsyncSocket) async -> (reason: String, brokerGone: Bool) {
        let connection = current.withLock { $0.session.connection }
        while !Task.isCancelled && !isLeaving {
            switch current.withLock({ $0.session.tick(now: .now) }) {
            case .rejoin(let reason):
                return (reason, true)
            case .sendHeartbeat:
                // Its echo, when the HEAD brings it back, renews the fence (`standing`).
                let echo = current.withLock { $0.session.heartbeatGoingOut(now: .now) }
                try? await send(Envelope(command: .heartbeat, header: HeartbeatHeader(echo: echo).wireJSON()), connection: connection)
            case .wait(let until):
                let message: Message?
                do {
                    message = try await socket.receive(timeout: ContinuousClock.now.duration(to: until))
                } catch {
                    return ("the socket failed: \(error)", true)
                }
                if let message {
                    changed { $0.session.heard(now: .now) }
                    if let reason = handle(message, connection: connection) { return (reason, false) }
                }
            }
        }
        return (isLeaving ? "leaving" : "cancelled", false)
    }

    /// Handles one message from the broker; returns a reason to reconnect, or nil.
    private func handle(_ message: Message, connection: Int) -> String? {
        // A DELIVER of several deliveries (1.3) is handled as that many DELIVERs, in order.
        guard let envelopes = try? Envelope.decodeDeliveries(message.frames) else {
            logger.warning("unreadable message from the broker", metadata: ["group": "\(settings.group)"])
            return nil
        }
        for envelope in envelopes {
            if let reason = handle(envelope, connection: connection) { return reason }
        }
        return nil
    }

    private func handle(_ envelope: Envelope, connection: Int) -> String? {
        switch envelope.command {
        case .deliver:
            do {
                let header = try DeliverHeader.plain(envelope.header) ?? DeliverHeader(wire: envelope.header)
                let event = try EventHeader(journaled: envelope.parent)
                current.withLock { $0.session.delivered(busSeq: header.busSeq, attempt: header.attempt) }
                deliveryInput.yield(
                    GroupDelivery(
                        group: header.group, busSeq: header.busSeq, attempt: header.attempt, first: header.first,
                        deadline: header.deadline,
                        ackWait: .milliseconds(max(0, header.ackWaitMilliseconds)), header: event,
                        rawHeader: envelope.parent, metadata: envelope.metadata, content: envelope.content, consumer: self,
                        connection: connection))
            } catch {
                logger.error("a DELIVER could not be read; the broker will redeliver it", metadata: ["error": "\(error)"])
            }
        case .error:
            guard let error = try? envelope.decodeHeader(ErrorHeader.self) else { return nil }
            if error.code == .notMember { return "the broker says this connection is not a member (\(error.message))" }
            noticeInput.yield(.refused(code: error.code.rawValue, message: error.message))
            logger.notice("the broker refused a settle", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
        case .head:
            // A sign of life, counted by the caller; one that answers a HEARTBEAT renews the fence.
            if let echo = (try? envelope.decodeHeader(HeadHeader.self))?.echo { changed { $0.session.answered(echo: echo) } }
        default:
            break
        }
        return nil
    }

    /// A settle for a delivery of a connection that has been replaced: the broker took that
    /// delivery back when the old connection went, and delivers it again.
    public struct ReplacedConnection: Error, Sendable, CustomStringConvertible {
        public var description: String { "the delivery's connection was replaced and the broker gave the delivery to another member" }
    }

    /// Nothing was sent: no connection is joined (the consumer is joining again, or stopping).
    public struct NotJoined: Error, Sendable, CustomStringConvertible {
        public var description: String { "no connection to the broker is joined; nothing was sent" }
    }

    /// Sends on the connection a delivery belongs to; a settle for a delivery whose connection
    /// has been replaced (and that was not claimed back) is not sent, and throws
    /// `ReplacedConnection`. A final settle (not PROGRESS) ends the delivery's bookkeeping. One
    /// made while no connection is joined waits for the next JOINED, which claimed the delivery
    /// back, and goes out on the new connection if it was given back (else
    /// `ReplacedConnection`); it gives up with `NotJoined` once the consumer stops. A HEARTBEAT
    /// or PROGRESS then throws `NotJoined` at once.
    func send(_ envelope: Envelope, connection: Int, settling delivery: (busSeq: Int64, attempt: Int, final: Bool)? = nil) async throws {
        while !Task.isCancelled {
            let (sending, socket, id, seen, stopped, takesAcks) = current.withLock { state in
                state.nextWaiter += 1
                return (
                    state.session.sending(on: connection, settling: delivery), state.socket, state.nextWaiter, state.generation,
                    state.waitingStopped, state.takesAcks
                )
            }
            switch sending {
            case .send:
                guard let socket else { throw NotJoined() }
                if let delivery, envelope.command == .ack, takesAcks {
                    try await ack(HeldDelivery(busSeq: delivery.busSeq, attempt: delivery.attempt), on: socket)
                } else {
                    try await socket.send(envelope.frames())
                }
                return
            case .replaced:
                throw ReplacedConnection()
            case .notJoined:
                guard let delivery, delivery.final, !stopped else { throw NotJoined() }
                await waitForChange(waiter: id, since: seen)
            }
        }
        throw CancellationError()
    }

    /// Sends one ACK, with the others that are ready. If no ACK is being sent, this task sends
    /// its own and every one waiting (`AckQueue`); else it waits, and either its ACK goes out in
    /// the batch of the task at work, or that task hands it the turn and it sends the next batch.
    private func ack(_ delivery: HeldDelivery, on socket: AsyncSocket) async throws {
        let leads = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            let leads = acks.withLock { queue -> Bool in
                guard queue.sending else {
                    queue.sending = true
                    return true
                }
                queue.waiting.append((delivery, socket, continuation))
                return false
            }
            if leads { continuation.resume(returning: true) }
        }
        guard leads else { return }
        // This task's turn: its own ACK first, then every one waiting now, one message per socket
        // (a rejoin may have come between them) and at most 1000 pairs a message.
        var batch: [(delivery: HeldDelivery, socket: AsyncSocket, done: CheckedContinuation<Bool, any Error>?)] = [
            (delivery, socket, nil)
        ]
        batch += acks.withLock { queue in
            defer { queue.waiting = [] }
            return queue.waiting.map { ($0.delivery, $0.socket, $0.done) }
        }
        var failure: (any Error)?
        var start = 0
        while start < batch.count {
            var end = start + 1
            while end < batch.count, batch[end].socket == batch[start].socket, end - start < GroupAcks.maximumCount { end += 1 }
            let part = batch[start..<end]
            let envelope =
                part.count == 1
                ? Envelope(
                    command: .ack,
                    header: SettleHeader(
                        .ack, group: settings.group, busSeq: batch[start].delivery.busSeq, attempt: batch[start].delivery.attempt
                    ).wireJSON())
                : GroupAcks(group: settings.group, deliveries: part.map(\.delivery)).envelope()
            var sendError: (any Error)?
            do {
                try await batch[start].socket.send(envelope.frames())
            } catch {
                sendError = error
            }
            for entry in part {
                guard let done = entry.done else {
                    failure = sendError
                    continue
                }
                if let sendError { done.resume(throwing: sendError) } else { done.resume(returning: false) }
            }
            start = end
        }
        // The first ACK that came meanwhile sends the next batch; with none, the turn ends.
        let next = acks.withLock { queue -> CheckedContinuation<Bool, any Error>? in
            guard !queue.waiting.isEmpty else {
                queue.sending = false
                return nil
            }
            return queue.waiting.removeFirst().done
        }
        next?.resume(returning: true)
        if let failure { throw failure }
    }
}
