// When one service request is sent, sent again, and given up: the Lazy Pirate pattern of the
// ZeroMQ guide (chapter 4) on MDP/0.2 (protocol/README.md, section 12), as a value with no I/O.
// `ServiceClient` makes one per request, tells it what happened to each attempt and asks it what
// to do next; time is passed in, never read, so tests drive it with instants and no socket.

/// The retry rules of one request.
///
/// Promises, whatever the sequence of inputs:
/// - The first attempt goes out on the client's shared socket, every later one on a fresh
///   socket with the same `request_id` (the caller keeps the frames).
/// - An attempt lasts `attemptTime`: a third of the request's time for an idempotent request
///   unless set, the whole time otherwise. No attempt runs past the request's deadline.
/// - A request that went out is sent again only if it is idempotent and no PARTIAL has come (a
///   stream that has begun cannot be restarted without the caller seeing replies twice).
/// - A request that never went out (no connection took it: the broker is down, or refused this
///   client's key) may always be sent again, on a fresh socket: nothing can run twice.
/// - After the deadline the answer is `unreachable` if no attempt ever went out, `timedOut`
///   otherwise; once the final reply has come, it is `finished`.
struct LazyPirate: Sendable, Hashable {
    typealias Instant = ContinuousClock.Instant

    enum Action: Sendable, Hashable {
        /// Send on the shared socket, and wait for the final reply until `until`.
        case sendOnSharedSocket(until: Instant)
        /// Send again on a fresh socket, and wait for the final reply on it until `until`.
        case sendOnFreshSocket(until: Instant)
        /// No final reply in time, after the request went out at least once.
        case timedOut
        /// No connection took the request in all its time.
        case unreachable
        case finished
    }

    let deadline: Instant
    let attemptTime: Duration
    let idempotent: Bool
    private(set) var attempts = 0
    /// Whether any attempt's message was taken by a connection (it may have reached a worker).
    private(set) var wentOut = false
    private(set) var partialsSeen = false
    private(set) var isFinished = false

    init(timeout: Duration, attemptTimeout: Duration?, idempotent: Bool, now: Instant) {
        deadline = now + timeout
        attemptTime = idempotent ? min(attemptTimeout ?? timeout / 3, timeout) : timeout
        self.idempotent = idempotent
    }

    /// A connection took the attempt's message.
    mutating func sent() { wentOut = true }

    /// A PARTIAL came: the request may no longer be sent again.
    mutating func partial() { partialsSeen = true }

    /// The FINAL came (or the request failed another way).
    mutating func finished() { isFinished = true }

    /// What to do now: called before the first attempt, and whenever an attempt has ended
    /// (its time is up, or no connection took its message in that time).
    mutating func next(now: Instant) -> Action {
        if isFinished { return .finished }
        if attempts > 0 {
            guard now < deadline else { return wentOut ? .timedOut : .unreachable }
            guard !wentOut || (idempotent && !partialsSeen) else { return .timedOut }
        }
        attempts += 1
        let until = min(deadline, now + attemptTime)
        return attempts == 1 ? .sendOnSharedSocket(until: until) : .sendOnFreshSocket(until: until)
    }
}
