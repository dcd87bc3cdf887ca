// The broker's event plane: ingest, journal, fan-out and replay on one thread.
//
// All three sockets and the journal live on a single dedicated thread that sleeps in
// `zmq_poll`. That is deliberate: libzmq sockets must stay on one thread, SQLite writes are
// serial anyway, and a single writer makes `bus_seq` assignment and ACK ordering trivially
// correct. Throughput comes from group commit: every wake-up drains up to `batch_limit`
// waiting EVENTs, journals them in one transaction (one fsync), and only then ACKs them and
// publishes them. A slow subscriber can never stall ingest: the fan-out drops for it at its
// high-water mark, and it recovers through HEAD and replay like any late joiner.

import Foundation
public import Logging
public import SwitchboardProtocol
import SwitchboardSecurity
import Synchronization
public import ZeroMQ

/// Counters a running broker keeps; read with `Broker.statistics`.
public struct BrokerStatistics: Sendable, Hashable {
    /// Events newly journaled.
    public var journaled: Int64 = 0
    /// EVENTs that were already journaled (ACKed again with their first `bus_seq`).
    public var duplicates: Int64 = 0
    /// NACKs sent (conflict, unavailable, shutting down).
    public var nacks: Int64 = 0
    /// ERRORs sent for malformed input, by code.
    public var errors: [ProtocolError.Code: Int64] = [:]
    /// Group commits (one transaction each).
    public var commits: Int64 = 0
    /// FETCHes answered.
    public var fetches: Int64 = 0
    /// The journal's head and first retained `bus_seq`.
    public var head: Int64 = 0
    public var first: Int64 = 1
    /// Events deleted by retention.
    public var pruned: Int64 = 0
    /// Events in the journal, and their stored bytes (what `retention.max_bytes` bounds).
    public var journalCount: Int64 = 0
    public var journalBytes: Int64 = 0
}

/// The endpoints a started broker is bound to (with real ports where `*` was asked for).
/// A started broker writes them to `endpoints.json` in its data directory, so programs on the
/// same machine (and tests) can find it.
public struct BrokerEndpoints: Sendable, Hashable, Codable {
    public var ingest: String
    public var fanout: String
    public var replay: String
    /// The Majordomo endpoint of the service plane.
    public var service: String

    public init(ingest: String, fanout: String, replay: String, service: String) {
        self.ingest = ingest
        self.fanout = fanout
        self.replay = replay
        self.service = service
    }

    public static func read(from path: String) throws -> BrokerEndpoints {
        try JSONDecoder().decode(BrokerEndpoints.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

/// The durable event broker. `start()` opens the journal, binds the endpoints and starts the
/// broker thread; `stop()` asks it to finish and waits. Safe to call from any task.
public final class Broker: Sendable {
    public let configuration: BrokerConfiguration
    private let logger: Logger
    private let context: Context
    private let ownsContext: Bool
    private let wakeUp: WakeUpSignal
    private let state = Mutex(State())
    /// The service plane, on its own thread and socket.
    public let services: ServiceBroker
    /// CURVE keys, allow-list and ZAP decisions; nil when the broker runs without security.
    public let security: BrokerSecurity?
    private let zap = Mutex<ZAPHandler?>(nil)

    private struct State {
        var statistics = BrokerStatistics()
        var stopRequested = false
        /// Rebind every endpoint (closing every connection) at the next wake-up.
        var rebindRequested = false
        var finished = false
        var failure: String?
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// - Parameter context: the ZeroMQ context to use (the same as a ZAP handler's, when one
    ///   is used); by default the broker makes and terminates its own.
    public init(configuration: BrokerConfiguration, logger: Logger, context: Context? = nil) throws {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        self.ownsContext = context == nil
        let context = try context ?? Context()
        self.context = context
        self.wakeUp = try WakeUpSignal()
        let security = try configuration.securityKey.map { key in
            try BrokerSecurity(secretFile: key, certificates: configuration.securityCertificates ?? "", logger: logger)
        }
        self.security = security
        security?.attach(wakeUp)
        self.services = try ServiceBroker(settings: configuration.serviceSettings, logger: logger, context: context, security: security)
    }

    public var statistics: BrokerStatistics { state.withLock { $0.statistics } }

    /// Why the broker thread stopped on its own, if it did (journal failure, socket failure).
    public var failure: String? { state.withLock { $0.failure } }

    /// Opens the journal, binds every endpoint and starts serving.
    /// - Returns: the bound endpoints.
    /// - Throws: when the data directory, the journal or an endpoint cannot be set up; nothing
    ///   keeps running then.
    public func start() async throws -> BrokerEndpoints {
        let serviceEndpoint: String
        do {
            try configuration.preparePrivateFiles()
            if let security {
                // Before any server socket: with no handler, CURVE servers would accept any key.
                let handler = try ZAPHandler.start(context: context, authenticate: security.authenticate)
                zap.withLock { $0 = handler }
            }
            serviceEndpoint = try await services.start()
        } catch {
            markFinished(failure: nil)
            throw error
        }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<BrokerEndpoints, any Error>) in
            let thread = Thread { [self] in
                let core: BrokerCore
                do {
                    core = try BrokerCore(broker: self, serviceEndpoint: serviceEndpoint)
                } catch {
                    markFinished(failure: nil)
                    continuation.resume(throwing: error)
                    return
                }
                do {
                    try core.endpoints.write(to: configuration.endpointsPath)
                } catch {
                    logger.warning(
                        "could not write the endpoints file", metadata: ["path": "\(configuration.endpointsPath)", "error": "\(error)"])
                }
                continuation.resume(returning: core.endpoints)
                let failure = core.run()
                markFinished(failure: failure)
            }
            thread.name = "broker"
            thread.stackSize = 4 << 20
            thread.start()
        }
    }

    /// Asks the broker to stop: it finishes the batch in hand (so every ACKed event is on disk),
    /// closes its sockets and the journal. Returns at once; `waitUntilStopped()` waits.
    public func requestStop() {
        state.withLock { $0.stopRequested = true }
        wakeUp.signal()
        services.requestStop()
    }

    /// Waits until the broker thread has exited (or returns at once if it has).
    public func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if !state.finished { state.finishWaiters.append(continuation) }
                return state.finished
            }
            if done { continuation.resume() }
        }
        await services.waitUntilStopped()
    }

    /// Closes every connection to every endpoint: the endpoints are unbound and bound again, so
    /// peers reconnect and pass the ZAP handler anew. Used when the allow-list loses a key: a
    /// revoked principal's open connections end, and its reconnection is refused.
    public func dropAllConnections() {
        state.withLock { $0.rebindRequested = true }
        wakeUp.signal()
        services.dropAllConnections()
    }

    /// Stops the ZAP handler while the endpoints stay up. Only tests use it: they show that the
    /// broker then refuses connections (ZAP enforcement) instead of accepting any key.
    func stopAuthenticator() {
        zap.withLock { handler in
            handler?.stop()
            handler = nil
        }
    }

    /// `requestStop()` then `waitUntilStopped()`.
    public func stop() async {
        requestStop()
        await waitUntilStopped()
    }

    private func markFinished(failure: String?) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = true
            state.failure = failure
            defer { state.finishWaiters = [] }
            return state.finishWaiters
        }
        // The event plane is down (stopped, or failed on its own): the service plane goes too,
        // and has closed its socket before the context is terminated.
        services.requestStop()
        if ownsContext { services.waitUntilStoppedBlocking() }
        zap.withLock { handler in
            handler?.stop()
            handler = nil
        }
        if ownsContext { context.terminate() }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: Access for the core (on the broker thread)

    fileprivate var stopRequested: Bool { state.withLock { $0.stopRequested } }
    fileprivate func takeRebindRequest() -> Bool {
        state.withLock { state in
            defer { state.rebindRequested = false }
            return state.rebindRequested
        }
    }
    fileprivate func update(_ body: (inout BrokerStatistics) -> Void) { state.withLock { body(&$0.statistics) } }
    fileprivate var loggerForCore: Logger { logger }
    fileprivate var contextForCore: Context { context }
    fileprivate var wakeUpForCore: WakeUpSignal { wakeUp }
}

/// Everything the broker thread owns. Not `Sendable`: made and used on the broker thread only.
private final class BrokerCore {
    let broker: Broker
    let configuration: BrokerConfiguration
    let logger: Logger
    let journal: Journal
    let ingest: Socket
    let fanout: Socket
    let replay: Socket
    let endpoints: BrokerEndpoints
    let poller = Poller()
    let versionFrame = Envelope.versionFrame()
    var nextHeartbeat: ContinuousClock.Instant
    var nextRetention: ContinuousClock.Instant
    var refusalLog = RateLimiter(perSecond: 20)
    /// The broker's own producer sequence (for `security.refused` events) and session.
    var brokerSeq: Int64 = 0
    let brokerSession = UUIDv7.string()

    init(broker: Broker, serviceEndpoint: String) throws {
        self.broker = broker
        self.configuration = broker.configuration
        self.logger = broker.loggerForCore
        let context = broker.contextForCore
        journal = try Journal(path: configuration.journalPath)
        let hwm = configuration.highWaterMark
        let common: [SocketOption] = [
            .sendHighWaterMark(hwm), .receiveHighWaterMark(hwm), .maxMessageSize(configuration.maxFrameBytes),
            .heartbeatInterval(milliseconds: 5000), .heartbeatTimeout(milliseconds: 15000),
            .heartbeatTTL(milliseconds: 15000),
        ]
        let security = broker.security
        ingest = try context.socket(.router, linger: 2000)
        try ingest.set(common + [.routerMandatory(true)] + (security?.serverOptions(.ingest) ?? []))
        try ingest.bind(configuration.ingestEndpoint)
        fanout = try context.socket(.xpublisher, linger: 1000)
        // No XPUB_NODROP: a slow subscriber must never stall ingest; it sees the gap in
        // HEAD and fetches from the journal (protocol/README.md, "Fan-out").
        try fanout.set(common + [.xpubNoDrop(false)] + (security?.serverOptions(.fanout) ?? []))
        replay = try context.socket(.router, linger: 1000)
        try replay.set(common + [.routerMandatory(true)] + (security?.serverOptions(.replay) ?? []))
        nextHeartbeat = .now
        nextRetention = .now
        try fanout.set(.xpubWelcomeMessage(try Self.welcome(journal: journal, configuration: configuration)))
        try fanout.bind(configuration.fanoutEndpoint)
        try replay.bind(configuration.replayEndpoint)
        endpoints = BrokerEndpoints(
            ingest: try ingest.lastEndpoint(), fanout: try fanout.lastEndpoint(), replay: try replay.lastEndpoint(),
            service: serviceEndpoint)
        poller.add(fileDescriptor: broker.wakeUpForCore.fileDescriptor)
        poller.add(ingest)
        poller.add(replay)
        poller.add(fanout)
        broker.update {
            $0.head = journal.head
            $0.first = journal.first
            $0.journalCount = journal.count
            $0.journalBytes = journal.storedBytes
        }
        logger.info(
            "broker started",
            metadata: [
                "ingest": "\(endpoints.ingest)", "fanout": "\(endpoints.fanout)", "replay": "\(endpoints.replay)",
                "journal": "\(journal.path)", "head": "\(journal.head)", "first": "\(journal.first)",
                "broker_id": "\(journal.brokerID)",
            ])
    }

    static func welcome(journal: Journal, configuration: BrokerConfiguration) throws -> Data {
        try Welcome(
            broker: journal.brokerID, head: journal.head, first: journal.first,
            heartbeatMilliseconds: Int(configuration.heartbeat.milliseconds)
        ).frame()
    }

    /// Serves until asked to stop; returns a failure description if it had to stop on its own.
    func run() -> String? {
        var failure: String?
        while !broker.stopRequested {
            let now = ContinuousClock.now
            if now >= nextHeartbeat {
                heartbeat()
                nextHeartbeat = now + configuration.heartbeat
            }
            if now >= nextRetention {
                let behind = retention()
                nextRetention = .now + (behind ? .milliseconds(200) : configuration.retentionInterval)
            }
            // +1: never poll for 0 ms just before a timer is due (that would spin).
            let wait = max(0, ContinuousClock.now.duration(to: min(nextHeartbeat, nextRetention)).milliseconds + 1)
            do {
                try poller.poll(timeout: Int(wait))
            } catch {
                failure = "poll failed: \(error)"
                break
            }
            if poller.returned(0).contains(.readable) { broker.wakeUpForCore.drain() }
            if broker.takeRebindRequest() { rebind([ingest, fanout, replay], [endpoints.ingest, endpoints.fanout, endpoints.replay]) }
            if let notices = broker.security?.takeNotices(), !notices.isEmpty { journal(notices) }
            do {
                if poller.returned(1).contains(.readable) { try serveIngest() }
                if poller.returned(2).contains(.readable) { serveReplay() }
                if poller.returned(3).contains(.readable) { drainSubscriptions() }
            } catch {
                failure = "\(error)"
                logger.critical("broker stopping: \(error)")
                break
            }
        }
        ingest.close()
        fanout.close()
        replay.close()
        do {
            try journal.close()
        } catch {
            logger.error("closing the journal failed: \(error)")
        }
        logger.info("broker stopped", metadata: ["head": "\(journal.head)"])
        return failure
    }

    /// What a principal may not replay: `dlq.*` unless it is an admin (no security: nothing hidden).
    static func replayExclusions(security: BrokerSecurity?, principal: String?) -> [String] {
        guard let security else { return [] }
        return security.role(of: principal) == .admin ? [] : ["dlq."]
    }

    /// Journals refusals as `security.refused` events (producer `broker`), and publishes them.
    /// Their `producer_seq` follows the clock (×1000), so it never repeats across restarts, even
    /// after retention removed the earlier ones.
    func journal(_ notices: [BrokerSecurity.Notice]) {
        var batch: [PendingEvent] = []
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for notice in notices {
            brokerSeq = max(brokerSeq + 1, now * 1000)
            let header = EventHeader(
                type: "security.refused", producer: "broker", producerSeq: brokerSeq, schema: "security.refused/1", session: brokerSession)
            guard let raw = try? WireJSON.encode(header), case .object(let fields)? = JSONValue.parse(raw) else { continue }
            var content: [String: JSONValue] = [
                "kind": .string(notice.kind), "reason": .string(notice.reason), "time": .string(notice.time),
            ]
            if let principal = notice.principal { content["principal"] = .string(principal) }
            if let endpoint = notice.endpoint { content["endpoint"] = .string(endpoint) }
            if notice.suppressed > 0 { content["suppressed"] = .integer(Int64(notice.suppressed)) }
            var writer = JSONWriter()
            writer.value(.object(content))
            batch.append(
                PendingEvent(
                    header: header, headerFields: fields, rawHeader: raw, parent: Envelope.emptyObject, metadata: Envelope.emptyObject,
                    content: writer.data, receivedAt: now))
        }
        do {
            for (index, outcome) in try journal.append(batch).enumerated() {
                if case .stored(_, let stored) = outcome { publish(type: "security.refused", header: stored, event: batch[index]) }
            }
        } catch {
            logger.error("security events not journaled", metadata: ["events": "\(batch.count)", "error": "\(error)"])
        }
        broker.update {
            $0.head = journal.head
            $0.journalCount = journal.count
            $0.journalBytes = journal.storedBytes
        }
    }

    func rebind(_ sockets: [Socket], _ bound: [String]) {
        for (socket, endpoint) in zip(sockets, bound) {
            do {
                try rebindEndpoint(socket, endpoint)
            } catch {
                logger.error("could not rebind an endpoint", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }
        }
        logger.notice("every connection closed; peers reconnect through the ZAP handler")
    }

    // MARK: Ingest

    func serveIngest() throws {
        var batch: [PendingEvent] = []
        var senders: [Data] = []
        batch.reserveCapacity(64)
        let receivedAt = Int64(Date().timeIntervalSince1970 * 1000)
        while batch.count < configuration.batchLimit, let message = try ingest.receive(dontWait: true) {
            let frames = message.frames
            guard frames.count >= 2 else {
                // A routing frame alone: an empty message, nothing to answer with sense.
                if let identity = frames.first {
                    refuse(identity, ProtocolError(.malformed, "empty message: no frames"), command: nil, ref: nil)
                }
                continue
            }
            let identity = frames[0]
            var command: String?
            var ref: String?
            do {
                let envelope = try Envelope.check(frames.dropFirst(), minimumVersion: configuration.minimumVersion)
                command = envelope.command.rawValue
                guard envelope.command == .event || envelope.command == .heartbeat else {
                    throw ProtocolError(
                        .unknownCommand,
                        "command \(envelope.command.rawValue) is not accepted on the ingest endpoint (EVENT, HEARTBEAT)")
                }
                let parsed = try envelope.parsed(reference: &ref)
                switch envelope.command {
                case .event:
                    let header = try parsed.checkedEvent()
                    if let security = broker.security {
                        // Per message, by the principal ZAP gave this connection (no spoofing).
                        guard let role = security.role(of: message.userID) else {
                            security.refused(
                                "revoked", principal: message.userID, endpoint: .ingest, reason: "principal is no longer allowed")
                            throw ProtocolError(.forbidden, "principal '\(message.userID ?? "?")' is no longer allowed")
                        }
                        if let reason = Policy.publish(
                            principal: message.userID ?? "", role: role, type: header.type, producer: header.producer)
                        {
                            security.refused("publish", principal: message.userID, endpoint: .ingest, reason: reason)
                            throw ProtocolError(.forbidden, reason)
                        }
                    }
                    batch.append(
                        PendingEvent(
                            header: header, headerFields: parsed.header, rawHeader: envelope.header, parent: envelope.parent,
                            metadata: envelope.metadata,
                            content: envelope.content, receivedAt: receivedAt))
                    senders.append(identity)
                case .heartbeat:
                    let head = HeadHeader(head: journal.head, first: journal.first, broker: journal.brokerID)
                    reply(identity, try Envelope(command: .head, header: head))
                default:
                    break
                }
            } catch let error as ProtocolError {
                refuse(identity, error, command: command, ref: ref)
            }
        }
        guard !batch.isEmpty else { return }
        if broker.stopRequested {
            // Nothing of this batch is journaled: tell producers to come back (they keep the
            // events in their outboxes).
            for (index, event) in batch.enumerated() {
                nack(senders[index], event.header, .shuttingDown, "the broker is shutting down", retryable: true)
            }
            return
        }
        let outcomes: [AppendOutcome]
        do {
            outcomes = try journal.append(batch)
        } catch {
            logger.error("journal append failed; NACKing the batch", metadata: ["events": "\(batch.count)", "error": "\(error)"])
            for (index, event) in batch.enumerated() {
                nack(senders[index], event.header, .unavailable, "the journal could not store the event", retryable: true)
            }
            return
        }
        var journaled: Int64 = 0
        var duplicates: Int64 = 0
        var conflicts: Int64 = 0
        for (index, outcome) in outcomes.enumerated() {
            let event = batch[index]
            let h = event.header
            switch outcome {
            case .stored(let busSeq, let header):
                journaled += 1
                ack(senders[index], h, busSeq: busSeq, duplicate: false)
                publish(type: h.type, header: header, event: event)
            case .duplicate(let busSeq):
                duplicates += 1
                ack(senders[index], h, busSeq: busSeq, duplicate: true)
            case .conflict(let existing):
                conflicts += 1
                nack(
                    senders[index], h, .conflict,
                    "producer_seq \(h.producerSeq) of '\(h.producer)' already belongs to event \(existing)",
                    retryable: false)
            }
        }
        broker.update {
            $0.journaled += journaled
            $0.duplicates += duplicates
            $0.nacks += conflicts
            $0.commits += 1
            $0.head = journal.head
            $0.journalCount = journal.count
            $0.journalBytes = journal.storedBytes
        }
    }

    func publish(type: String, header: Data, event: PendingEvent) {
        let frames = [Data(type.utf8), versionFrame, Data("EVENT".utf8), header, event.parent, event.metadata, event.content]
        do {
            try fanout.send(frames, dontWait: true)
        } catch {
            logger.warning("fan-out send failed", metadata: ["error": "\(error)"])
        }
    }

    func ack(_ identity: Data, _ header: EventHeader, busSeq: Int64, duplicate: Bool) {
        let ack = AckHeader(
            eventID: header.eventID, producer: header.producer, producerSeq: header.producerSeq, busSeq: busSeq,
            duplicate: duplicate)
        reply(identity, Envelope(command: .ack, header: ack.wireJSON()))
    }

    func nack(_ identity: Data, _ header: EventHeader, _ code: ProtocolError.Code, _ reason: String, retryable: Bool) {
        let nack = NackHeader(
            eventID: header.eventID, producer: header.producer, producerSeq: header.producerSeq, code: code,
            reason: reason, retryable: retryable)
        if let envelope = try? Envelope(command: .nack, header: nack) { reply(identity, envelope) }
        if !retryable || code == .unavailable {
            logger.warning("event refused", metadata: ["code": "\(code.rawValue)", "event_id": "\(header.eventID)", "reason": "\(reason)"])
        }
    }

    func refuse(_ identity: Data, _ error: ProtocolError, command: String?, ref: String?, socket: Socket? = nil) {
        broker.update { $0.errors[error.code, default: 0] += 1 }
        if refusalLog.allow() {
            logger.notice(
                "message refused",
                metadata: [
                    "peer": "\(identity.hex)", "code": "\(error.code.rawValue)", "reason": "\(error.message)",
                    "command": "\(command ?? "-")",
                ])
        }
        if let envelope = try? Envelope(command: .error, header: ErrorHeader(error, command: command, ref: ref)) {
            reply(identity, envelope, on: socket ?? ingest)
        }
    }

    /// Sends to a peer without ever blocking the broker: a peer that is gone or whose queue is
    /// full misses this reply, and its resend gets the same answer again.
    /// - Returns: whether libzmq took the message.
    @discardableResult
    func reply(_ identity: Data, _ envelope: Envelope, on socket: Socket? = nil) -> Bool {
        do {
            return try (socket ?? ingest).send([identity] + envelope.frames(), dontWait: true)
        } catch let error where error.isHostUnreachable {
            // The peer disconnected; nothing to do.
        } catch {
            logger.debug("reply not sent", metadata: ["peer": "\(identity.hex)", "error": "\(error)"])
        }
        return false
    }

    // MARK: Fan-out

    func heartbeat() {
        let head = HeadHeader(head: journal.head, first: journal.first, broker: journal.brokerID)
        if let envelope = try? Envelope(command: .head, header: head) {
            _ = try? fanout.send([Data(Topic.head.utf8)] + envelope.frames(), dontWait: true)
        }
        // New subscribers learn where the stream stands from the welcome.
        if let frame = try? Self.welcome(journal: journal, configuration: configuration) {
            try? fanout.set(.xpubWelcomeMessage(frame))
        }
    }

    func drainSubscriptions() {
        // XPUB hands up (un)subscriptions; they must be read or they pile up in memory.
        while let message = try? fanout.receive(dontWait: true) {
            if let frame = message.frames.first, let kind = frame.first {
                let topic = String(decoding: frame.dropFirst(), as: UTF8.self)
                logger.debug(kind == 1 ? "subscribe" : "unsubscribe", metadata: ["topic": "\(topic)"])
            }
        }
    }

    // MARK: Replay

    func serveReplay() {
        var served = 0
        while served < 64, let message = try? replay.receive(dontWait: true) {
            served += 1
            let frames = message.frames
            guard let identity = frames.first else { continue }
            var command: String?
            var ref: String?
            do {
                let envelope = try Envelope.check(frames.dropFirst(), minimumVersion: configuration.minimumVersion)
                command = envelope.command.rawValue
                guard envelope.command == .fetch else {
                    throw ProtocolError(
                        .unknownCommand, "command \(envelope.command.rawValue) is not accepted on the replay endpoint (FETCH)")
                }
                _ = try envelope.parsed(reference: &ref)
                let fetch = try envelope.decodeHeader(FetchHeader.self)
                ref = fetch.requestID
                try fetch.validate()
                // Dead letters hold the payloads that failed: only an admin replays them.
                let hidden = Self.replayExclusions(security: broker.security, principal: message.userID)
                let (events, read) = try journal.read(
                    from: fetch.from, to: fetch.to, topics: fetch.topics, limit: fetch.limit, excluding: hidden)
                // END promises everything up to `through` was sent: if the client's queue
                // refuses an EVENT, stop there and say so, rather than promise what was dropped.
                var through = read
                var sent = 0
                for event in events {
                    let envelope = Envelope(
                        command: .event, header: event.header, parent: event.parent, metadata: event.metadata, content: event.content)
                    guard reply(identity, envelope, on: replay) else {
                        through = event.busSeq - 1
                        break
                    }
                    sent += 1
                }
                let end = EndHeader(
                    requestID: fetch.requestID, from: fetch.from, through: through, count: sent,
                    head: journal.head, first: journal.first, more: through < min(fetch.to ?? journal.head, journal.head))
                reply(identity, try Envelope(command: .end, header: end), on: replay)
                broker.update { $0.fetches += 1 }
            } catch let error as ProtocolError {
                refuse(identity, error, command: command, ref: ref, socket: replay)
            } catch {
                refuse(identity, ProtocolError(.internalError, "the journal could not be read"), command: command, ref: ref, socket: replay)
                logger.error("replay read failed", metadata: ["error": "\(error)"])
            }
        }
    }

    // MARK: Retention

    /// Runs retention for up to 100 ms, a chunk at a time; returns true when it had to stop
    /// with more to delete (it then runs again soon, so retention keeps up with ingest).
    func retention() -> Bool {
        let olderThan = configuration.retentionMaxAge.map { Int64(Date().timeIntervalSince1970 * 1000) - $0.milliseconds }
        let chunk = 10_000
        let started = ContinuousClock.now
        var deleted = 0
        var last = 0
        do {
            repeat {
                last = try journal.prune(olderThan: olderThan, maxBytes: configuration.retentionMaxBytes, chunk: chunk)
                deleted += last
            } while last == chunk && started.duration(to: .now) < .milliseconds(100)
        } catch {
            logger.error("retention failed", metadata: ["error": "\(error)"])
        }
        if deleted > 0 {
            logger.info(
                "retention deleted events",
                metadata: ["deleted": "\(deleted)", "first": "\(journal.first)", "head": "\(journal.head)"])
            broker.update {
                $0.pruned += Int64(deleted)
                $0.first = journal.first
                $0.journalCount = journal.count
                $0.journalBytes = journal.storedBytes
            }
        }
        return last == chunk
    }
}

/// Allows `perSecond` actions per second, for log lines that hostile input could flood.
/// Unbinds `endpoint` and binds it again. libzmq closes the listener asynchronously, so the
/// port may still be taken for a moment: the bind is retried for up to two seconds (on a
/// broker thread, never on the cooperative pool).
func rebindEndpoint(_ socket: Socket, _ endpoint: String) throws {
    try socket.unbind(endpoint)
    for _ in 0..<200 {
        let result = Result { () throws(ZMQError) in try socket.bind(endpoint) }
        guard case .failure(let error) = result else { return }
        guard error.errno == EADDRINUSE else { throw error }
        usleep(10_000)
    }
    try socket.bind(endpoint)
}

struct RateLimiter {
    let perSecond: Int
    var windowStart = ContinuousClock.now
    var used = 0

    init(perSecond: Int) { self.perSecond = perSecond }

    mutating func allow() -> Bool {
        let now = ContinuousClock.now
        if now - windowStart >= .seconds(1) {
            windowStart = now
            used = 0
        }
        used += 1
        return used <= perSecond
    }
}

extension Data {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
