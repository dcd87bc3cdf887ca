import SwitchboardMonitor
import Testing

@Suite struct RateBoardTests {
    let start = ContinuousClock.now
    let kiosk = RateBoard.Key(type: "checkin.recorded", producer: "riverside-1")
    let worker = RateBoard.Key(type: "filemaker.record.written", producer: "filemaker-worker")

    @Test("before the first sample there are totals but no rate")
    func firstSample() {
        var board = RateBoard()
        board.count(kiosk)
        board.sample(at: start)
        #expect(board.rows() == [.init(key: kiosk, perSecond: 0, total: 1)])
    }

    @Test("a rate is the difference over the time between samples, late ticks included")
    func rateOverElapsedTime() {
        var board = RateBoard()
        board.sample(at: start)
        for _ in 0..<6 { board.count(kiosk) }
        board.count(worker)
        // The tick came late: 2 s after the first, not 1.
        board.sample(at: start + .seconds(2))
        #expect(board.seconds == 2)
        #expect(board.rows() == [.init(key: kiosk, perSecond: 3, total: 6), .init(key: worker, perSecond: 0.5, total: 1)])
    }

    @Test("only the last 10 s count: older samples are dropped")
    func window() {
        var board = RateBoard()
        for second in 0...30 {
            if second < 20 { for _ in 0..<10 { board.count(kiosk) } }
            board.sample(at: start + .seconds(second))
        }
        // Events stopped at 20 s: by 30 s the window holds none of them.
        #expect(board.seconds == 10)
        #expect(board.rows() == [.init(key: kiosk, perSecond: 0, total: 200)])
        var busy = RateBoard()
        for second in 0...30 {
            for _ in 0..<4 { busy.count(kiosk) }
            busy.sample(at: start + .seconds(second))
        }
        #expect(busy.rows() == [.init(key: kiosk, perSecond: 4, total: 124)])
    }

    @Test("the tables name types and producers, counts and the window only")
    func rendering() {
        var board = RateBoard()
        #expect(board.render(at: "T").hasSuffix("No events yet.\n"))
        board.sample(at: start)
        board.count(kiosk)
        board.sample(at: start + .seconds(1))
        #expect(
            board.render(at: "T")
                == "T  events per second over the last 1 s\n" + "type              producer     per second  total\n"
                + "checkin.recorded  riverside-1  1.0         1\n")
        #expect(board.renderTotals(at: "T") == "T  totals\ntype              producer     total\ncheckin.recorded  riverside-1  1\n")
    }
}
