import SwitchboardProtocol

// A consumer group member's side of the connection (protocol/README.md, section 15), as a value
// with no I/O: joining with a time limit, heartbeating while idle, giving the broker up after its
// liveness period, and the bookkeeping of deliveries across connections (what to claim back in
// the next JOIN, which connection a settle belongs to). `GroupConsumer` owns one for its life,
// tells it what happened and when, and carries out what it answers. Time is always passed in,
// never read, so tests drive it with instants and no socket.

/// Whether a member may act on a delivery it holds (`MemberSession.standing`).
public enum DeliveryStanding: Sendable, Hashable {
    /// The broker counts it as this member's: start the effect.
    case held
    /// The broker may have given it to another member: do not start anything.
    case lost
    /// Not known yet: the broker has been silent, or the member is joining again.
    case inDoubt
}

/// A group member's connection rules.
///
/// Promises, whatever the sequence of inputs:
/// - While a member, a HEARTBEAT (with a new `echo`) is due every half broker heartbeat, busy or
///   not: its answer is what keeps deliveries `held`.
/// - The broker is given up only after its liveness (at least three of its heartbeats) with
///   nothing heard; a JOIN unanswered for `joinTimeout` is given up too, and tried again after
///   `rejoinWait`.
/// - Connections are numbered from 1 and never reused; a delivery belongs to the connection it
///   came on, or to a later one whose JOINED said this member holds it again.
/// - A settle is let out only on the connection its delivery belongs to, and only while that
///   connection is the current one and joined; a final settle that goes out, or whose delivery
///   was not given back, ends the delivery's bookkeeping. One that finds no connection keeps it
///   (the next JOIN claims the delivery) and waits for the next JOINED.
/// - A JOIN claims at most `JoinHeader.maximumHolding` deliveries, lowest `bus_seq` first.
/// - A delivery is `held` only on the current connection while the broker read, within its
///   liveness less one heartbeat, something this member sent on it (measured from when it was
///   sent: the JOIN, or a HEARTBEAT whose echo came back); it is `lost` for good once a JOINED
///   did not give it back.
struct MemberSession: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// How long after a failed JOIN the next one goes out.
    static let rejoinWait = Duration.seconds(1)

    enum Phase: Sendable, Hashable {
        /// No connection (before the first JOIN, and after one is given up).
        case away
        /// A JOIN went out; JOINED is awaited until `deadline`.
        case joining(deadline: Instant)
        /// JOINED came: the broker's heartbeat, how long its silence may last, and how long the
        /// broker lets this member be silent (its `liveness`).
        case member(heartbeat: Duration, silence: Duration, liveness: Duration)
    }

    /// What may go out for a connection (`sending`).
    enum Sending: Sendable, Hashable {
        case send
        /// The delivery's connection was replaced and the delivery not given back.
        case replaced
        /// No connection is joined now: a final settle waits for the next JOINED.
        case notJoined
    }

    /// What the member's loop should do next.
    enum Tick: Sendable, Hashable {
        /// Wait for a message until this instant, then ask again.
        case wait(until: Instant)
        case sendHeartbeat
        /// Give this connection up and join again on a new socket.
        case rejoin(reason: String)
    }

    let joinTimeout: Duration
    private(set) var phase = Phase.away
    /// The connection in use now (0 before the first JOINED).
    private(set) var connection = 0
    private var lastHeard: Instant?
    /// When the JOIN in flight was sent (taken before it went out).
    private var joinSent: Instant?
    /// When this member sent the newest message the broker has surely read on this connection:
    /// what the fence is measured from.
    private(set) var lastAnswered: Instant?
    /// HEARTBEATs whose HEAD has not come back yet: echo → when it was sent.
    private var echoes: [Int64: Instant] = [:]
    private var nextEcho: Int64 = 0
    private var lastEchoSent: Instant?
    /// Whether this connection's broker answers echoes (JOINED's `echoes`); without, the fence
    /// falls back to the last message heard.
    private var brokerEchoes = false
    /// Deliveries not settled yet: for each, its attempt and the connection it belongs to.
    private var outstanding: [Int64: (attempt: Int, connection: Int)] = [:]

    init(joinTimeout: Duration) {
        self.joinTimeout = joinTimeout
    }

    /// A JOIN is going out on a new socket; returns the deliveries it claims back.
    mutating func joining(now: Instant) -> [HeldDelivery] {
        phase = .joining(deadline: now + joinTimeout)
        joinSent = now
        return outstanding.sorted { $0.key < $1.key }.prefix(JoinHeader.maximumHolding).map {
            HeldDelivery(busSeq: $0.key, attempt: $0.value.attempt)
        }
    }

    /// When the JOIN in flight is given up, if one is.
    var joinDeadline: Instant? {
        guard case .joining(let deadline) = phase else { return nil }
        return deadline
    }

    /// The JOIN failed (no JOINED in time, a refusal that may pass, a socket error); returns how
    /// long to wait before the next.
    mutating func joinFailed() -> Duration {
        phase = .away
        return Self.rejoinWait
    }

    /// JOINED came: a new connection starts. Deliveries it names in `held` are claimed back onto
    /// it; the rest of what was outstanding went to other members. Returns the connection.
    @discardableResult
    mutating func joined(_ header: JoinedHeader, now: Instant) -> Int {
        let heartbeat = Duration.milliseconds(max(10, header.heartbeatMilliseconds))
        let silence = Duration.milliseconds(max(header.livenessMilliseconds, 3 * header.heartbeatMilliseconds))
        phase = .member(heartbeat: heartbeat, silence: silence, liveness: .milliseconds(max(1, header.livenessMilliseconds)))
        connection += 1
        lastHeard = now
        // JOINED answers the JOIN: the broker read it, and it went out no earlier than this.
        lastAnswered = joinSent ?? now
        brokerEchoes = header.echoes == true
        echoes = [:]
        lastEchoSent = now
        let kept = Set(header.held ?? [])
        for (busSeq, held) in outstanding {
            outstanding[busSeq] = kept.contains(busSeq) ? (held.attempt, connection) : nil
        }
        return connection
    }

    /// The connection is given up (a silence, NOT_MEMBER, leaving); deliveries stay outstanding
    /// for the next JOIN to claim.
    mutating func lost() {
        phase = .away
    }

    /// Anything came from the broker.
    mutating func heard(now: Instant) {
        lastHeard = now
    }

    /// A HEARTBEAT is going out on the current connection; returns the echo it carries.
    mutating func heartbeatGoingOut(now: Instant) -> Int64 {
        nextEcho = nextEcho == HeartbeatHeader.maximumEcho ? 0 : nextEcho + 1
        echoes[nextEcho] = now
        lastEchoSent = now
        // A HEAD lost on its way (the broker's send queue full) leaves its echo here: keep the
        // newest few only.
        if echoes.count > 16, let oldest = echoes.min(by: { $0.value < $1.value })?.key { echoes[oldest] = nil }
        return nextEcho
    }

    /// A HEAD came with `echo`: the broker read that HEARTBEAT, and everything sent before it.
    mutating func answered(echo: Int64) {
        guard let sent = echoes[echo] else { return }
        echoes = echoes.filter { $0.value > sent }
        if lastAnswered.map({ $0 < sent }) ?? true { lastAnswered = sent }
    }

    /// A DELIVER came on the current connection.
    mutating func delivered(busSeq: Int64, attempt: Int) {
        outstanding[busSeq] = (attempt, connection)
    }

    func tick(now: Instant) -> Tick {
        guard case .member(let heartbeat, let silence, _) = phase, let lastHeard, let lastEchoSent else {
            return .wait(until: joinDeadline ?? now)
        }
        if now - lastHeard >= silence { return .rejoin(reason: "the broker was silent for \(silence)") }
        // Every half heartbeat, so the fence's proof is never older than that and a round trip.
        let due = lastEchoSent + heartbeat / 2
        if now >= due { return .sendHeartbeat }
        return .wait(until: min(lastHeard + silence, due))
    }

    /// The connection a delivery belongs to now.
    func owner(busSeq: Int64, attempt: Int, cameOn: Int) -> Int {
        guard let held = outstanding[busSeq], held.attempt == attempt else { return cameOn }
        return held.connection
    }

    /// Whether a delivery belongs to the connection in use now.
    func isCurrent(busSeq: Int64, attempt: Int, cameOn: Int) -> Bool {
        owner(busSeq: busSeq, attempt: attempt, cameOn: cameOn) == connection
    }

    /// Whether this member may start an effect for a delivery now (protocol section 15.3,
    /// **Fencing**). `held` while the delivery belongs to the current connection and something
    /// this member sent on it, and the broker surely read, went out less than the broker's
    /// liveness less one heartbeat ago: the broker removes a member only after its liveness with
    /// nothing read from it, and it read that message no earlier than it was sent, so the broker
    /// still counts the delivery as this member's, with a heartbeat to spare for the effect.
    /// What only came from the broker proves nothing here: a member can hear the broker while
    /// its own messages are held up. `lost` once the delivery belongs to a replaced connection
    /// (the JOINED on the new one did not give it back). `inDoubt` in between: no recent proof,
    /// or between connections. With a broker that does not answer echoes (JOINED without
    /// `echoes`), the last message heard stands in for the proof.
    func standing(busSeq: Int64, attempt: Int, cameOn: Int, now: Instant) -> DeliveryStanding {
        guard owner(busSeq: busSeq, attempt: attempt, cameOn: cameOn) == connection else { return .lost }
        guard case .member(let heartbeat, _, let liveness) = phase, let proof = brokerEchoes ? lastAnswered : lastHeard,
            now - proof < max(liveness - heartbeat, liveness / 2)
        else { return .inDoubt }
        return .held
    }

    /// Something is to go out for connection `cameOn` (a HEARTBEAT, or a settle of `delivery`):
    /// whether it may now (its connection is the current one, and joined). A final settle that
    /// may, or whose delivery went elsewhere, ends the delivery's bookkeeping; one that finds no
    /// connection joined keeps it, so that the next JOIN claims the delivery and the settle can
    /// go out on the new connection if JOINED gives it back.
    mutating func sending(on cameOn: Int, settling delivery: (busSeq: Int64, attempt: Int, final: Bool)? = nil) -> Sending {
        var owner = cameOn
        if let delivery { owner = self.owner(busSeq: delivery.busSeq, attempt: delivery.attempt, cameOn: cameOn) }
        let result: Sending
        if connection != owner {
            result = .replaced
        } else if case .member = phase {
            result = .send
        } else {
            return .notJoined
        }
        if let delivery, delivery.final, outstanding[delivery.busSeq]?.attempt == delivery.attempt {
            outstanding[delivery.busSeq] = nil
        }
        return result
    }
}
