// Progress on long work (`switchboard-kiosk load`, `import`, `flush`, `switchboard dlq replay
// --all`): on a terminal one line rewritten in place (`\r`, then erase to the end of the line)
// a few times a second; otherwise, as in a log or a pipe, a plain line every few seconds. Each
// says how many are done, of how many, at what rate and how long the rest will take at it.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The state and the text of one progress report. Pure: times are given, so its maths and
/// formatting are tested with instants, not sleeps; `ProgressWatch` drives it with the clock.
public struct ProgressLine: Sendable {
    /// What is being counted, in the past tense: "delivered", "replayed".
    public var verb: String
    /// How many there are in all, when known (it may change: a generator still adding).
    public var total: Int?
    /// Rewrite one line in place (a terminal), or print lines (anything else).
    public let terminal: Bool
    /// The least time between two outputs: 250 ms on a terminal, 5 s otherwise.
    public let interval: Duration
    public let started: ContinuousClock.Instant
    private var last: ContinuousClock.Instant
    private var printed = false

    public init(
        verb: String, total: Int?, terminal: Bool = ProgressLine.standardOutputIsTerminal, interval: Duration? = nil,
        started: ContinuousClock.Instant = .now
    ) {
        self.verb = verb
        self.total = total
        self.terminal = terminal
        self.interval = interval ?? (terminal ? .milliseconds(250) : .seconds(5))
        self.started = started
        self.last = started
    }

    /// Whether standard output is a terminal.
    public static var standardOutputIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// The text to write now that `done` are done, or nil when the last output is less than
    /// `interval` old (the first comes `interval` after the start: short work prints nothing).
    public mutating func update(done: Int, at now: ContinuousClock.Instant) -> String? {
        guard last.duration(to: now) >= interval else { return nil }
        last = now
        printed = true
        let text = Self.text(verb: verb, done: done, total: total, elapsed: started.duration(to: now))
        return terminal ? "\r" + text + "\u{1B}[K" : text + "\n"
    }

    /// The last text: on a terminal that printed a line, the line's final state and a newline
    /// (what follows starts on a line of its own); nil otherwise (the command's summary follows).
    public mutating func finish(done: Int, at now: ContinuousClock.Instant) -> String? {
        guard terminal && printed else { return nil }
        printed = false
        return "\r" + Self.text(verb: verb, done: done, total: total, elapsed: started.duration(to: now)) + "\u{1B}[K\n"
    }

    /// "delivered 4,000 of 10,000 (812/s, 8 s left)"; without a total "delivered 4,000 (812/s)";
    /// before anything is done the rate and time left are unknown: "delivered 0 of 10,000".
    public static func text(verb: String, done: Int, total: Int?, elapsed: Duration) -> String {
        var text = "\(verb) \(grouped(done))"
        if let total { text += " of \(grouped(total))" }
        guard let rate = rate(done: done, elapsed: elapsed) else { return text }
        let shown = rate >= 10 ? grouped(Int(rate.rounded())) : String(Double(Int(rate * 10)) / 10)
        if let total, let left = timeLeft(done: done, total: total, elapsed: elapsed) {
            return text + " (\(shown)/s, \(describe(left)) left)"
        }
        return text + " (\(shown)/s)"
    }

    /// Done per second since the start; nil before anything is done or any time has passed.
    public static func rate(done: Int, elapsed: Duration) -> Double? {
        let seconds = Self.seconds(elapsed)
        guard done > 0, seconds > 0 else { return nil }
        return Double(done) / seconds
    }

    /// How long the rest takes at the rate so far (whole seconds, rounded up); zero when all
    /// are done, nil when the rate is unknown.
    public static func timeLeft(done: Int, total: Int, elapsed: Duration) -> Duration? {
        guard done < total else { return .zero }
        guard let rate = rate(done: done, elapsed: elapsed) else { return nil }
        return .seconds(Int64((Double(total - done) / rate).rounded(.up)))
    }

    /// "8 s", "2 min 5 s", "1 h 3 min".
    public static func describe(_ duration: Duration) -> String {
        let seconds = max(0, Int(duration.components.seconds))
        if seconds < 60 { return "\(seconds) s" }
        if seconds < 3600 { return "\(seconds / 60) min \(seconds % 60) s" }
        return "\(seconds / 3600) h \(seconds % 3600 / 60) min"
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// 10000 as "10,000".
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out += "," }
            out.append(digit)
        }
        return (value < 0 ? "-" : "") + out
    }
}

/// Runs work while a `ProgressLine` reports a count it reads (`done`, polled a few times a
/// second), then writes the line's last state.
public enum ProgressWatch {
    /// Standard output through the C library's stream, as `print` writes, flushed at once (a
    /// `\r` line must show now, and in order with what `print` wrote before it).
    @Sendable public static func standardOutput(_ text: String) {
        print(text, terminator: "")
        fflush(nil)  // every stream: naming `stdout` (a C global) is not concurrency-safe
    }

    /// - Parameter final: the count when `body` has returned, from its result (the source
    ///   `done` reads may be closed by then); else the last of `done` and what it read before.
    public static func run<T>(
        _ line: ProgressLine, done: @escaping @Sendable () async -> Int,
        write: @escaping @Sendable (String) -> Void = ProgressWatch.standardOutput, final: (T) -> Int? = { _ in nil },
        _ body: () async throws -> T
    ) async throws -> T {
        let watcher = Task { () -> (ProgressLine, Int) in
            var line = line
            var latest = 0
            let poll = min(line.interval, .milliseconds(250))
            while !Task.isCancelled {
                try? await Task.sleep(for: poll)
                if Task.isCancelled { break }
                latest = max(latest, await done())
                if let text = line.update(done: latest, at: .now) { write(text) }
            }
            return (line, latest)
        }
        let result: T
        do {
            result = try await body()
        } catch {
            watcher.cancel()
            _ = await watcher.value
            throw error
        }
        watcher.cancel()
        var (last, latest) = await watcher.value
        var count = latest
        if let given = final(result) { count = given } else { count = max(latest, await done()) }
        if let text = last.finish(done: count, at: .now) { write(text) }
        return result
    }
}
