// Ingest on two cores: the broker thread journals one batch while a second thread checks the
// next.
//
// Checking an EVENT (envelope, JSON frames, header rules, the content's schema, the sender's
// role) is about half of what the broker thread spends per event, and none of it needs the
// journal or a socket: it is a pure function of the message. So the broker thread, which owns
// the sockets and the journal, receives a batch, takes back the batch it handed over at the step
// before (checked), hands over the new one, and commits the one taken back meanwhile. Batches
// stay in order, events within a batch stay in order, and nothing is ACKed before it is
// journaled: only the checking moved. A few messages with nothing to overlap (an idle broker's
// lone event) are checked on the broker thread itself and committed at once, so they pay no
// hand-off. The checker's thread also frees each committed batch (thousands of buffers).

import Dispatch
import Foundation
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
/// order. Split on the checker's thread, so the broker thread copies no event out of an item.
struct CheckedBatch: Sendable {
    var events: [PendingEvent] = []
    var senders: [Data] = []
    var others: [IngestItem] = []
    /// What the groups' memory let go of while this batch was committed (`RecentEvents`): freed
    /// with the batch, on the checker's thread.
    var evicted: [RecentEvents.Entry] = []

    init() {}

    init(_ items: some Sequence<IngestItem>) {
        for item in items { add(item) }
    }

    var isEmpty: Bool { events.isEmpty && others.isEmpty }

    mutating func add(_ item: IngestItem) {
        if case .event(let identity, let event) = item {
            events.append(event)
            senders.append(identity)
        } else {
            others.append(item)
        }
    }
}

/// The checks of one received ingest message, in the order section 2 gives; the same function
/// runs on the broker thread and on the checker's thread.
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
                ref = String(quick.eventID.prefix(64))
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

/// A thread that runs `IngestCheck` on one batch at a time for the broker thread. Only the
/// broker thread calls `submit` and `collect`, strictly in turn.
final class IngestChecker: Sendable {
    private let check: IngestCheck
    private let work = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let slot = Mutex(Slot())

    private struct Slot {
        var messages: [Message] = []
        var receivedAt: Int64 = 0
        /// A committed batch, released on the checker's thread.
        var spent = CheckedBatch()
        var checked = CheckedBatch()
        var stop = false
    }

    init(check: IngestCheck) {
        self.check = check
        let thread = Thread { [self] in serve() }
        thread.name = "broker-ingest-check"
        thread.start()
    }

    /// Hands a batch to the checker's thread; `collect()` returns it checked.
    /// - Parameter spent: a batch the broker thread has committed: the checker's thread frees it
    ///   (a batch's events are thousands of buffers, and freeing them was a tenth of the broker
    ///   thread's time).
    func submit(_ messages: [Message], receivedAt: Int64, spent: CheckedBatch = CheckedBatch()) {
        slot.withLock {
            $0.messages = messages
            $0.receivedAt = receivedAt
            $0.spent = spent
        }
        work.signal()
    }

    /// Waits for the batch last submitted, checked.
    func collect() -> CheckedBatch {
        done.wait()
        return slot.withLock { slot in
            defer { slot.checked = CheckedBatch() }
            return slot.checked
        }
    }

    /// Ends the thread (after the batch in hand, if any). Call once, after the last `collect`.
    func stop() {
        slot.withLock { $0.stop = true }
        work.signal()
    }

    private func serve() {
        while true {
            work.wait()
            // The spent batch is taken out of the slot and dropped here: freed on this thread.
            let (messages, receivedAt, _, stop) = slot.withLock { slot in
                defer {
                    slot.messages = []
                    slot.spent = CheckedBatch()
                }
                return (slot.messages, slot.receivedAt, slot.spent, slot.stop)
            }
            if stop { return }
            var checked = CheckedBatch()
            checked.events.reserveCapacity(messages.count)
            checked.senders.reserveCapacity(messages.count)
            for message in messages {
                if let item = check(message, receivedAt: receivedAt) { checked.add(item) }
            }
            slot.withLock { $0.checked = checked }
            done.signal()
        }
    }
}
