import SwitchboardRuntime
import Synchronization
import Testing

/// A value the watcher and the test both reach.
private final class Shared<Value: Sendable>: Sendable {
    let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func get() -> Value { value.withLock { $0 } }
    func change(_ body: @Sendable (inout Value) -> Void) { value.withLock { body(&$0) } }
}

@Suite("ProgressLine: progress on long work, its maths and its text")
struct ProgressLineTests {
    let start = ContinuousClock.now

    @Test("rate and time left from counts and elapsed time; unknown before anything is done")
    func maths() {
        #expect(ProgressLine.rate(done: 4000, elapsed: .seconds(5)) == 800)
        #expect(ProgressLine.rate(done: 0, elapsed: .seconds(5)) == nil)
        #expect(ProgressLine.rate(done: 10, elapsed: .zero) == nil)
        #expect(ProgressLine.timeLeft(done: 4000, total: 10_000, elapsed: .seconds(5)) == .seconds(8))  // 6,000 at 800/s: 7.5 s, rounded up
        #expect(ProgressLine.timeLeft(done: 1, total: 3, elapsed: .milliseconds(1500)) == .seconds(3))
        #expect(ProgressLine.timeLeft(done: 10, total: 10, elapsed: .seconds(1)) == .zero)
        #expect(ProgressLine.timeLeft(done: 0, total: 10, elapsed: .seconds(1)) == nil)
    }

    @Test("the text: count of total, rate, time left; durations in s, min, h; thousands grouped")
    func text() {
        #expect(
            ProgressLine.text(verb: "delivered", done: 4000, total: 10_000, elapsed: .seconds(5))
                == "delivered 4,000 of 10,000 (800/s, 8 s left)")
        #expect(ProgressLine.text(verb: "delivered", done: 0, total: 10_000, elapsed: .seconds(5)) == "delivered 0 of 10,000")
        #expect(ProgressLine.text(verb: "replayed", done: 3, total: nil, elapsed: .seconds(2)) == "replayed 3 (1.5/s)")
        #expect(
            ProgressLine.text(verb: "delivered", done: 100, total: 100_000, elapsed: .seconds(10))
                == "delivered 100 of 100,000 (10/s, 2 h 46 min left)")
        #expect(ProgressLine.describe(.seconds(125)) == "2 min 5 s")
        #expect(ProgressLine.describe(.seconds(59)) == "59 s")
    }

    @Test("on a terminal: one line rewritten in place at most every 250 ms, and a last state with a newline")
    func terminal() {
        var line = ProgressLine(verb: "delivered", total: 1000, terminal: true, started: start)
        #expect(line.update(done: 10, at: start + .milliseconds(100)) == nil, "nothing before the first interval")
        #expect(line.update(done: 100, at: start + .milliseconds(250)) == "\rdelivered 100 of 1,000 (400/s, 3 s left)\u{1B}[K")
        #expect(line.update(done: 150, at: start + .milliseconds(400)) == nil, "at most one line each 250 ms")
        #expect(line.update(done: 500, at: start + .milliseconds(500)) == "\rdelivered 500 of 1,000 (1,000/s, 1 s left)\u{1B}[K")
        #expect(line.finish(done: 1000, at: start + .seconds(1)) == "\rdelivered 1,000 of 1,000 (1,000/s, 0 s left)\u{1B}[K\n")
        var quick = ProgressLine(verb: "delivered", total: 5, terminal: true, started: start)
        #expect(quick.finish(done: 5, at: start + .milliseconds(10)) == nil, "work shorter than the interval prints nothing")
    }

    @Test("not a terminal: plain lines every 5 s, no carriage return, no last line (the summary follows)")
    func log() {
        var line = ProgressLine(verb: "delivered", total: nil, terminal: false, started: start)
        #expect(line.interval == .seconds(5))
        #expect(line.update(done: 100, at: start + .seconds(4)) == nil)
        #expect(line.update(done: 500, at: start + .seconds(5)) == "delivered 500 (100/s)\n")
        #expect(line.update(done: 600, at: start + .seconds(9)) == nil)
        #expect(line.update(done: 1000, at: start + .seconds(10)) == "delivered 1,000 (100/s)\n")
        #expect(line.finish(done: 1000, at: start + .seconds(11)) == nil)
    }

    @Test("ProgressWatch polls the count while the work runs and writes the last state")
    func watch() async throws {
        let written = Shared<[String]>([])
        let count = Shared(0)
        let line = ProgressLine(verb: "delivered", total: 3, terminal: true, interval: .milliseconds(10))
        let result = try await ProgressWatch.run(line, done: { count.get() }, write: { text in written.change { $0.append(text) } }) {
            for _ in 0..<3 {
                // Advance once the watcher has reported the count so far: waits for events, not times.
                let seen = count.get()
                while !written.get().contains(where: { $0.contains("delivered \(seen) of 3") }) { await Task.yield() }
                count.change { $0 += 1 }
            }
            return "done"
        }
        #expect(result == "done")
        let lines = written.get()
        #expect(lines.last?.hasPrefix("\rdelivered 3 of 3") == true && lines.last?.hasSuffix("\n") == true, "\(lines)")
    }
}
