import CoreMetrics
import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardStorage
import ZeroMQ

extension BrokerCore {

    /// One step of ingest (see IngestValidation.swift): commits the checked batch the ingest
    /// thread handed over; its answers and the batch go back to that thread at the end of the
    /// loop iteration (`flushIngestAnswers`).
    func serveIngest() {
        for var batch in ingestThread.take() {
            commit(&batch)
            ingestSpent.append(batch)
        }
    }

    /// Answers what was refused and the heartbeats, in order, then journals the events in one
    /// transaction and answers them.
    /// - Parameter journaling: false for what the ingest thread had checked when the broker
    ///   stopped: answered "shutting down" without a commit, however the broker stopped (a
    ///   broker that lost its lease or its database must not wait on it again to let go).
    func commit(_ checked: inout CheckedBatch, journaling: Bool = true) {
        let started = ContinuousClock.now
        for item in checked.others {
            switch item {
            case .event:
                break  // in `checked.events`
            case .heartbeat(let identity, let report, let principal, let ref):
                do {
                    try heartbeat(report, principal: principal)
                    let head = HeadHeader(head: journal.head, first: journal.first, broker: journal.brokerID, echo: report.echo)
                    if let envelope = try? Envelope(command: .head, header: head) { reply(identity, envelope) }
                } catch {
                    refuse(identity, error, command: Command.heartbeat.rawValue, ref: ref)
                }
            case .refused(let identity, let error, let command, let ref):
                refuse(identity, error, command: command, ref: ref)
            }
        }
        let batch = checked.events
        let senders = checked.senders
        guard !batch.isEmpty else { return }
        if broker.stopRequested || !journaling {
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
            let fault = StorageFault.classify(error, path: journal.location, queue: nil)
            let producers = Set(batch.map(\.header.producer)).sorted().joined(separator: ",")
            journalOutage.failed(fault, count: batch.count, at: .now, logger: logger, metadata: ["producers": "\(producers)"])
            for (index, event) in batch.enumerated() {
                nack(
                    senders[index], event.header, .unavailable, "the journal could not store the event: \(fault.cause.rawValue)",
                    retryable: true)
            }
            return
        }
        journalOutage.succeeded(at: .now, logger: logger)
        var journaled: Int64 = 0
        var duplicates: Int64 = 0
        var conflicts: Int64 = 0
        // Per batch, not per event: a batch is mostly a few producers' events of a few types.
        var types: [String: Int] = [:]
        var producersSeen: Set<String> = []
        var batched = BatchedAcks()
        var lastType = ""
        var lastProducer = ""
        for (index, outcome) in outcomes.enumerated() {
            let event = batch[index]
            switch outcome {
            case .stored(let busSeq, let header):
                journaled += 1
                // A batch is mostly a few producers' events of a few types: hashed only when
                // they change.
                if event.header.type != lastType {
                    lastType = event.header.type
                    types[lastType, default: 0] += 1
                } else {
                    types[lastType]! += 1
                }
                if event.header.producer != lastProducer {
                    lastProducer = event.header.producer
                    producersSeen.insert(lastProducer)
                }
                if event.batchedAck {
                    batched.add(senders[index], event.header.producer, event.header.producerSeq, busSeq: busSeq, duplicate: false)
                } else {
                    ack(senders[index], event.header, busSeq: busSeq, duplicate: false)
                }
                if let evicted = publish(busSeq: busSeq, header: header, event: event) {
                    checked.evicted.append(evicted)
                }
            case .duplicate(let busSeq):
                duplicates += 1
                if event.batchedAck {
                    batched.add(senders[index], event.header.producer, event.header.producerSeq, busSeq: busSeq, duplicate: true)
                } else {
                    ack(senders[index], event.header, busSeq: busSeq, duplicate: true)
                }
            case .conflict(let existing, let head):
                conflicts += 1
                let h = event.header
                nack(
                    senders[index], h, .conflict,
                    "producer_seq \(h.producerSeq) of '\(h.producer)' already belongs to event \(existing); the journal holds up to \(head)",
                    retryable: false, producerHead: head)
            }
        }
        for (identity, acks) in batched.all { reply(identity, acks.envelope()) }
        let wallNow = Date()
        for producer in producersSeen { producers.sawEvents(producer, at: wallNow) }
        for (type, count) in types { metrics.journaled(type: type, count: count) }
        if duplicates > 0 { metrics.duplicates.increment(by: duplicates) }
        metrics.commits.increment()
        let latency = started.duration(to: .now)
        let nanoseconds = latency.components.seconds * 1_000_000_000 + latency.components.attoseconds / 1_000_000_000
        for _ in 0..<(journaled + duplicates) { metrics.ackLatency.recordNanoseconds(nanoseconds) }
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

    /// One ACKS per connection and producer of a commit, for the events sent as 1.1 (section 6),
    /// and another for each further `limit` of them.
    struct BatchedAcks {
        static let limit = 4096

        private var index: [Key: Int] = [:]
        private(set) var all: [(identity: Data, acks: Acks)] = []

        private struct Key: Hashable {
            var identity: Data
            var producer: String
        }

        mutating func add(_ identity: Data, _ producer: String, _ producerSeq: Int64, busSeq: Int64, duplicate: Bool) {
            let entry = Acknowledgement(producerSeq: producerSeq, busSeq: busSeq, duplicate: duplicate)
            // Most events come from the same connection and producer as the one before.
            if let last = all.indices.last, all[last].identity == identity, all[last].acks.producer == producer,
                all[last].acks.entries.count < Self.limit
            {
                all[last].acks.entries.append(entry)
                return
            }
            let key = Key(identity: identity, producer: producer)
            if let position = index[key], all[position].acks.entries.count < Self.limit {
                all[position].acks.entries.append(entry)
            } else {
                index[key] = all.count
                all.append((identity, Acks(producer: producer, entries: [entry])))
            }
        }
    }

    func ack(_ identity: Data, _ header: EventHeader, busSeq: Int64, duplicate: Bool) {
        let ack = AckHeader(
            eventID: header.eventID, producer: header.producer, producerSeq: header.producerSeq, busSeq: busSeq,
            duplicate: duplicate)
        reply(identity, Envelope(command: .ack, header: ack.wireJSON()))
    }

    func nack(
        _ identity: Data, _ header: EventHeader, _ code: ProtocolError.Code, _ reason: String, retryable: Bool, producerHead: Int64? = nil
    ) {
        let nack = NackHeader(
            eventID: header.eventID, producer: header.producer, producerSeq: header.producerSeq, code: code,
            reason: reason, retryable: retryable, producerHead: producerHead)
        if let envelope = try? Envelope(command: .nack, header: nack) { reply(identity, envelope) }
        metrics.nack(code: code.rawValue)
        // `unavailable` is logged per outage (`journalOutage`), not per event: in an outage every
        // producer resends every few seconds.
        if !retryable {
            logger.warning("event refused", metadata: ["code": "\(code.rawValue)", "event_id": "\(header.eventID)", "reason": "\(reason)"])
        }
    }

    /// Summaries of "message refused" lines left out whose code has been quiet since (the
    /// heartbeat calls this, so a flood that stops is still counted in the log).
    func logSuppressedRefusals(now: ContinuousClock.Instant) {
        for summary in refusalLog.summaries(at: now) {
            logger.notice(
                "message refusals left out of the log", metadata: ["code": "\(summary.kind)", "suppressed": "\(summary.suppressed)"])
        }
    }

    func refuse(_ identity: Data, _ error: ProtocolError, command: String?, ref: String?, socket: Socket? = nil) {
        broker.update { $0.errors[error.code, default: 0] += 1 }
        metrics.error(code: error.code.rawValue)
        if let suppressed = refusalLog.admit(error.code.rawValue, at: .now) {
            logger.notice(
                "message refused",
                metadata: withSuppressed(
                    suppressed,
                    [
                        "peer": "\(identity.hex)", "code": "\(error.code.rawValue)", "reason": "\(error.message)",
                        "command": "\(command ?? "-")",
                    ]))
        }
        if let envelope = try? Envelope(command: .error, header: ErrorHeader(error, command: command, ref: ref)) {
            reply(identity, envelope, on: socket ?? ingest)
        }
    }
}

extension BrokerCore {
    /// Records what a producer's HEARTBEAT reports. With security, a producer reports only for
    /// itself (its name is its principal, as for its events).
    func heartbeat(_ report: HeartbeatHeader, principal: String?) throws(ProtocolError) {
        guard let producer = report.producer else { return }
        if let security = broker.security, producer != principal {
            let reason = "producer '\(producer)' is not the sender's principal '\(principal ?? "?")'"
            security.refused("publish", principal: principal, endpoint: .ingest, reason: reason)
            throw ProtocolError(.forbidden, reason)
        }
        producers.heartbeat(
            producer, outbox: report.outbox,
            lastDelivery: report.lastAckMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }, at: Date())
    }

    /// The gauges of the journal, the producers and the groups (at each heartbeat); the groups'
    /// lag and dead letters, which cost a count over the journal, every
    /// `BrokerMetrics.gaugeInterval`.
    func updateGauges(now: ContinuousClock.Instant) {
        metrics.head.record(journal.head)
        metrics.first.record(journal.first)
        metrics.events.record(journal.count)
        metrics.bytes.record(journal.storedBytes)
        if let wal = journal.wal { metrics.journalWAL(frames: wal.frames, checkpoints: wal.checkpoints) }
        for (producer, health) in producers.takeChanged() { metrics.producer(producer, health) }
        let countLag = now >= metrics.nextLagCount
        if countLag { metrics.nextLagCount = now + BrokerMetrics.gaugeInterval }
        let deadLetters = countLag ? ((try? journal.deadLetterCounts()) ?? [:]) : [:]
        for (name, runtime) in groups.groups {
            let status = runtime.state.status
            let group = metrics.group(name)
            group.pending.record(status.pending)
            group.members.record(status.members.count)
            if countLag {
                if let lag = try? journal.count(after: status.cursor, topics: runtime.topics) { group.lag.record(lag) }
                group.dead.record(deadLetters[name]?[.dead] ?? 0)
            }
        }
    }
}
