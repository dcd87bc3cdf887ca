// Ingest on two cores: the broker thread journals one batch while a second thread receives and
// checks the next.
//
// Receiving an EVENT and checking it (envelope, JSON frames, header rules, the content's
// schema, the sender's role) is more than a third of what the broker spends per event, and none
// of it needs the journal: it is a pure function of the message. So the ingest endpoint has a
// thread of its own (`IngestThread`), which owns its socket: it receives a batch, checks it and
// hands it to the broker thread, which journals it, publishes it and gives back the answers for
// the ingest thread to send. Batches stay in order, events within a batch stay in order, and
// nothing is ACKed before it is journaled: only the receiving and the checking moved. That
// thread also frees each committed batch (thousands of buffers).

import Dispatch
import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import Synchronization
import ZeroMQ

/// One ingest message after its checks: what the broker thread does with it.
enum IngestItem: Sendable {
    /// A valid EVENT, to journal, then ACK.
    case event(identity: Data, PendingEvent)
    /// A valid HEARTBEAT, to record, then answer with HEAD.
    case heartbeat(identity: Data, HeartbeatHeader, principal: String?, ref: String?)
    /// A message refused with ERROR.
    case refused(identity: Data, ProtocolError, command: String?, ref: String?)
}

/// A batch after its checks, as the broker thread commits it: the EVENTs to journal, in order,
/// each with its sender, and the other messages (refusals, heartbeats), answered first in their
/// order. Split on the ingest thread, so the broker thread copies no event out of an item.
struct CheckedBatch: Sendable {
    var events: [PendingEvent] = []
    var senders: [Data] = []
    var others: [IngestItem] = []
    /// What the groups' memory let go of while this batch was committed (`RecentEvents`): freed
    /// with the batch, on the ingest thread.
    var evicted: [RecentEvents.Entry] = []

    init() {}

    init(_ items: some Sequence<IngestItem>) {
        for item in items { add(item) }
    }

    var isEmpty: Bool { events.isEmpty && others.isEmpty }

    /// The messages it holds: events and others.
    var count: Int { events.count + others.count }

    /// Adds `other`'s items after these. Refusals and heartbeats are answered before the
    /// events of the batch they are in, so `other`'s come before these events' answers too.
    mutating func append(contentsOf other: CheckedBatch) {
        events += other.events
        senders += other.senders
        others += other.others
        evicted += other.evicted
    }

    mutating func add(_ item: IngestItem) {
        if case .event(let identity, let event) = item {
            events.append(event)
            senders.append(identity)
        } else {
            others.append(item)
        }
    }
}

/// The checks of one received ingest message, in the order section 2 gives. The ingest thread
/// (`IngestThread`) runs them on every message the ingest endpoint receives.
struct IngestCheck: Sendable {
    let minimumVersion: ProtocolVersion
    let security: BrokerSecurity?

    /// - Returns: nil for a message with no frame at all (nothing to answer).
    func callAsFunction(_ message: Message, receivedAt: Int64) -> IngestItem? {
        let frames = message.frames
        guard let identity = frames.first else { return nil }
        guard frames.count >= 2 else {
            // A routing frame alone: an empty message, nothing to answer with sense.
            return .refused(identity: identity, ProtocolError(.malformed, "empty message: no frames"), command: nil, ref: nil)
        }
        // The command word for an ERROR: the checked one once the frames pass, else what can
        // be read of it (worked out only for a refusal).
        var command: String?
        var ref: String?
        do throws(ProtocolError) {
            let envelope = try Envelope.check(frames.dropFirst(), minimumVersion: minimumVersion)
            command = envelope.command.rawValue
            guard envelope.command == .event || envelope.command == .heartbeat else {
                throw ProtocolError(
                    .unknownCommand, "command \(envelope.command.rawValue) is not accepted on the ingest endpoint (EVENT, HEARTBEAT)")
            }
            // Most EVENTs pass the quick check, which reads the frames without building their
            // JSON; the rest (and every refusal, with its message) take the general one.
            let header: EventHeader
            let fields: [String: JSONValue]?
            if let quick = envelope.quickPublishedEvent() {
                header = quick
                fields = nil
                ref = quick.eventID  // a UUIDv7 (the check says so): never longer than a reference may be
            } else {
                let parsed = try envelope.parsed(reference: &ref)
                guard envelope.command == .event else {
                    return .heartbeat(identity: identity, try HeartbeatHeader(wire: parsed.header), principal: message.userID, ref: ref)
                }
                header = try parsed.checkedPublishedEvent()
                fields = parsed.header
            }
            if let security {
                // Per message, by the principal ZAP gave this connection (no spoofing).
                guard let role = security.role(of: message.userID) else {
                    security.refused("revoked", principal: message.userID, endpoint: .ingest, reason: "principal is no longer allowed")
                    throw ProtocolError(.forbidden, "principal '\(message.userID ?? "?")' is no longer allowed")
                }
                if let reason = Policy.publish(principal: message.userID ?? "", role: role, type: header.type, producer: header.producer) {
                    security.refused("publish", principal: message.userID, endpoint: .ingest, reason: reason)
                    throw ProtocolError(.forbidden, reason)
                }
            }
            guard let fields else {
                return .event(identity: identity, PendingEvent(quick: envelope, header: header, receivedAt: receivedAt))
            }
            return .event(
                identity: identity,
                PendingEvent(
                    header: header, headerFields: fields, rawHeader: envelope.header, parent: envelope.parent,
                    metadata: envelope.metadata, content: envelope.content, receivedAt: receivedAt,
                    batchedAck: envelope.version >= .batchedAcks))
        } catch {
            return .refused(identity: identity, error, command: command ?? Envelope.readableCommand(frames.dropFirst()), ref: ref)
        }
    }
}

/// The ingest endpoint's own thread. From the broker's start to its stop it owns the ingest
/// socket: it receives what producers send (up to `batch_limit` messages a batch), checks each
/// message (`IngestCheck`), hands the broker thread the checked batches, and sends the answers
/// the broker thread gives back (ACKS, ACK, NACK, HEAD, ERROR). The broker thread never touches
/// the socket meanwhile (a libzmq socket is one thread's at a time). What is checked while a
/// batch waits joins it, up to `batch_limit` messages, so a commit takes what came during the
/// last one. At most `waitingLimit` checked batches wait for the broker thread: once they are
/// full, this thread leaves the socket alone, so producers feel the broker's pace through
/// their windows and the socket's high-water marks.
/// It also frees each committed batch (thousands of buffers) off the broker thread.
final class IngestThread: @unchecked Sendable {
    // @unchecked: `socket` and `poller` are used only by this thread between `init` (which
    // starts it) and the end of `stop()` (which waits for it to end); the rest is the Mutex's.
    private let socket: Socket
    private let check: IngestCheck
    private let batchLimit: Int
    private let logger: Logger
    /// Wakes this thread: answers to send, batches to free, a rebind, the stop.
    private let wakeUp: WakeUpSignal
    /// Wakes the broker thread: a checked batch waits (`readyDescriptor`).
    private let ready: WakeUpSignal
    private let ended = DispatchSemaphore(value: 0)
    private let slot = Mutex(Slot())
    /// Checked batches that may wait for the broker thread: one it takes next, and one more
    /// checked meanwhile, so neither thread waits for the other at each step.
    static let waitingLimit = 2

    private struct Slot {
        /// Checked, not yet taken by the broker thread (at most `waitingLimit`).
        var checked: [CheckedBatch] = []
        /// Answers to send, in order: each a routing frame and the envelope's frames.
        var answers: [[Data]] = []
        /// Committed batches, released on this thread.
        var spent: [CheckedBatch] = []
        var rebinds: [String] = []
        var stop = false
    }

    init(socket: Socket, check: IngestCheck, batchLimit: Int, logger: Logger) throws(ZMQError) {
        self.socket = socket
        self.check = check
        self.batchLimit = batchLimit
        self.logger = logger
        wakeUp = try WakeUpSignal()
        ready = try WakeUpSignal()
        Thread.start(named: "broker-ingest") { [self] in
            run()
            ended.signal()
        }
    }

    /// The sizes (in messages) of the checked batches waiting, oldest first.
    var waiting: [Int] { slot.withLock { $0.checked.map(\.count) } }

    /// For the broker thread's poller: readable while a checked batch waits.
    var readyDescriptor: Int32 { ready.fileDescriptor }

    /// The checked batches waiting (at most `waitingLimit`), oldest first; the broker thread
    /// commits them.
    func take() -> [CheckedBatch] {
        ready.drain()
        let taken = slot.withLock { slot in
            defer { slot.checked = [] }
            return slot.checked
        }
        // The socket was left alone while the batch waited: read it again.
        if !taken.isEmpty { wakeUp.signal() }
        return taken
    }

    /// Answers to send on the ingest socket, in order, and committed batches to free.
    func send(_ answers: [[Data]], spent: [CheckedBatch]) {
        guard !answers.isEmpty || !spent.isEmpty else { return }
        slot.withLock { slot in
            slot.answers += answers
            slot.spent += spent
        }
        wakeUp.signal()
    }

    /// Unbinds and binds the ingest endpoint again (every connection closes; peers reconnect).
    func rebind(_ endpoint: String) {
        slot.withLock { $0.rebinds.append(endpoint) }
        wakeUp.signal()
    }

    /// Sends the answers given so far, ends the thread and waits for it. The socket is the
    /// caller's again once this returns. Returns the checked batches the broker thread never
    /// took, for it to answer.
    func stop() -> [CheckedBatch] {
        slot.withLock { $0.stop = true }
        wakeUp.signal()
        ended.wait()
        return slot.withLock { slot in
            defer { slot.checked = [] }
            return slot.checked
        }
    }

    private func run() {
        let poller = Poller()
        poller.add(fileDescriptor: wakeUp.fileDescriptor)
        let socketIndex = poller.add(socket)
        while true {
            let (answers, spent, rebinds, stop, room) = slot.withLock { slot in
                defer {
                    slot.answers = []
                    slot.spent = []
                    slot.rebinds = []
                }
                return (slot.answers, slot.spent, slot.rebinds, slot.stop, receivable(in: slot))
            }
            for frames in answers { send(frames) }
            _ = consume spent  // freed here, not on the broker thread
            for endpoint in rebinds {
                do {
                    try rebindEndpoint(socket, endpoint)
                } catch {
                    logger.error("could not rebind an endpoint", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
                }
            }
            if stop { return }
            poller.update(socketIndex, events: room > 0 ? .readable : [])
            do {
                try poller.poll(timeout: -1)
            } catch {
                // EINTR is handled by `poll`; anything else would repeat: say so, and wait for
                // the broker thread's next word rather than spin.
                logger.error("ingest poll failed", metadata: ["error": "\(error)"])
                usleep(10_000)
                continue
            }
            if poller.returned(0).contains(.readable) { wakeUp.drain() }
            guard room > 0, poller.returned(socketIndex).contains(.readable) else { continue }
            var messages: [Message] = []
            while messages.count < room, let message = receive() { messages.append(message) }
            guard !messages.isEmpty else { continue }
            // Answers that came meanwhile go out before this batch is checked: an ACK waiting
            // for a check is a producer's window held shut.
            sendAnswers()
            let receivedAt = Int64(Date().timeIntervalSince1970 * 1000)
            var checked = CheckedBatch()
            checked.events.reserveCapacity(messages.count)
            checked.senders.reserveCapacity(messages.count)
            for message in messages {
                if let item = check(message, receivedAt: receivedAt) { checked.add(item) }
            }
            guard !checked.isEmpty else { continue }
            // While the broker thread commits (mostly an fsync), what arrives joins the last
            // waiting batch as long as it fits: one commit then carries it all. The batch is
            // taken out to be joined, so the broker thread never waits on the lock for the copy
            // (only this thread adds batches, so the order stays).
            let joined = slot.withLock { slot in
                guard let last = slot.checked.last, last.count + checked.count <= batchLimit else { return nil as CheckedBatch? }
                return slot.checked.removeLast()
            }
            if var joined {
                joined.append(contentsOf: checked)
                checked = joined
            }
            slot.withLock { $0.checked.append(checked) }
            ready.signal()
        }
    }

    /// How many messages this thread may receive now: what the last waiting batch has room
    /// for; once it is full, a whole batch while fewer than `waitingLimit` wait, else none.
    private func receivable(in slot: Slot) -> Int {
        if let last = slot.checked.last, last.count < batchLimit { return batchLimit - last.count }
        return slot.checked.count < Self.waitingLimit ? batchLimit : 0
    }

    /// Sends the answers waiting in the slot, if any.
    private func sendAnswers() {
        let answers = slot.withLock { slot in
            defer { slot.answers = [] }
            return slot.answers
        }
        for frames in answers { send(frames) }
    }

    private func receive() -> Message? {
        do {
            return try socket.receive(dontWait: true)
        } catch {
            logger.warning("ingest receive failed", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Sends without ever blocking: a peer that is gone or whose queue is full misses this
    /// answer, and its resend gets the same answer again.
    private func send(_ frames: [Data]) {
        do {
            _ = try socket.send(frames, dontWait: true)
        } catch let error where error.isHostUnreachable {
            // The peer disconnected; nothing to do.
        } catch {
            logger.debug("reply not sent", metadata: ["peer": "\(frames.first?.hex ?? "-")", "error": "\(error)"])
        }
    }
}
