// The broker thread: one loop that owns every event-plane socket and the journal.
//
// All event-plane sockets and the journal live on a single dedicated thread that sleeps in
// `zmq_poll`. That is deliberate: libzmq sockets must stay on one thread, SQLite writes are
// serial anyway, and a single writer makes `bus_seq` assignment and ACK ordering trivially
// correct. Each concern is an extension in its own file: ingest (BrokerCore+Ingest), fan-out
// (+Fanout), replay (+Replay), retention (+Retention), security events (+SecurityEvents).

import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import ZeroMQ

/// Everything the broker thread owns. Not `Sendable`: made and used on the broker thread only.
final class BrokerCore {
    let broker: Broker
    let configuration: BrokerConfiguration
    let logger: Logger
    let journal: any JournalStore
    let ingest: Socket
    let fanout: Socket
    let replay: Socket
    /// The consumer-group endpoint and every group's bookkeeping (BrokerCore+Groups).
    let groupSocket: Socket
    var groups: GroupBook
    var groupIndex = 0
    let endpoints: BrokerEndpoints
    let poller = Poller()
    /// Handshake failures that ZAP never sees and connections the receive guard dropped, with
    /// the poller indices of their monitors.
    let connections: ConnectionWatch
    var connectionIndices: [Int] = []
    let versionFrame = Envelope.versionFrame()
    let eventWordFrame = Data(Command.event.rawValue.utf8)
    /// The topic frame of the event type published last, its type, and whether a subscription
    /// matched it at `generation` of `subscriptions`: a batch is mostly one type, and making the
    /// frame for each event was a thirtieth of the broker thread.
    var topicFrame: (type: String, frame: Data, wanted: Bool, generation: Int) = ("", Data(), false, -1)
    var nextHeartbeat: ContinuousClock.Instant
    var nextRetention: ContinuousClock.Instant
    /// When what the groups changed is committed (nil: nothing waits). See `commitGroupsIfDue`.
    var nextGroupCommit: ContinuousClock.Instant?
    /// "message refused" lines, by error code (`BrokerSecurity.refusalLinesPerSecond` a second each).
    var refusalLog = LogLimiter(perInterval: BrokerSecurity.refusalLinesPerSecond)
    /// Whether the journal is failing to store events now (a full disk…), and group commits, for the log.
    var journalOutage = StorageOutage(
        failing: "the journal cannot store events; NACKing them (unavailable) until it can", recovered: "the journal stores events again")
    var heapTrim = HeapTrim()
    var groupCommitOutage = StorageOutage(
        failing: "group commit failed; kept for the next try", recovered: "group commit succeeded again; what was kept is on disk")
    /// The broker's own producer sequence (for `security.refused` events) and session.
    var brokerSeq: Int64 = 0
    let brokerSession = UUIDv7.string()
    let metrics: BrokerMetrics
    /// Each producer's last event and reported outbox (`producers.list`, producer metrics).
    var producers = ProducerTable()
    /// Fan-out subscriptions held now, by prefix (XPUB_VERBOSER passes every one up, and the
    /// unsubscriptions of a subscriber that goes).
    var subscriptions = FanoutSubscriptions()
    /// Ingest's checks, and the thread that owns the ingest socket, receives and checks there
    /// (IngestValidation.swift).
    let ingestCheck: IngestCheck
    let ingestThread: IngestThread
    /// Whether `ingestThread` owns the ingest socket (until the broker stops): answers to
    /// producers go through it.
    var ingestOwned = true
    /// Answers to producers made in this loop iteration, for the ingest thread to send.
    var ingestAnswers: [[Data]] = []
    /// Batches committed in this loop iteration, for the ingest thread to free.
    var ingestSpent: [CheckedBatch] = []
    /// The events journaled last, for the groups to read from memory.
    var recentEvents = RecentEvents()

    init(broker: Broker, serviceEndpoint: String) throws {
        self.broker = broker
        self.configuration = broker.configuration
        self.logger = broker.loggerForCore
        self.metrics = BrokerMetrics(factory: broker.metricsFactory)
        let context = broker.contextForCore
        journal = try configuration.openJournal(logger: logger)
        ingestCheck = IngestCheck(minimumVersion: configuration.minimumVersion, security: broker.security)
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
        try fanout.set(common + [.xpubNoDrop(false), .xpubVerboser(true)] + (security?.serverOptions(.fanout) ?? []))
        replay = try context.socket(.router, linger: 1000)
        try replay.set(common + [.routerMandatory(true)] + (security?.serverOptions(.replay) ?? []))
        nextHeartbeat = .now
        nextRetention = .now
        try fanout.set(.xpubWelcomeMessage(try Self.welcome(journal: journal, configuration: configuration)))
        try fanout.bind(configuration.fanoutEndpoint)
        try replay.bind(configuration.replayEndpoint)
        groupSocket = try context.socket(.router, linger: 1000)
        try groupSocket.set(common + [.routerMandatory(true)] + (security?.serverOptions(.groups) ?? []))
        try groupSocket.bind(configuration.groupsEndpoint)
        groups = try GroupBook(journal: journal, settings: configuration.groupSettings, logger: logger)
        endpoints = BrokerEndpoints(
            ingest: try ingest.lastEndpoint(), fanout: try fanout.lastEndpoint(), replay: try replay.lastEndpoint(),
            service: serviceEndpoint, groups: try groupSocket.lastEndpoint())
        connections = try ConnectionWatch(
            context: context,
            sockets: [
                (ingest, .ingest, endpoints.ingest), (fanout, .fanout, endpoints.fanout), (replay, .replay, endpoints.replay),
                (groupSocket, .groups, endpoints.groups),
            ],
            security: security, limit: configuration.maxPendingBytes, logger: logger)
        poller.add(fileDescriptor: broker.wakeUpForCore.fileDescriptor)
        // From here on the ingest socket is the ingest thread's; this thread polls its word
        // that a checked batch waits.
        ingestThread = try IngestThread(socket: ingest, check: ingestCheck, batchLimit: configuration.batchLimit, logger: logger)
        poller.add(fileDescriptor: ingestThread.readyDescriptor)
        poller.add(replay)
        poller.add(fanout)
        groupIndex = poller.add(groupSocket)
        connectionIndices = connections.add(to: poller)
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
                "journal": "\(journal.location)", "head": "\(journal.head)", "first": "\(journal.first)",
                "broker_id": "\(journal.brokerID)", "allocator": "\(HeapTrim.allocator)",
            ])
    }

    static func welcome(journal: any JournalStore, configuration: BrokerConfiguration) throws -> Data {
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
                heartbeatMembers()
                updateGauges(now: now)
                // Counts of refusal lines left out of the log once their flood has stopped.
                logSuppressedRefusals(now: now)
                broker.security?.logSuppressedRefusals(at: now)
                if configuration.trimsHeap { trimHeap() }
                nextHeartbeat = now + configuration.heartbeat
            }
            if now >= nextRetention {
                let behind = retention()
                nextRetention = .now + (behind ? .milliseconds(200) : configuration.retentionInterval)
            }
            // +1: never poll for 0 ms just before a timer is due (that would spin).
            let due = [nextHeartbeat, nextRetention, groups.nextDeadline, nextGroupCommit].compactMap { $0 }.min() ?? nextHeartbeat
            let wait = max(0, ContinuousClock.now.duration(to: due).milliseconds + 1)
            do {
                try poller.poll(timeout: Int(wait))
            } catch {
                failure = "poll failed: \(error)"
                break
            }
            if poller.returned(0).contains(.readable) { broker.wakeUpForCore.drain() }
            if broker.takeRebindRequest() {
                rebind(
                    [ingest, fanout, replay, groupSocket], [endpoints.ingest, endpoints.fanout, endpoints.replay, endpoints.groups])
            }
            for (position, index) in connectionIndices.enumerated() where poller.returned(index).contains(.readable) {
                connections.drain(position)
            }
            if let notices = broker.security?.takeNotices(), !notices.isEmpty { journal(notices) }
            do {
                // Subscriptions first: the events of this step go to who subscribed before it.
                if poller.returned(3).contains(.readable) { drainSubscriptions() }
                if poller.returned(1).contains(.readable) { serveIngest() }
                if poller.returned(2).contains(.readable) { serveReplay() }
                if poller.returned(groupIndex).contains(.readable) { serveGroups() }
                // Timers, then new events, then (when due) one commit of what the groups changed.
                tickGroups(now: .now)
                try pumpGroups(now: .now)
                try commitGroupsIfDue()
                flushIngestAnswers()
            } catch {
                failure = "\(error)"
                logger.critical("broker stopping: \(error)")
                break
            }
        }
        // Checked, not journaled: answered "shutting down" (their producers send them again),
        // on the socket, which is this thread's again once the ingest thread has ended.
        flushIngestAnswers()
        let left = ingestThread.stop()
        ingestOwned = false
        for var batch in left { commit(&batch, journaling: false) }
        if groups.hasUncommitted {
            do {
                try flushGroups()
            } catch {
                logger.error("the last group commit failed", metadata: ["error": "\(error)"])
            }
            if groups.hasWritesDue {
                // flushGroups keeps what it could not commit (a full disk…); nothing keeps it now.
                logger.error(
                    "the last group commit failed: settlings since the last commit are lost, and those events are delivered again",
                    metadata: ["writes": "\(groups.writes.count)", "dead_letters": "\(groups.letters.count)"])
            }
        }
        ingest.close()
        fanout.close()
        replay.close()
        groupSocket.close()
        connections.close()
        do {
            try journal.close()
        } catch {
            logger.error("closing the journal failed: \(error)")
        }
        logger.info("broker stopped", metadata: ["head": "\(journal.head)"])
        return failure
    }

    /// Commits what the groups changed: at once for operators' changes, creations and dead
    /// letters; otherwise `groups.commit_interval` after the first uncommitted change. Waiting
    /// costs at most that much of settling in a crash (at-least-once brings it back) and saves
    /// most writes: a delivery acked before the commit leaves nothing to write, and one commit
    /// (one fsync) covers every ACK of the interval instead of the few of one loop iteration.
    func commitGroupsIfDue() throws {
        if nextGroupCommit == nil, groups.hasUncommitted { nextGroupCommit = .now + configuration.groupCommitInterval }
        guard let due = nextGroupCommit, groups.hasWritesDue || due <= .now else { return }
        nextGroupCommit = nil
        try flushGroups()
    }

    /// Hands this iteration's answers to producers, and its committed batches, to the ingest
    /// thread.
    func flushIngestAnswers() {
        guard !ingestAnswers.isEmpty || !ingestSpent.isEmpty else { return }
        ingestThread.send(ingestAnswers, spent: ingestSpent)
        ingestAnswers = []
        ingestSpent = []
    }

    /// Gives freed memory back to the kernel once enough of it has piled up (HeapTrim).
    func trimHeap() {
        let started = ContinuousClock.now
        guard let free = heapTrim.run() else { return }
        logger.debug(
            "gave free memory back to the kernel",
            metadata: ["free_bytes": "\(free)", "took": "\(started.duration(to: .now))"])
    }

    func rebind(_ sockets: [Socket], _ bound: [String]) {
        for (socket, endpoint) in zip(sockets, bound) {
            if socket === ingest && ingestOwned {
                ingestThread.rebind(endpoint)
                continue
            }
            do {
                try rebindEndpoint(socket, endpoint)
            } catch {
                logger.error("could not rebind an endpoint", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }
        }
        logger.notice("every connection closed; peers reconnect through the ZAP handler")
    }

    /// Sends to a peer without ever blocking the broker: a peer that is gone or whose queue is
    /// full misses this reply, and its resend gets the same answer again. Answers on the ingest
    /// socket go through the ingest thread, which owns it: they are sent at the end of this loop
    /// iteration (`flushIngestAnswers`), and count as taken.
    /// - Returns: whether libzmq took the message.
    @discardableResult
    func reply(_ identity: Data, _ envelope: Envelope, on socket: Socket? = nil) -> Bool {
        if ingestOwned && (socket == nil || socket === ingest) {
            ingestAnswers.append([identity] + envelope.frames())
            return true
        }
        do {
            return try (socket ?? ingest).send([identity] + envelope.frames(), dontWait: true)
        } catch let error where error.isHostUnreachable {
            // The peer disconnected; nothing to do.
        } catch {
            logger.debug("reply not sent", metadata: ["peer": "\(identity.hex)", "error": "\(error)"])
        }
        return false
    }
}
