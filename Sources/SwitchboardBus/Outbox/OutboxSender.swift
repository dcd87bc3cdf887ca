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
    /// Events numbered again after a `conflict` (the outbox's numbering was behind the
    /// journal's: a restored backup) and sent anew.
    public var renumbered = 0
    /// Events still waiting when the run ended.
    public var pending = 0
    /// The highest `bus_seq` ACKed during this run.
    public var lastBusSeq: Int64?
    /// Whether the broker answered at all during this run.
    public var brokerAnswered = false
    /// The last refusal or transport problem, for the person to read.
    public var lastProblem: String?
    /// Why the broker last asked for a resend (a retryable NACK: its journal's disk is full…),
    /// until an ACK came after it; nil when the last answer was an ACK.
    public var retryReason: String?
}

/// Delivers an outbox to the broker's ingest endpoint.
///
/// It keeps a window of unACKed events in flight, resends an event with the same `event_id`
/// when no answer comes within `resendAfter` (the broker deduplicates), and deletes an entry
/// from the outbox only on its ACK. A broker outage only delays delivery: sends wait in the
/// socket's pipe for the reconnection (it is not `ZMQ_IMMEDIATE`; `deliver` says why), and
/// whatever a broken connection lost is resent after `resendAfter`.
///
/// The class is the I/O (outbox file, socket, metrics, log); the rules it follows are
/// `OutboxDelivery`'s, which decides without I/O and is tested without sockets.
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
    /// The broker's ingest endpoint, or several (`BrokerRotation`), as given.
    public let endpoint: String
    /// Which of them a fresh socket connects to.
    private let brokers: BrokerRotation
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
        self.brokers = BrokerRotation(endpoint)
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
        // An acknowledgement deletes its entries, then counts them as acked. A count taken while
        // one is under way may still hold entries the acked counter is about to include: retry
        // when one finished during the count, and leave out the ones still under way, so waiting
        // plus acknowledged never exceeds what was recorded.
        for _ in 0..<3 {
            let finishedBefore = acknowledging.withLock { $0.finished }
            guard let counts = try? await outbox.counts() else { return }
            let (finished, underWay) = acknowledging.withLock { ($0.finished, $0.underWay) }
            guard finished == finishedBefore else { continue }
            metrics.depth.record(max(0, counts.pending - underWay))
            metrics.kept.record(counts.rejected)
            return
        }
    }

    /// Entries being deleted as acknowledged and not yet counted, and acknowledgements finished.
    private let acknowledging = Mutex<(underWay: Int, finished: Int)>((0, 0))

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
        var delivery = OutboxDelivery(
            settings: .init(
                window: window, resendAfter: settings.resendAfter, idlePoll: settings.idlePoll, heartbeat: settings.heartbeat),
            endpoint: endpoint, deadline: deadline, start: .now)
        // One socket until sends stay blocked with nothing heard on it; then a fresh one. libzmq
        // never reconnects a connection whose handshake the broker refused (a key revoked, then
        // allowed again), so only a new socket gets in; after a long outage it also leaves behind
        // the resends that piled up in the old socket's pipe.
        //
        // With several brokers, a socket left for the next broker before it heard anything
        // counts; after a whole round of the list with none heard, the silence that moves the
        // sender on doubles (up to 16 times): a broker that is only slow (a loaded machine, a
        // long commit) answers after the sender has left, and a fixed limit would leave every
        // broker in turn, forever. Anything heard starts again at once.
        var unheard = 0
        while true {
            let endpoint = brokers.current
            let socket = try await io.open(.dealer, linger: 0, inboxCapacity: window * 2) {
                [options = settings.socketOptions] socket in
                // No ZMQ_IMMEDIATE: with it, libzmq 4.3 drops the pipe at once when the broker's
                // connection breaks, and we saw a break in the middle of a multipart ACK abort the
                // process in fq.cpp (`!_more`) when a broker stopped mid-stream. Without it, unsent
                // events wait in the pipe for the reconnect, and any that are lost are resent after
                // `resendAfter` and deduplicated by the broker.
                try socket.set(
                    [
                        .sendHighWaterMark(Int32(window * 2)), .receiveHighWaterMark(Int32(window * 4)),
                        .reconnectInterval(milliseconds: 100), .reconnectIntervalMax(milliseconds: 2000),
                        .heartbeatInterval(milliseconds: 2000), .heartbeatTimeout(milliseconds: 6000),
                        .maxMessageSize(1 << 20),
                    ] + options)
                try socket.connect(endpoint)
            }
            let ending: RunEnding
            let patience = 1 << min(unheard / brokers.endpoints.count, 4)
            do {
                ending = try await run(
                    socket: socket, delivery: &delivery, patience: patience, keepWaiting: keepWaiting, progress: progress)
            } catch {
                await socket.close()
                throw error
            }
            await socket.close()
            guard case .blocked(let heard) = ending else { break }
            unheard = heard ? 0 : unheard + 1
            // With several brokers, the fresh socket connects to the next; what was in flight
            // goes out on it at once.
            delivery.connectionReplaced(at: .now)
            let next = brokers.failed(endpoint)
            logger.debug("sends stayed blocked; going on with a fresh socket", metadata: ["endpoint": "\(endpoint)", "next": "\(next)"])
        }
        var report = delivery.report
        report.pending = try await outbox.counts().pending
        return report
    }

    /// How one socket's part of a run ended.
    private enum RunEnding {
        case finished
        /// Sends stayed blocked, or (several brokers) the broker fell silent; `heard`: whether
        /// this socket heard the broker at all.
        case blocked(heard: Bool)
    }

    /// The I/O of a run on one socket: loads, sends and receives, and carries out what `delivery`
    /// decides, until the run is over (`finished`) or sends stay blocked while the socket hears
    /// nothing for two resend periods (`blocked`: the caller goes on with a fresh socket). With
    /// several brokers, the silences that move it on are `patience` times the settings'.
    private func run(
        socket: AsyncSocket, delivery: inout OutboxDelivery, patience: Int, keepWaiting: @Sendable () -> Bool,
        progress: (@Sendable (DeliveryReport) -> Void)?
    ) async throws -> RunEnding {
        // 1.1: this sender reads ACKS, one per commit, instead of an ACK per event (section 6).
        let versionFrame = Envelope.versionFrame(.batchedAcks)
        // When this socket last heard the broker (or was opened): a blocked send on a socket that
        // still hears ACKs is a busy broker, not a dead connection.
        var heardHere = ContinuousClock.now
        var heardAny = false
        func frames(_ entry: OutboxEntry) -> [Data] {
            [versionFrame, Data("EVENT".utf8), entry.header, Data("{}".utf8), Data("{}".utf8), entry.content]
        }
        while true {
            try Task.checkCancellation()
            guard let round = delivery.beginRound(at: .now) else { return .finished }
            if round.heartbeat { try await sendHeartbeat(on: socket) }
            var fresh: [OutboxEntry] = []
            if let load = round.load { fresh = try await outbox.pending(after: load.after, limit: load.limit) }
            guard delivery.loaded(fresh, keepWaiting: keepWaiting(), at: .now) == .proceed else { return .finished }

            var sends: [OutboxDelivery.Send] = []
            while let next = delivery.nextSend() { sends.append(next) }
            var blocked = false
            if !sends.isEmpty {
                let completed = try await send(sends.map { frames($0.entry) }, on: socket, stallLimit: settings.resendAfter)
                for (send, instant) in zip(sends, completed) { delivery.sendCompleted(send, at: instant) }
                if completed.count < sends.count {
                    delivery.sendBlocked()
                    blocked = true
                }
            }
            let sent = delivery.endSends()
            if sent.resent > 0 {
                logger.debug("resent unanswered events", metadata: ["count": "\(sent.resent)"])
            }
            do {
                try await outbox.markAttempted(sent.producerSeqs)
            } catch {
                // The count of sends only informs people; a full disk must not stop delivery.
                logger.warning("could not count the sends in the outbox", metadata: ["error": "\(error)"])
            }
            // What came while this task waited for its turn is heard before any silence is
            // judged: on a starved pool the answers can sit in the inbox longer than the limits
            // below, and the socket would be left with them unread.
            if let early = socket.tryReceive() {
                try await heard(early)
                continue
            }
            // Nothing heard on this socket while sends stay blocked, for as long as the kiosk
            // calls the broker unreachable (three heartbeats; HEAD answers each) and at least two
            // resend periods: its connection is gone (or was refused, which libzmq never
            // retries). Not sooner: a broker starved of CPU for seconds is not gone, and a fresh
            // socket would drop the ACKs on their way and make it resend everything in flight.
            if blocked && heardHere.duration(to: .now) >= max(settings.resendAfter * 2, settings.heartbeat * 3) {
                return .blocked(heard: heardAny)
            }
            // With several brokers (a pair), events waiting for an answer while this socket has
            // heard nothing for two resend periods mean the broker is gone (killed, deposed, cut
            // off): its sends do not block (they wait in the pipe for a reconnect), so the rule
            // above would wait for a full pipe. Move on to the next broker now.
            if brokers.rotates && !delivery.inFlight.isEmpty && heardHere.duration(to: .now) >= settings.resendAfter * 2 * patience {
                return .blocked(heard: heardAny)
            }
            // Idle, with several brokers: heartbeats unanswered for three heartbeats (HEAD answers
            // each) mean a standby or a dead broker; the program would report itself unready
            // until it had something to send.
            if brokers.rotates && heardHere.duration(to: .now) >= settings.heartbeat * 3 * patience { return .blocked(heard: heardAny) }

            guard let first = try await socket.receive(timeout: delivery.wait(at: .now)) else { continue }
            try await heard(first)
        }

        /// `first` and whatever else is waiting: the broker is heard; its answers are carried out.
        func heard(_ first: Message) async throws {
            var messages = [first]
            while messages.count < settings.window * 2, let more = socket.tryReceive() { messages.append(more) }
            heardHere = .now
            heardAny = true
            contact.withLock { $0.heard = heardHere }
            let actions = delivery.received(messages.map(decode), at: .now)
            try await carryOut(actions)
            progress?(delivery.report)
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
        let frames = [
            Envelope.versionFrame(), Data("HEARTBEAT".utf8), header.wireJSON(), Envelope.emptyObject, Envelope.emptyObject,
            Envelope.emptyObject,
        ]
        _ = try await send([frames], on: socket, stallLimit: .milliseconds(100))
    }

    /// Sends `messages` in order and returns when each one went out (libzmq queued it). Stops
    /// early when one does not go out within `stallLimit`: the socket stays at its high-water
    /// mark, so the broker is not reachable; that message is withdrawn, and the rest not sent.
    ///
    /// The limit is each send's deadline on the I/O thread, not a timer task: a watchdog task per
    /// batch (one per check-in when they come one at a time) cost a task group, a second task and
    /// a timer that fired long after the batch, wanted or not; two tasks per message before that
    /// made a round of 256 sends take seconds on a busy cooperative pool (two threads).
    private func send(_ messages: [[Data]], on socket: AsyncSocket, stallLimit: Duration) async throws -> [ContinuousClock.Instant] {
        var completed: [ContinuousClock.Instant] = []
        completed.reserveCapacity(messages.count)
        for frames in messages {
            do {
                guard try await socket.send(frames, timeout: stallLimit) else { break }
            } catch is CancellationError {
                break
            }
            completed.append(.now)
        }
        return completed
    }

    /// An answer as the delivery rules take it; one it cannot read only shows the broker is there.
    private func decode(_ message: Message) -> OutboxDelivery.Answer {
        let parsed: ParsedEnvelope
        do {
            parsed = try Envelope.parse(message.frames)
        } catch {
            logger.warning("unreadable answer from the broker", metadata: ["error": "\(error)"])
            return .other
        }
        let envelope = parsed.envelope
        switch envelope.command {
        case .ack: return (try? envelope.decodeHeader(AckHeader.self)).map { .ack($0) } ?? .other
        case .acks:
            do {
                return .acks(try Acks(parsed))
            } catch {
                logger.warning("unreadable answer from the broker", metadata: ["error": "\(error)"])
                return .other
            }
        case .nack: return (try? envelope.decodeHeader(NackHeader.self)).map { .nack($0) } ?? .other
        case .error: return (try? envelope.decodeHeader(ErrorHeader.self)).map { .error($0) } ?? .other
        default: return .other
        }
    }

    /// Numbers again the entries a `conflict` named, marks refused entries, deletes ACKed ones,
    /// and keeps the metrics and `lastAck` in step.
    private func carryOut(_ actions: OutboxDelivery.Actions) async throws {
        for conflict in actions.renumber {
            guard let entry = try await outbox.renumber(conflict.producerSeq, eventID: conflict.eventID, above: conflict.producerHead)
            else { continue }
            logger.warning(
                "event numbered again: the broker holds this producer's events up to a higher number (was the outbox restored from a backup?)",
                metadata: [
                    "event_id": "\(conflict.eventID)", "producer_seq": "\(conflict.producerSeq)",
                    "producer_head": "\(conflict.producerHead)",
                    "new_producer_seq": "\(entry.producerSeq)",
                ])
        }
        for refusal in actions.refuse {
            do {
                try await outbox.reject(refusal.producerSeq, reason: refusal.reason)
            } catch {
                // Left pending: a later run sends it again and the broker refuses it again.
                logger.warning("could not mark a refused entry in the outbox", metadata: ["error": "\(error)"])
            }
            metrics.refused(refusal.code)
            logger.error(
                "event refused by the broker",
                metadata: ["event_id": "\(refusal.eventID)", "code": "\(refusal.code)", "reason": "\(refusal.detail)"])
        }
        for error in actions.unmatchedErrors {
            logger.error("the broker refused a message", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
        }
        guard !actions.acknowledge.isEmpty else { return }
        let count = actions.acknowledge.count
        acknowledging.withLock { $0.underWay += count }
        let deleted: Int
        do {
            deleted = try await outbox.acknowledge(actions.acknowledge)
        } catch {
            // The broker has them; an entry left here (a full disk cannot even record a delete) is
            // sent again by a later run and answered as a duplicate, then deleted.
            acknowledging.withLock { $0.underWay -= count }
            logger.warning(
                "could not delete acknowledged entries from the outbox; a later run sends them again (duplicates)",
                metadata: ["count": "\(count)", "error": "\(error)"])
            return
        }
        let now = Date()
        contact.withLock { $0.lastAck = now }
        if deleted > 0 { metrics.acked.increment(by: deleted) }
        acknowledging.withLock {
            $0.underWay -= count
            $0.finished += 1
        }
        metrics.lastAck.record(now.timeIntervalSince1970)
    }
}
