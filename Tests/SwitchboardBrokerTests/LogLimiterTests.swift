import Testing

@testable import SwitchboardBroker

/// `LogLimiter` driven by made-up instants: no clock, no waiting.
@Suite("Log limiter")
struct LogLimiterTests {
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test("a few lines a second per kind; the next line written carries the count of those left out")
    func limitsAndCounts() {
        var limiter = LogLimiter(perInterval: 3)
        #expect((0..<3).map { limiter.admit("unknown-key", at: at($0)) } == [0, 0, 0])
        #expect((3..<100).compactMap { limiter.admit("unknown-key", at: at($0)) }.isEmpty, "97 left out")
        // Another kind has its own budget.
        #expect(limiter.admit("mechanism", at: at(500)) == 0)
        // A second after the window opened, the first line carries the 97.
        #expect(limiter.admit("unknown-key", at: at(1_000)) == 97)
        #expect(limiter.admit("unknown-key", at: at(1_001)) == 0)
        #expect(limiter.admit("unknown-key", at: at(1_002)) == 0)
        #expect(limiter.admit("unknown-key", at: at(1_003)) == nil)
        #expect(limiter.admit("unknown-key", at: at(2_003)) == 1)
    }

    @Test("over any run, lines written plus the counts they carry plus the summaries equal the lines offered")
    func nothingLost() {
        var limiter = LogLimiter(perInterval: 5)
        var written = 0
        var counted = 0
        // 10,000 refusals over 10 seconds (1,000 a second, the flood of issue 26), with a
        // summary pass every 250 ms as a periodic caller would make.
        for tick in 0..<10_000 {
            if let suppressed = limiter.admit("unknown-key", at: at(tick)) {
                written += 1
                counted += suppressed
            }
            if tick % 250 == 0 { counted += limiter.summaries(at: at(tick)).map(\.suppressed).reduce(0, +) }
        }
        counted += limiter.summaries(at: at(20_000)).map(\.suppressed).reduce(0, +)
        #expect(written + counted == 10_000)
        #expect(written <= 5 * 11, "\(written) lines")
        #expect(limiter.summaries(at: at(30_000)).isEmpty, "each count is handed over once")
    }

    @Test("a summary comes only once the window has ended, one per kind, and only for kinds that left lines out")
    func summaries() {
        var limiter = LogLimiter(perInterval: 1)
        _ = limiter.admit("b", at: at(0))
        _ = limiter.admit("b", at: at(1))
        _ = limiter.admit("b", at: at(2))
        _ = limiter.admit("a", at: at(0))
        _ = limiter.admit("a", at: at(3))
        _ = limiter.admit("quiet", at: at(0))
        #expect(limiter.summaries(at: at(999)).isEmpty, "the window is still open")
        #expect(limiter.summaries(at: at(1_000)) == [.init(kind: "a", suppressed: 1), .init(kind: "b", suppressed: 2)])
        #expect(limiter.summaries(at: at(5_000)).isEmpty)
        // After a summary the kind starts afresh: its next line carries nothing more.
        #expect(limiter.admit("b", at: at(5_001)) == 0)
    }
}
