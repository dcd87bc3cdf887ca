// When `switchboard up` restarts a program that exited on its own, and when it stops trying: the
// embedded counterpart of the systemd units' `Restart=on-failure` with a start limit, as a value
// type with no I/O. The supervisor tells it when the program started and when it exited; it
// answers with the delay before the next start, or with giving up. Time is always passed in,
// never read, so tests drive it with instants and never sleep.
//
// Promises, whatever the sequence of inputs:
// - The delays grow 1 s, 2 s, 4 s … (the configured initial delay, doubled) up to `maximumDelay`,
//   so a program that fails at once does not spin, and one that fails for a while (its back end
//   down) is still retried every `maximumDelay`.
// - A program that stayed up for `stableAfter` before it exited starts the back-off afresh: one
//   crash a day is restarted after the initial delay, not after the longest.
// - At most `limit` restarts are granted within any `window`; the exit after those is answered
//   with `giveUp`, and so is every exit after that (a given-up program stays given up).

/// How `switchboard up` restarts one program that exits unexpectedly.
public struct RestartPolicy: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// The numbers of the policy; the defaults are `up`'s.
    public struct Configuration: Sendable, Hashable {
        /// The delay before the first restart (and the first after a stable run).
        public var initialDelay: Duration
        /// The longest delay the doubling reaches.
        public var maximumDelay: Duration
        /// A run at least this long resets the back-off.
        public var stableAfter: Duration
        /// The number of restarts granted within `window`.
        public var limit: Int
        public var window: Duration

        public init(
            initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(30), stableAfter: Duration = .seconds(60),
            limit: Int = 5, window: Duration = .seconds(300)
        ) {
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
            self.stableAfter = stableAfter
            self.limit = limit
            self.window = window
        }
    }

    /// What to do about an exit.
    public enum Action: Sendable, Hashable {
        /// Start the program again after `delay`; this is restart number `restart` (of at most
        /// `limit`) within the window.
        case restart(after: Duration, restart: Int, limit: Int, window: Duration)
        /// Stop trying: `restarts` restarts within `window` did not keep it up.
        case giveUp(restarts: Int, window: Duration)
    }

    public let configuration: Configuration
    /// The instants of the restarts granted, oldest first; only those within the window count.
    private var restarts: [Instant] = []
    private var nextDelay: Duration
    private var startedAt: Instant?
    private var gaveUp = false

    public init(_ configuration: Configuration = .init()) {
        self.configuration = configuration
        self.nextDelay = configuration.initialDelay
    }

    /// The restarts granted within the window ending at `now`.
    public func restartsWithin(window now: Instant) -> Int {
        restarts.count { now - $0 < configuration.window }
    }

    /// The program was started (first or again) at `now`.
    public mutating func started(at now: Instant) {
        startedAt = now
    }

    /// The program exited at `now` while no stop was asked for.
    public mutating func exited(at now: Instant) -> Action {
        if gaveUp { return .giveUp(restarts: restartsWithin(window: now), window: configuration.window) }
        if let startedAt, now - startedAt >= configuration.stableAfter { nextDelay = configuration.initialDelay }
        startedAt = nil
        let window = configuration.window
        restarts.removeAll { now - $0 >= window }
        guard restarts.count < configuration.limit else {
            gaveUp = true
            return .giveUp(restarts: restarts.count, window: configuration.window)
        }
        let delay = nextDelay
        nextDelay = min(nextDelay * 2, configuration.maximumDelay)
        restarts.append(now)
        return .restart(after: delay, restart: restarts.count, limit: configuration.limit, window: configuration.window)
    }
}
