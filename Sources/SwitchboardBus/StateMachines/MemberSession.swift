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
/// - While a member, a HEARTBEAT is due one broker heartbeat after the last thing sent.
/// - The broker is given up only after its liveness (at least three of its heartbeats) with
///   nothing heard; a JOIN unanswered for `joinTimeout` is given up too, and tried again after
///   `rejoinWait`.
/// - Connections are numbered from 1 and never reused; a delivery belongs to the connection it
///   came on, or to a later one whose JOINED said this member holds it again.
/// - A settle is let out only on the connection its delivery belongs to, and only while that
///   connection is the current one; a final settle ends the delivery's bookkeeping.
/// - A JOIN claims at most `JoinHeader.maximumHolding` deliveries, lowest `bus_seq` first.
/// - A delivery is `held` only on the current connection with the broker heard within its
///   liveness less one heartbeat; it is `lost` for good once a JOINED did not give it back.
struct MemberSession: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// How long after a failed JOIN the next one goes out.
    static let rejoinWait = Duration.seconds(1)

    enum Phase: Sendable, Hashable {
        /// No connection (before the first JOIN, and after one is given up).
        case away
        /// A JOIN went out; JOINED is awaited until `deadline`.
        case joining(deadline: Instant)
        /// JOINED came: the broker's heartbeat and how long its silence may last.
        case member(heartbeat: Duration, silence: Duration)
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
    private var lastSent: Instant?
    /// Deliveries not settled yet: for each, its attempt and the connection it belongs to.
    private var outstanding: [Int64: (attempt: Int, connection: Int)] = [:]

    init(joinTimeout: Duration) {
        self.joinTimeout = joinTimeout
    }

    /// A JOIN is going out on a new socket; returns the deliveries it claims back.
    mutating func joining(now: Instant) -> [HeldDelivery] {
        phase = .joining(deadline: now + joinTimeout)
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
        phase = .member(heartbeat: heartbeat, silence: silence)
        connection += 1
        lastHeard = now
        lastSent = now
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

    /// A DELIVER came on the current connection.
    mutating func delivered(busSeq: Int64, attempt: Int) {
        outstanding[busSeq] = (attempt, connection)
    }

    func tick(now: Instant) -> Tick {
        guard case .member(let heartbeat, let silence) = phase, let lastHeard, let lastSent else {
            return .wait(until: joinDeadline ?? now)
        }
        if now - lastHeard >= silence { return .rejoin(reason: "the broker was silent for \(silence)") }
        if now - lastSent >= heartbeat { return .sendHeartbeat }
        return .wait(until: min(lastHeard + silence, lastSent + heartbeat))
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
    /// **Fencing**). `held` while the delivery belongs to the current connection and the broker
    /// was heard within its liveness less one heartbeat: the broker removes a member only after
    /// its liveness with nothing from it, and the member heard the broker at most a heartbeat
    /// after the broker last heard the member, so the broker still counts the delivery as this
    /// member's. `lost` once it belongs to a replaced connection (the JOINED on the new one did
    /// not give it back). `inDoubt` in between: silent longer than that, or between connections.
    func standing(busSeq: Int64, attempt: Int, cameOn: Int, now: Instant) -> DeliveryStanding {
        guard owner(busSeq: busSeq, attempt: attempt, cameOn: cameOn) == connection else { return .lost }
        guard case .member(let heartbeat, let silence) = phase, let lastHeard, now - lastHeard < silence - heartbeat else {
            return .inDoubt
        }
        return .held
    }

    /// Something is to go out for connection `cameOn` (a HEARTBEAT, or a settle of `delivery`);
    /// returns whether it may (its connection is the current one). A final settle ends the
    /// delivery's bookkeeping whether or not it goes out.
    mutating func sending(
        on cameOn: Int, settling delivery: (busSeq: Int64, attempt: Int, final: Bool)? = nil, now: Instant
    ) -> Bool {
        var owner = cameOn
        if let delivery {
            owner = self.owner(busSeq: delivery.busSeq, attempt: delivery.attempt, cameOn: cameOn)
            if delivery.final, outstanding[delivery.busSeq]?.attempt == delivery.attempt {
                outstanding[delivery.busSeq] = nil
            }
        }
        guard connection == owner else { return false }
        lastSent = now
        return true
    }
}
