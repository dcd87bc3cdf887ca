import SwitchboardObservability
import SwitchboardProtocol
import Testing

@Suite("The dashboard's hour: samples of rate and lag, their SVG paths, times as 'ago'")
struct DashboardHistoryTests {
    @Test("a sample every 10 s at most, the rate from the totals between samples, an hour kept (360)")
    func samples() {
        var history = DashboardHistory()
        #expect(history.capacity == 360)
        let t0: Int64 = 1_700_000_000_000
        let first = history.offer(at: t0, totalEvents: 100, lag: ["eto": 5])
        let early = history.offer(at: t0 + 9_999, totalEvents: 150, lag: ["eto": 9])
        let second = history.offer(at: t0 + 10_000, totalEvents: 600, lag: ["eto": 7, "filemaker": 0])
        #expect(first && !early && second, "one at once, none before 10 s, one at 10 s")
        #expect(history.samples.map(\.eventsPerSecond) == [0, 50])  // 500 events in 10 s
        #expect(history.samples.last?.lag == ["eto": 7, "filemaker": 0])
        #expect(history.groups == ["eto", "filemaker"])
        for step in 2...400 { history.offer(at: t0 + Int64(step) * 10_000, totalEvents: 600 + step, lag: [:]) }
        #expect(history.samples.count == 360)
        #expect(history.samples.first?.at == t0 + 41 * 10_000, "the oldest beyond the hour dropped")
        #expect(history.samples.last?.eventsPerSecond == 0.1)
    }

    @Test("the path: times across the width over the hour, values up the height to the scale's top")
    func path() {
        let path = SVGPath.line([(0, 0), (1800, 50), (3600, 100)], from: 0, to: 3600, top: 100, width: 600, height: 80)
        #expect(path == "M0,80L300,40L600,0")
        #expect(SVGPath.line([], from: 0, to: 1, top: 1, width: 1, height: 1) == "")
        #expect(
            SVGPath.line([(-10, 500), (1, 0.25)], from: 0, to: 3, top: 1, width: 3, height: 10) == "M0,0L1,7.5",
            "clamped: before the span at its edge, above the top at the top")
        #expect(SVGPath.ceiling(0) == 1)
        #expect(SVGPath.ceiling(480) == 500)
        #expect(SVGPath.ceiling(120) == 200)
        #expect(SVGPath.ceiling(10_002) == 20_000)
        #expect(SVGPath.ceiling(0.3) == 0.5)
        #expect(SVGPath.ceiling(1000) == 1000)
    }

    @Test("the charts the stream carries: the rate's and each group's lag, scaled, over the hour before the newest sample")
    func charts() throws {
        var history = DashboardHistory()
        let t0: Int64 = 1_700_000_000_000
        history.offer(at: t0, totalEvents: 0, lag: ["eto": 0])
        history.offer(at: t0 + 10_000, totalEvents: 4000, lag: ["eto": 10_002])
        guard case .object(let charts) = history.charts(width: 360, height: 100),
            case .object(let rate)? = charts["rate"], case .array(let lags)? = charts["lag"], case .object(let eto)? = lags.first
        else {
            Issue.record("charts: \(history.charts())")
            return
        }
        #expect(charts["to"] == .integer(t0 + 10_000) && charts["from"] == .integer(t0 + 10_000 - 3_600_000))
        #expect(rate["max"] == .double(500) && rate["now"] == .double(400))
        #expect(rate["path"] == .string("M359,100L360,20"))
        #expect(eto["group"] == .string("eto") && eto["max"] == .double(20_000) && eto["now"] == .integer(10_002))
        #expect(eto["path"] == .string("M359,100L360,50"))
    }

    @Test("times as '12 s ago', minutes, hours, days; a time ahead reads 'just now'; not a time: nil")
    func ago() {
        let now = Timestamp.parse("2026-11-27T02:00:00Z")!
        #expect(TimeAgo.text("2026-11-27T01:59:48Z", now: now) == "12 s ago")
        #expect(TimeAgo.text("2026-11-27T01:55:00.500Z", now: now) == "4 min ago")
        #expect(TimeAgo.text("2026-11-26T23:00:00Z", now: now) == "3 h ago")
        #expect(TimeAgo.text("2026-11-25T01:00:00Z", now: now) == "2 d ago")
        #expect(TimeAgo.text("2026-11-27T02:00:03Z", now: now) == "just now")
        #expect(TimeAgo.text("yesterday", now: now) == nil)
    }
}
