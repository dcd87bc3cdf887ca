import SwitchboardProtocol

// The delivery rules of `OutboxSender`, as a value type with no I/O: which entries to send and
// when to send them again, what each ACK, NACK and ERROR means for the outbox, when to send a
// HEARTBEAT, how long to wait for answers and when a run is over. The sender loads from the
// outbox, sends on its socket and receives, tells this machine what happened, and carries out
// what it returns (delete these entries, mark that one refused, log, count). Time is always
// passed in, never read, so tests drive every rule with a manual clock and no sockets.
//
// A run is a loop of rounds, each in this order:
//  1. `beginRound(at:)`: ends the run at the deadline; says whether a HEARTBEAT is due and what
//     to load from the outbox to fill the window.
//  2. `loaded(_:keepWaiting:at:)`: ends the run when the outbox has nothing left; otherwise
//     queues this round's sends: the loaded entries, then the resends that are due.
//  3. `nextSend()` with `sendCompleted(_:at:)` or `sendBlocked()` for each; `endSends()`.
//  4. `wait(at:)`: how long to wait for answers; `received(_:at:)` for what came.

/// Delivery of one outbox to the broker's ingest endpoint, decided without I/O.
///
/// Promises, whatever the sequence of inputs:
/// - No more than `window` entries are in flight (sent, unanswered) at once.
/// - Entries are sent for the first time in `producer_seq` order, each once; only an entry in
///   flight is resent, only once its `resendAfter` has passed since its last send, and a
///   round's resends go in `producer_seq` order. From its second resend on, each resend of an
///   entry doubles its wait, up to `maxResendFactor` times `resendAfter`: a broker slower than
///   `resendAfter` (a loaded machine) is not sent the whole window again every period, which
///   made it slower still. A fresh connection (`connectionReplaced`) makes everything in flight
///   due at once, and its waits start over.
/// - An ACK deletes the entry it names, in flight or not (an answer to a send this run never
///   made, before a restart). A non-retryable NACK, or an ERROR whose `ref` is the `event_id`
///   of an entry in flight, refuses that entry for good: it is never sent again. The exception
///   is a `conflict` that names the producer's head in the journal: the entry is numbered again
///   above it (by the caller, in the outbox) and, under its new number, loaded and sent anew.
/// - After a send that could not be made, nothing more is sent in that round.
/// - The run is over only at the deadline, or when the outbox has nothing left to load,
///   nothing is in flight and the caller does not want to keep waiting for new events.
struct OutboxDelivery: Sendable {
    typealias Instant = ContinuousClock.Instant

    struct Settings: Sendable, Hashable {
        /// Entries in flight without an answer, at most.
        var window: Int
        /// Send an entry again when its answer has not come in this long.
        var resendAfter: Duration
        /// How long to wait for answers when nothing is in flight.
        var idlePoll: Duration
        /// How often to send a HEARTBEAT.
        var heartbeat: Duration
    }

    /// An answer from the broker, decoded by the caller.
    enum Answer: Sendable, Hashable {
        case ack(AckHeader)
        /// One commit's ACKs (protocol 1.1).
        case acks(Acks)
        case nack(NackHeader)
        case error(ErrorHeader)
        /// A HEAD, or anything the caller could not read: it shows only that the broker is there.
        case other
    }

    /// What to read from the outbox to fill the window: pending entries after `after`.
    struct Load: Sendable, Hashable {
        var after: Int64
        var limit: Int
    }

    /// The start of a round: what to do before filling the window.
    struct Round: Sendable, Hashable {
        /// Send a HEARTBEAT (with the outbox's depth) now.
        var heartbeat: Bool
        /// Read these entries from the outbox; `nil` when the window is full.
        var load: Load?
    }

    /// Whether the run goes on after loading.
    enum Progress: Sendable, Hashable {
        /// Nothing is left to send or to wait for: the run is over.
        case done
        /// There are sends to make (possibly none) and answers to wait for.
        case proceed
    }

    /// One send to make: an entry's first send or a resend (the frames are the same).
    struct Send: Sendable, Hashable {
        var entry: OutboxEntry
        var isResend: Bool
    }

    /// What a round sent, for the outbox's attempt counts and the log.
    struct Sent: Sendable, Hashable {
        /// The entries sent, first sends and resends, in the order they went.
        var producerSeqs: [Int64] = []
        var resent = 0
    }

    /// An entry refused for good: to be marked in the outbox with `reason` and never resent.
    struct Refusal: Sendable, Hashable {
        var producerSeq: Int64
        var eventID: String
        /// The protocol's error code (a bounded set, fit for a metric's label).
        var code: String
        /// The broker's words.
        var detail: String

        /// What the outbox keeps for a person to read: `code: detail`.
        var reason: String { "\(code): \(detail)" }
    }

    /// An entry the broker refused as `conflict`: its number belongs to another event, because
    /// the outbox's numbering went back. To be numbered again above `producerHead`.
    struct Renumbering: Sendable, Hashable {
        var producerSeq: Int64
        var eventID: String
        var producerHead: Int64
    }

    /// What a batch of answers asks the caller to do.
    struct Actions: Sendable, Hashable {
        /// Delete these entries from the outbox (some may already be gone).
        var acknowledge: [Int64] = []
        /// Mark these entries refused.
        var refuse: [Refusal] = []
        /// Number these entries again (`Outbox.renumber`).
        var renumber: [Renumbering] = []
        /// ERRORs that named no entry in flight: nothing to do but tell a person.
        var unmatchedErrors: [ErrorHeader] = []
    }

    let settings: Settings
    /// Where the broker is: named in the problem a blocked send reports.
    let endpoint: String
    let deadline: Instant?

    /// How the run has gone so far (all but `pending`, which only the outbox knows).
    private(set) var report = DeliveryReport()
    /// An entry sent and not yet answered, and when it is due for a resend.
    struct Held: Sendable, Hashable {
        var entry: OutboxEntry
        var due: Instant
        /// How often it has been resent on this connection.
        var resends = 0
    }

    /// The longest wait before a resend, in `resendAfter`s (2 s × 4 in our kiosk).
    static let maxResendFactor = 4

    /// The wait after a send of an entry resent `resends` times before on this connection:
    /// `resendAfter`, twice that, four times, and so on up to `maxResendFactor` times.
    func resendWait(after resends: Int) -> Duration {
        settings.resendAfter * min(1 << min(resends, 8), Self.maxResendFactor)
    }

    /// Sent and not yet answered, by `producer_seq`.
    private(set) var inFlight: [Int64: Held] = [:]
    /// The highest `producer_seq` sent for the first time: the next load starts after it.
    private(set) var lastLoaded: Int64 = 0
    private(set) var nextHeartbeat: Instant
    /// This round's sends, in order, the index of the next one, and what it has sent.
    private var queue: [Send] = []
    private var next = 0
    private var sent = Sent()

    /// - Parameter start: the run's first instant; the first round sends a HEARTBEAT.
    init(settings: Settings, endpoint: String, deadline: Instant?, start: Instant) {
        self.settings = settings
        self.endpoint = endpoint
        self.deadline = deadline
        self.nextHeartbeat = start
    }

    /// Starts a round; `nil` when the deadline has come and the run is over.
    mutating func beginRound(at now: Instant) -> Round? {
        if let deadline, now >= deadline { return nil }
        var heartbeat = false
        if now >= nextHeartbeat {
            heartbeat = true
            nextHeartbeat = now + settings.heartbeat
        }
        let room = settings.window - inFlight.count
        return Round(heartbeat: heartbeat, load: room > 0 ? Load(after: lastLoaded, limit: room) : nil)
    }

    /// Takes what the round's `load` read (nothing if it asked for nothing) and queues the
    /// round's sends: those entries first, then the resends that are due at `now`.
    /// - Parameter keepWaiting: asked only when the outbox is empty and nothing is in flight;
    ///   `true` keeps the run going for events still to come.
    mutating func loaded(_ entries: [OutboxEntry], keepWaiting: @autoclosure () -> Bool, at now: Instant) -> Progress {
        queue = []
        next = 0
        sent = Sent()
        if entries.isEmpty && inFlight.isEmpty && !keepWaiting() { return .done }
        // Only what the window has room for, once each, in sequence order: the outbox gives
        // them that way, and the window rule should not depend on it.
        let fresh = entries.filter { $0.producerSeq > lastLoaded }.sorted { $0.producerSeq < $1.producerSeq }
        queue = fresh.prefix(max(settings.window - inFlight.count, 0)).map { Send(entry: $0, isResend: false) }
        let due = inFlight.values.filter { $0.due <= now }.map(\.entry).sorted { $0.producerSeq < $1.producerSeq }
        queue += due.map { Send(entry: $0, isResend: true) }
        return .proceed
    }

    /// The next send of this round, or `nil` when the round has sent all it will.
    mutating func nextSend() -> Send? {
        guard next < queue.count else { return nil }
        defer { next += 1 }
        return queue[next]
    }

    /// `send` went out at `now`: it is in flight, due for a resend `resendAfter` later.
    mutating func sendCompleted(_ send: Send, at now: Instant) {
        let seq = send.entry.producerSeq
        if send.isResend {
            // An answer cannot have taken it out of flight mid-round; if it had, not resending
            // it again is right too.
            if var held = inFlight[seq] {
                held.due = now + resendWait(after: held.resends)
                held.resends += 1
                inFlight[seq] = held
            }
            sent.resent += 1
        } else {
            inFlight[seq] = Held(entry: send.entry, due: now + settings.resendAfter)
            lastLoaded = max(lastLoaded, seq)
        }
        sent.producerSeqs.append(seq)
    }

    /// The run goes on on a new socket: what is in flight was sent on the old one (maybe never
    /// delivered), so it is all due at `now`, and its waits start again from `resendAfter`.
    mutating func connectionReplaced(at now: Instant) {
        for seq in inFlight.keys {
            inFlight[seq]?.due = now
            inFlight[seq]?.resends = 0
        }
    }

    /// The send `nextSend()` gave could not go out (the socket stayed blocked): the broker is not
    /// reachable, so the round sends nothing more. An entry never sent is loaded again next
    /// round; one being resent stays due.
    mutating func sendBlocked() {
        next = queue.count
        report.lastProblem = "the broker at \(endpoint) is not reachable"
    }

    /// Ends the round's sending: what went out, for the outbox's attempt counts.
    mutating func endSends() -> Sent {
        next = queue.count
        defer { sent = Sent() }
        return sent
    }

    /// How long to wait for answers from `now`: until the next resend falls due (or
    /// `idlePoll` with nothing in flight), but no later than the next HEARTBEAT or the
    /// deadline, and at least a millisecond (a zero wait would spin).
    func wait(at now: Instant) -> Duration {
        var wait = inFlight.values.map(\.due).min().map { now.duration(to: $0) } ?? settings.idlePoll
        wait = min(wait, now.duration(to: nextHeartbeat))
        if let deadline { wait = min(wait, now.duration(to: deadline)) }
        return max(wait, .milliseconds(1))
    }

    /// Takes a batch of answers received at `now` and says what to do about them.
    mutating func received(_ answers: [Answer], at now: Instant) -> Actions {
        var actions = Actions()
        for answer in answers {
            report.brokerAnswered = true
            switch answer {
            case .ack(let ack):
                acknowledged(ack.producerSeq, busSeq: ack.busSeq, duplicate: ack.duplicate, into: &actions)
            case .acks(let acks):
                for entry in acks.entries {
                    acknowledged(entry.producerSeq, busSeq: entry.busSeq, duplicate: entry.duplicate, into: &actions)
                }
            case .nack(let nack):
                let refusal = Refusal(
                    producerSeq: nack.producerSeq, eventID: nack.eventID, code: nack.code.rawValue, detail: nack.reason)
                report.lastProblem = refusal.reason
                if nack.retryable {
                    report.retryReason = refusal.reason
                    // Sent again after the usual interval, counted from the refusal.
                    let due = now + settings.resendAfter
                    inFlight[nack.producerSeq]?.due = due
                } else if nack.code == .conflict, let head = nack.producerHead {
                    // Its new number is above everything loaded so far, so it is loaded again.
                    inFlight[nack.producerSeq] = nil
                    actions.renumber.append(Renumbering(producerSeq: nack.producerSeq, eventID: nack.eventID, producerHead: head))
                    report.renumbered += 1
                } else {
                    inFlight[nack.producerSeq] = nil
                    actions.refuse.append(refusal)
                    report.rejected += 1
                }
            case .error(let error):
                report.lastProblem = "\(error.code.rawValue): \(error.message)"
                // Only an entry in flight can be the one an ERROR is about: the broker names it
                // by `event_id`, when it could read one.
                if let ref = error.ref, let held = inFlight.first(where: { $0.value.entry.eventID == ref }) {
                    inFlight[held.key] = nil
                    actions.refuse.append(
                        Refusal(producerSeq: held.key, eventID: ref, code: error.code.rawValue, detail: error.message))
                    report.rejected += 1
                } else {
                    actions.unmatchedErrors.append(error)
                }
            case .other:
                continue
            }
        }
        return actions
    }

    /// Every ACK deletes its entry, even one no longer in flight here (an answer to a send made
    /// before a restart, or to a resend).
    private mutating func acknowledged(_ producerSeq: Int64, busSeq: Int64, duplicate: Bool, into actions: inout Actions) {
        actions.acknowledge.append(producerSeq)
        inFlight[producerSeq] = nil
        if duplicate { report.duplicates += 1 } else { report.delivered += 1 }
        report.retryReason = nil
        report.lastBusSeq = max(report.lastBusSeq ?? busSeq, busSeq)
    }
}
