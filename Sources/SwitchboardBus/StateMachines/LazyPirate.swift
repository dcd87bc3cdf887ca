// When one service request is sent, sent again, and given up (the Lazy Pirate pattern of the
// ZeroMQ guide, chapter 4, on MDP/0.2: protocol/README.md, section 12), as a value with no I/O.
// `ServiceClient` makes one per request, tells it about the replies that come and asks it what
// to do next; time is always passed in, never read, so tests drive it with instants and no
// socket.

/// The retry rules of one request.
///
/// Promises, whatever the sequence of inputs:
/// - The first attempt goes out on the client's shared socket; every later one on a fresh
///   socket, with the same `request_id` (the caller keeps the frames).
/// - Only an idempotent request is sent again, and only while no PARTIAL has come: a stream
///   that has begun cannot be restarted without the caller seeing replies twice.
/// - An attempt lasts `attemptTime` (a third of the request's time unless set), a request that is
///   not idempotent one attempt of its whole time; no attempt runs past the request's deadline,
///   and after the deadline the only answer is `timedOut`.
/// - Once the final reply has come, the only answer is `finished`.
struct LazyPirate: Sendable {
    typealias Instant = ContinuousClock.Instant

    enum Action: Sendable, Hashable {
        /// Send the first attempt on the shared socket, and wait for replies until `until`.
        case sendOnSharedSocket(until: Instant)
        /// Wait for replies to the attempt in flight until this instant.
        case wait(until: Instant)
        /// Send the request again on a fresh socket, and wait for replies on it until `until`.
        case resendOnFreshSocket(until: Instant)
        case timedOut
        case finished
    }

    let deadline: Instant
    let attemptTime: Duration
    let idempotent: Bool
    /// When the attempt in flight is given up.
    private(set) var attemptEnd: Instant
    private(set) var attempts = 0
    private(set) var partialsSeen = false
    private(set) var isFinished = false

    init(timeout: Duration, attemptTimeout: Duration?, idempotent: Bool, now: Instant) {
        deadline = now + timeout
        attemptTime = idempotent ? (attemptTimeout ?? timeout / 3) : timeout
        self.idempotent = idempotent
        attemptEnd = min(deadline, now + attemptTime)
    }

    /// A PARTIAL came: the request may no longer be sent again.
    mutating func partial() {
        partialsSeen = true
    }

    /// The FINAL came (or the request failed another way).
    mutating func finished() {
        isFinished = true
    }

    mutating func next(now: Instant) -> Action {
        if isFinished { return .finished }
        if attempts == 0 {
            attempts = 1
            return .sendOnSharedSocket(until: attemptEnd)
        }
        if now < attemptEnd { return .wait(until: attemptEnd) }
        guard idempotent, !partialsSeen, now < deadline else { return .timedOut }
        attempts += 1
        attemptEnd = min(deadline, now + attemptTime)
        return .resendOnFreshSocket(until: attemptEnd)
    }
}
