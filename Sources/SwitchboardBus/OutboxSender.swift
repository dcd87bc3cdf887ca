public import CoreMetrics
public import Foundation
public import Logging
import SwitchboardProtocol
import Synchronization
public import ZeroMQ

/// How delivery went, for the person at the kiosk and for tests.
public struct DeliveryReport: Sendable, Hashable {
    /// Events ACKed as new during this run.
    public var delivered = 0
    /// Events ACKed as already journaled (an earlier send had arrived).
    public var duplicates = 0
    /// Events refused for good (ERROR or a NACK that is not retryable); they stay in the
    /// outbox, marked, and are not resent.
    public var rejected = 0
    /// Events still waiting when the run ended.
    public var pending = 0
    /// The highest `bus_seq` ACKed during this run.
    public var lastBusSeq: Int64?
    /// Whether the broker answered at all during this run.
    public var brokerAnswered = false
    /// The last refusal or transport problem, for the person to read.
    public var lastProblem: String?
}

/// Delivers an outbox to the broker's ingest endpoint.
///
/// It keeps a window of unACKed events in flight, resends an event with the same `event_id`
/// when no answer comes within `resendAfter` (the broker deduplicates), and deletes an entry
/// from the outbox only on its ACK. A broker outage only delays delivery: sends wait (the
/// socket is `ZMQ_IMMEDIATE`, so nothing queues towards a dead connection) and resume on
/// reconnection.
public final class OutboxSender: Sendable {
    public struct Settings: Sendable {
        /// Events in flight without an ACK.
        public var window = 256
        /// Resend an event when its ACK has not come in this long.
        public var resendAfter: Duration = .seconds(2)
        /// How long to wait for an idle outbox to receive new events, when following.
        public var idlePoll: Duration = .milliseconds(200)
        /// Set on the socket before it connects: CURVE client keys for a secure broker.
        public var socketOptions: [SocketOption] = []
        /// How often a HEARTBEAT reports the outbox's depth and last ACK to the broker (which
        /// answers HEAD); the answers also tell `isConnected`.
        public var heartbeat: Duration = .seconds(5)

        public init() {}
    }

    public let outbox: Outbox
    public let endpoint: String
    public let settings: Settings
    private let io: IOThread
    private let logger: Logger
    private let metrics: Metrics
    private let contact = Mutex<(heard: ContinuousClock.Instant?, lastAck: Date?)>((nil, nil))

    /// - Parameter metrics: where the outbox metrics go (deploy/prometheus/README.md).
    public init(
        outbox: Outbox, io: IOThread, endpoint: String, settings: Settings = Settings(), logger: Logger,
        metrics: any MetricsFactory = MetricsSystem.factory
    ) {
        self.outbox = outbox
        self.io = io
        self.endpoint = endpoint
        self.settings = settings
        self.logger = logger
        self.metrics = Metrics(factory: metrics)
    }

    /// Whether the broker answered within the last three heartbeats: what a program's
    /// readiness reports for its outbox.
    public var isConnected: Bool {
        guard let heard = contact.withLock({ $0.heard }) else { return false }
        return heard.duration(to: .now) < settings.heartbeat * 3
    }

    /// When the broker last acknowledged an event of this outbox (during this process's life).
    public var lastAck: Date? { contact.withLock { $0.lastAck } }

    /// Sets the outbox-depth gauge from the outbox file (a program's admin server calls this
    /// before each scrape).
    public func updateDepth() async {
        guard let counts = try? await outbox.counts() else { return }
        metrics.depth.record(counts.pending)
        metrics.kept.record(counts.rejected)
    }

    struct Metrics: Sendable {
        let depth: Gauge
        let kept: Gauge
        let acked: Counter
        let lastAck: Gauge
        let factory: any MetricsFactory

        init(factory: any MetricsFactory) {
            self.factory = factory
            depth = Gauge(label: "switchboard_outbox_depth", factory: factory)
            kept = Gauge(label: "switchboard_outbox_refused", factory: factory)
            acked = Counter(label: "switchboard_outbox_acked_total", factory: factory)
            lastAck = Gauge(label: "switchboard_outbox_last_ack_timestamp_seconds", factory: factory)
        }

        /// The codes are the protocol's: a bounded set.
        func refused(_ code: String) {
            Counter(label: "switchboard_outbox_refused_total", dimensions: [("code", code)], factory: factory).increment()
        }
    }

    /// Delivers until the outbox has nothing pending, or until `deadline`.
    /// - Parameters:
    ///   - keepWaiting: asked when the outbox is empty and nothing is in flight; `true` keeps
    ///     the sender waiting for new events (a kiosk that keeps recording), `false` ends the run.
    ///   - progress: called after each batch of answers with the report so far.
    public func deliver(
        until deadline: ContinuousClock.Instant? = nil,
        keepWaiting: @escaping @Sendable () -> Bool = { false },
        progress: (@Sendable (DeliveryReport) -> Void)? = nil
    ) async throws -> DeliveryReport {
        let window = settings.window
        let socket = try await io.open(.dealer, linger: 0, inboxCapacity: window * 2) {
            [endpoint, options = settings.socketOptions] socket in
            // No ZMQ_IMMEDIATE: with it, libzmq 4.3 drops the pipe at once when the broker's
            // connection breaks, and we saw a break in the middle of a multipart ACK abort the
            // process in fq.cpp (`!_more`) when a broker stopped mid-stream. Without it, unsent events wait in the pipe for the reconnect,
            // and any that are lost are resent after `resendAfter` and deduplicated by the broker.
            try socket.set(
                [
                    .sendHighWaterMark(Int32(window * 2)), .receiveHighWaterMark(Int32(window * 4)),
                    .reconnectInterval(milliseconds: 100), .reconnectIntervalMax(milliseconds: 2000),
                    .heartbeatInterval(milliseconds: 2000), .heartbeatTimeout(milliseconds: 6000),
                    .maxMessageSize(1 << 20),
                ] + options)
            try socket.connect(endpoint)
        }
        var state = DeliveryState()
        do {
            try await run(socket: socket, state: &state, deadline: deadline, keepWaiting: keepWaiting, progress: progress)
        } catch {
            await socket.close()
            throw error
        }
        await socket.close()
        state.report.pending = try await outbox.counts().pending
        return state.report
    }

    private struct DeliveryState {
        var report = DeliveryReport()
        var nextHeartbeat: ContinuousClock.Instant = .now
        /// Loaded and sent, not yet answered, by `producer_seq`: when each is due for a resend.
        var inFlight: [Int64: (entry: OutboxEntry, due: ContinuousClock.Instant)] = [:]
        var lastLoaded: Int64 = 0
    }

    private func run(
        socket: AsyncSocket, state: inout DeliveryState, deadline: ContinuousClock.Instant?, keepWaiting: @Sendable () -> Bool,
        progress: (@Sendable (DeliveryReport) -> Void)?
    ) async throws {
        let versionFrame = Envelope.versionFrame()
        func frames(_ entry: OutboxEntry) -> [Data] {
            [versionFrame, Data("EVENT".utf8), entry.header, Data("{}".utf8), Data("{}".utf8), entry.content]
        }
        while true {
            try Task.checkCancellation()
            let now = ContinuousClock.now
            if let deadline, now >= deadline { return }
            if now >= state.nextHeartbeat {
                state.nextHeartbeat = now + settings.heartbeat
                try await sendHeartbeat(on: socket)
            }

            // Fill the window from the outbox, in sequence order.
            var sent: [Int64] = []
            var sendBlocked = false
            if state.inFlight.count < settings.window {
                let fresh = try await outbox.pending(after: state.lastLoaded, limit: settings.window - state.inFlight.count)
                for entry in fresh {
                    guard try await send(frames(entry), on: socket, within: settings.resendAfter) else {
                        sendBlocked = true
                        break
                    }
                    state.inFlight[entry.producerSeq] = (entry, .now + settings.resendAfter)
                    state.lastLoaded = entry.producerSeq
                    sent.append(entry.producerSeq)
                }
                if fresh.isEmpty && state.inFlight.isEmpty && !keepWaiting() { return }
            }
            // Resend what went unanswered.
            let due = state.inFlight.values.filter { $0.due <= .now }.sorted { $0.entry.producerSeq < $1.entry.producerSeq }
            for (entry, _) in due {
                guard try await send(frames(entry), on: socket, within: settings.resendAfter) else {
                    sendBlocked = true
                    break
                }
                state.inFlight[entry.producerSeq]?.due = .now + settings.resendAfter
                sent.append(entry.producerSeq)
            }
            if !due.isEmpty {
                logger.debug("resent unanswered events", metadata: ["count": "\(due.count)"])
            }
            try await outbox.markAttempted(sent)
            if sendBlocked {
                state.report.lastProblem = "the broker at \(endpoint) is not reachable"
            }

            // Wait for answers until the next resend falls due (or briefly, when idle).
            let nextDue = state.inFlight.values.map(\.due).min()
            var wait = nextDue.map { ContinuousClock.now.duration(to: $0) } ?? settings.idlePoll
            if let deadline { wait = min(wait, ContinuousClock.now.duration(to: deadline)) }
            wait = max(wait, .milliseconds(1))
            guard let first = try await socket.receive(timeout: wait) else { continue }
            var answers = [first]
            while answers.count < settings.window * 2, let more = socket.tryReceive() { answers.append(more) }
            try await handle(answers, state: &state)
            progress?(state.report)
        }
    }

    /// Reports the outbox's depth and last ACK; the broker answers HEAD. Skipped while the
    /// broker cannot be reached (the socket would block).
    private func sendHeartbeat(on socket: AsyncSocket) async throws {
        let depth = try await outbox.counts().pending
        metrics.depth.record(depth)
        let lastAck = contact.withLock { $0.lastAck }
        let header = HeartbeatHeader(
            producer: outbox.producer, outbox: Int64(depth), lastAckMilliseconds: lastAck.map { Int64($0.timeIntervalSince1970 * 1000) })
        let frames = [Envelope.versionFrame(), Data("HEARTBEAT".utf8), header.wireJSON(), Envelope.emptyObject, Envelope.emptyObject, Envelope.emptyObject]
        _ = try await send(frames, on: socket, within: .milliseconds(100))
    }

    /// Sends unless the socket stays blocked for `within` (broker unreachable).
    private func send(_ frames: [Data], on socket: AsyncSocket, within: Duration) async throws -> Bool {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await socket.send(frames)
                    return true
                } catch is CancellationError {
                    return false
                }
            }
            group.addTask {
                try? await Task.sleep(for: within)
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            // A send that completed as the timer fired still counts as sent.
            var sent = first
            while let next = try await group.next() { sent = sent || next }
            return sent
        }
    }

    private func handle(_ answers: [Message], state: inout DeliveryState) async throws {
        var acked: [Int64] = []
        contact.withLock { $0.heard = .now }
        for answer in answers {
            state.report.brokerAnswered = true
            let envelope: Envelope
            do {
                envelope = try Envelope.decode(answer.frames)
            } catch {
                logger.warning("unreadable answer from the broker", metadata: ["error": "\(error)"])
                continue
            }
            switch envelope.command {
            case .ack:
                guard let ack = try? envelope.decodeHeader(AckHeader.self) else { continue }
                // Every ACK deletes its entry, even one no longer in flight here (an answer to a
                // send made before a restart, or to a resend).
                acked.append(ack.producerSeq)
                state.inFlight.removeValue(forKey: ack.producerSeq)
                if ack.duplicate { state.report.duplicates += 1 } else { state.report.delivered += 1 }
                state.report.lastBusSeq = max(state.report.lastBusSeq ?? 0, ack.busSeq)
            case .nack:
                guard let nack = try? envelope.decodeHeader(NackHeader.self) else { continue }
                state.report.lastProblem = "\(nack.code.rawValue): \(nack.reason)"
                if nack.retryable {
                    // Try again after the usual interval.
                    state.inFlight[nack.producerSeq]?.due = .now + settings.resendAfter
                } else {
                    state.inFlight.removeValue(forKey: nack.producerSeq)
                    try await outbox.reject(nack.producerSeq, reason: "\(nack.code.rawValue): \(nack.reason)")
                    state.report.rejected += 1
                    metrics.refused(nack.code.rawValue)
                    logger.error(
                        "event refused by the broker",
                        metadata: ["event_id": "\(nack.eventID)", "code": "\(nack.code.rawValue)", "reason": "\(nack.reason)"])
                }
            case .error:
                guard let error = try? envelope.decodeHeader(ErrorHeader.self) else { continue }
                state.report.lastProblem = "\(error.code.rawValue): \(error.message)"
                if let ref = error.ref, let held = state.inFlight.first(where: { $0.value.entry.eventID == ref }) {
                    state.inFlight.removeValue(forKey: held.key)
                    try await outbox.reject(held.key, reason: "\(error.code.rawValue): \(error.message)")
                    state.report.rejected += 1
                    metrics.refused(error.code.rawValue)
                }
                logger.error("the broker refused a message", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
            default:
                continue
            }
        }
        let deleted = try await outbox.acknowledge(acked)
        if !acked.isEmpty {
            let now = Date()
            contact.withLock { $0.lastAck = now }
            if deleted > 0 { metrics.acked.increment(by: deleted) }
            metrics.lastAck.record(now.timeIntervalSince1970)
        }
    }
}
