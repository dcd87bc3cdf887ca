// What keeps a flood out of the log. One peer can make the broker refuse thousands of times a
// second (a client with an unknown key reconnecting, a producer resending a forbidden event),
// and a line per refusal once filled the log at over a thousand lines a second. Every such line
// goes through a `LogLimiter`: a few lines a second of each kind, and a count of the rest on the
// next line written (`suppressed=N`), so the log still says how many there were.
//
// Promises, whatever the inputs:
// - per kind, at most `perInterval` lines are admitted in each window (it opens with the first
//   line after the previous window of that kind ended and lasts `interval`), and at most one
//   summary per window comes from `summaries(at:)`;
// - every line left out is counted exactly once: in the next line of its kind admitted, or in
//   a summary once its interval has ended, whichever comes first;
// - kinds are the caller's constants (refusal kinds, error codes), never a peer's words, so the
//   table stays small.

import Logging

/// Which lines of a flood of like log lines get written. A value type driven by instants: the
/// caller passes the time, tests pass made-up instants.
struct LogLimiter {
    let perInterval: Int
    let interval: Duration
    private var windows: [String: Window] = [:]

    struct Window {
        var start: ContinuousClock.Instant
        var admitted = 0
        var suppressed = 0
    }

    /// A summary of lines left out that no later line of their kind carried.
    struct Summary: Hashable {
        var kind: String
        var suppressed: Int
    }

    init(perInterval: Int, interval: Duration = .seconds(1)) {
        self.perInterval = perInterval
        self.interval = interval
    }

    /// Whether to write a line of `kind` now.
    /// - Returns: nil to leave it out (it is counted); otherwise the number of lines of this
    ///   kind left out since the last one written, for the line to carry (0: none).
    mutating func admit(_ kind: String, at now: ContinuousClock.Instant) -> Int? {
        var window = windows[kind] ?? Window(start: now)
        if now - window.start >= interval {
            window.start = now
            window.admitted = 0
        }
        guard window.admitted < perInterval else {
            window.suppressed += 1
            windows[kind] = window
            return nil
        }
        window.admitted += 1
        let suppressed = window.suppressed
        window.suppressed = 0
        windows[kind] = window
        return suppressed
    }

    /// The counts of lines left out whose interval has ended with no line of their kind written
    /// since; each is handed over once. Called periodically, so a flood that stops is still
    /// counted in the log rather than waiting for the next refusal of its kind. Forgets kinds
    /// that are quiet.
    mutating func summaries(at now: ContinuousClock.Instant) -> [Summary] {
        var due: [Summary] = []
        for (kind, window) in windows where now - window.start >= interval {
            if window.suppressed > 0 { due.append(Summary(kind: kind, suppressed: window.suppressed)) }
            windows[kind] = nil
        }
        return due.sorted { $0.kind < $1.kind }
    }
}

/// `metadata` with `suppressed=N` when lines were left out before this one.
func withSuppressed(_ suppressed: Int, _ metadata: Logger.Metadata) -> Logger.Metadata {
    guard suppressed > 0 else { return metadata }
    var metadata = metadata
    metadata["suppressed"] = "\(suppressed)"
    return metadata
}
