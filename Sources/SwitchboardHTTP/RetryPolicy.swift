// The retry rules as a value with a pure `decide` function, so tests can drive it without I/O
// and the client's loop only has to act on the decision.

public import Foundation

/// When and after how long a failed attempt is sent again.
///
/// Only idempotent requests are retried, and only after:
/// - HTTP 408, 429, 502, 503 or 504, unless the API calls the response a logical failure
///   (``APIProfile/isLogicalFailure``: a FileMaker 500 or 502 that carries a code);
/// - a connection failure (refused, reset, closed before the response) or a timeout.
///
/// The delay before attempt `n + 1` is the response's `Retry-After` (seconds or an HTTP date),
/// capped at ``maxRetryAfter``; without one it is "full jitter": a random duration between
/// zero and `min(maxDelay, baseDelay × 2^(n-1))`.
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included; 1 disables retries.
    public var maxAttempts: Int
    public var baseDelay: Duration
    public var maxDelay: Duration
    /// The longest `Retry-After` honoured; a longer one is cut to this.
    public var maxRetryAfter: Duration
    /// The statuses that are retried.
    public var retryableStatuses: Set<Int>
    /// Sleeps between attempts; tests replace it to record delays without waiting.
    public var sleep: @Sendable (Duration) async throws -> Void
    /// Returns a number in `0..<1` for the jitter; tests can fix it.
    public var random: @Sendable () -> Double

    public init(
        maxAttempts: Int = 3, baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(10),
        maxRetryAfter: Duration = .seconds(30), retryableStatuses: Set<Int> = [408, 429, 502, 503, 504],
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
        self.retryableStatuses = retryableStatuses
        self.sleep = sleep
        self.random = random
    }

    public static let `default` = RetryPolicy()
    /// One attempt, never retried.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// How an attempt ended, as far as retrying is concerned.
    public enum Outcome: Sendable {
        /// A response arrived. `logicalFailure` is the API's verdict; `retryAfter` the parsed header.
        case response(status: Int, retryAfter: Duration?, logicalFailure: Bool)
        /// No response: the connection failed or timed out (both retryable).
        case connectionFailure
        /// No response, and trying again cannot help (TLS refused, cancelled, too large…).
        case permanentFailure
    }

    public enum Decision: Sendable, Equatable {
        case retry(after: Duration)
        case stop
    }

    /// What to do after attempt number `attempt` (1-based) of a request ended with `outcome`.
    public func decide(attempt: Int, idempotent: Bool, outcome: Outcome) -> Decision {
        guard idempotent, attempt < maxAttempts else { return .stop }
        switch outcome {
        case .permanentFailure:
            return .stop
        case .connectionFailure:
            return .retry(after: backoff(attempt: attempt))
        case .response(let status, let retryAfter, let logicalFailure):
            guard retryableStatuses.contains(status), !logicalFailure else { return .stop }
            if let retryAfter { return .retry(after: min(max(retryAfter, .zero), maxRetryAfter)) }
            return .retry(after: backoff(attempt: attempt))
        }
    }

    /// Full jitter: uniform in `0 ... min(maxDelay, baseDelay × 2^(attempt-1))`.
    func backoff(attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(maxDelay, baseDelay * (1 << exponent))
        return ceiling * min(max(random(), 0), 1)
    }

    /// A `Retry-After` value: delay seconds, or an HTTP date (RFC 9110: IMF-fixdate, and the
    /// obsolete RFC 850 and asctime forms) measured from `now`. `nil` when it is neither.
    public static func parseRetryAfter(_ value: String, now: Date = Date()) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) { return seconds >= 0 ? .seconds(seconds) : nil }
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) {
                let seconds = max(0, date.timeIntervalSince(now))
                return .milliseconds(Int64((seconds * 1000).rounded()))
            }
        }
        return nil
    }
}
