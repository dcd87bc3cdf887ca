/// The limits of one consumer group. Every value is read by `ConsumerGroupState`; none is read
/// from the environment here: the broker's configuration builds this.
///
/// Keys read: `ackWait`, `maxDeliver`, `backoff`, `liveness`, `bufferLimit`, `maxCredit`,
/// `maxNackDelay`.
struct ConsumerGroupSettings: Sendable, Equatable {
    /// How long a member may hold a delivery without an ACK, NACK, TERM or IN-PROGRESS before it
    /// is taken back and redelivered (last error `ack-timeout`). Default 30 s.
    var ackWait: Duration
    /// The most deliveries of one event. A NACK of the delivery that reached it, or a time-out or
    /// lost member after it, makes the event a dead letter. At least 1. Default 5.
    var maxDeliver: Int
    /// Back-off after a NACK that names no delay: the NACK of the n-th delivery waits
    /// `backoff[min(n - 1, count - 1)]`; an empty list means no wait. Default 1 s, 5 s, 30 s, 120 s.
    var backoff: [Duration]
    /// A member from whom nothing was heard for this long is dead: removed, its deliveries given
    /// to others (last error `member-lost`). Default 3 s.
    var liveness: Duration
    /// The most unsettled events above the cursor held in memory; the broker reads no more of
    /// the journal while this many are held. Replays do not count. At least 1. Default 10 000.
    var bufferLimit: Int
    /// The largest credit (deliveries in flight at once) a member may ask for. Default 1000.
    var maxCredit: Int
    /// The longest delay a NACK may ask for; longer ones are cut to it, negative ones count as
    /// none. It bounds how long one event can hold the cursor back. Default 1 hour.
    var maxNackDelay: Duration

    init(
        ackWait: Duration = .seconds(30),
        maxDeliver: Int = 5,
        backoff: [Duration] = [.seconds(1), .seconds(5), .seconds(30), .seconds(120)],
        liveness: Duration = .seconds(3),
        bufferLimit: Int = 10_000,
        maxCredit: Int = 1000,
        maxNackDelay: Duration = .seconds(3600)
    ) {
        self.ackWait = ackWait
        self.maxDeliver = maxDeliver
        self.backoff = backoff
        self.liveness = liveness
        self.bufferLimit = bufferLimit
        self.maxCredit = maxCredit
        self.maxNackDelay = maxNackDelay
    }

    /// The wait after a NACK without a delay of the delivery numbered `attempt` (1 for the first).
    func backoff(afterAttempt attempt: Int) -> Duration {
        guard !backoff.isEmpty else { return .zero }
        return backoff[min(max(attempt, 1) - 1, backoff.count - 1)]
    }
}
