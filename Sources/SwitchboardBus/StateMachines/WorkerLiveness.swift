// The heartbeat, liveness and reconnect rules of one Majordomo worker socket (protocol/README.md,
// section 12), as a value with no I/O. `ServiceWorker` keeps one per socket slot for the slot's
// whole life, tells it what it sent and heard and when, and asks it what to do: when the next
// HEARTBEAT is due, whether the broker has gone silent, how long to wait before reconnecting.
// Time is always passed in, never read, so tests drive it with instants and no socket.
//
// The broker heartbeats at its own interval. If that is longer than ours, the silence limit
// follows it: it doubles after each silence (the broker may just be slower than us) and is set
// from the gap between the broker's HEARTBEATs once two are heard in a row, so a worker
// configured with a shorter interval than its broker settles after one reconnect instead of
// reconnecting again and again.

/// When a worker socket heartbeats, gives the broker up, and comes back.
///
/// Promises, whatever the sequence of inputs:
/// - While connected, a HEARTBEAT is due one `heartbeat` after the last thing sent, never later.
/// - The broker is given up only after `brokerInterval × liveness` with nothing heard from it.
/// - `brokerInterval` is never below our own `heartbeat`, and never above 60 s.
/// - After a silence the wait before reconnecting starts at `reconnectInitial` and doubles up to
///   `reconnectMax`; a DISCONNECT from the broker resets it and reconnects at once.
struct WorkerLiveness: Sendable {
    typealias Instant = ContinuousClock.Instant

    struct Settings: Sendable, Hashable {
        var heartbeat: Duration
        var liveness: Int
        var reconnectInitial: Duration
        var reconnectMax: Duration
    }

    /// Why a connection ended, as far as reconnecting goes.
    enum Ending: Sendable, Hashable {
        /// The broker said DISCONNECT: it wants a fresh start.
        case disconnected
        /// Nothing heard for the silence limit.
        case brokerSilent
    }

    /// The longest the silence limit's interval grows to.
    static let longestBrokerInterval = Duration.seconds(60)

    let settings: Settings
    /// The broker's heartbeat interval as far as this worker knows it.
    private(set) var brokerInterval: Duration
    /// What the next reconnect after a silence waits.
    private(set) var backoff: Duration
    private var lastHeard: Instant
    private var lastSent: Instant
    /// The previous HEARTBEAT from the broker, when nothing else came between it and now.
    private var lastBrokerHeartbeat: Instant?

    init(settings: Settings, now: Instant) {
        self.settings = settings
        brokerInterval = settings.heartbeat
        backoff = settings.reconnectInitial
        lastHeard = now
        lastSent = now
    }

    /// A new socket sent READY.
    mutating func connected(now: Instant) {
        lastHeard = now
        lastSent = now
        lastBrokerHeartbeat = nil
    }

    /// Something went out on the socket (READY, HEARTBEAT, PARTIAL, FINAL).
    mutating func sent(now: Instant) {
        lastSent = max(lastSent, now)
    }

    /// When the next HEARTBEAT is due if nothing else goes out first.
    var nextHeartbeat: Instant { lastSent + settings.heartbeat }

    func heartbeatDue(now: Instant) -> Bool { now >= nextHeartbeat }

    /// A message came from the broker; `heartbeat` says whether it was a HEARTBEAT.
    mutating func heard(heartbeat: Bool, now: Instant) {
        lastHeard = now
        guard heartbeat else { return }
        if let previous = lastBrokerHeartbeat {
            brokerInterval = min(max(settings.heartbeat, now - previous), Self.longestBrokerInterval)
        }
        lastBrokerHeartbeat = now
    }

    /// A request has been answered. HEARTBEATs queued while it ran say nothing of the broker's
    /// interval, so the next two heard start the measurement again.
    mutating func requestAnswered(now: Instant) {
        lastHeard = now
        lastBrokerHeartbeat = nil
    }

    /// When the broker counts as silent if nothing comes before.
    var silenceDeadline: Instant { lastHeard + brokerInterval * settings.liveness }

    func brokerSilent(now: Instant) -> Bool { now >= silenceDeadline }

    /// The connection ended; returns how long to wait before opening the next one.
    mutating func ended(_ ending: Ending) -> Duration {
        switch ending {
        case .disconnected:
            backoff = settings.reconnectInitial
            return .zero
        case .brokerSilent:
            brokerInterval = min(brokerInterval * 2, Self.longestBrokerInterval)
            let wait = backoff
            backoff = min(backoff * 2, settings.reconnectMax)
            return wait
        }
    }
}
