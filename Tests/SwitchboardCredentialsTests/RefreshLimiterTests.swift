import Foundation
import Testing

@testable import SwitchboardCredentials

@Suite struct RefreshLimiterTests {
    @Test func slidingWindowPerKey() {
        var limiter = RefreshLimiter(limit: RefreshLimit(maximum: 2, per: 10))
        let t = Date(timeIntervalSince1970: 0)
        func at(_ seconds: TimeInterval) -> Date { t.addingTimeInterval(seconds) }
        #expect(limiter.admit(fileMaker, at: at(0)) == .allowed)
        #expect(limiter.admit(fileMaker, at: at(4)) == .allowed)
        #expect(limiter.admit(fileMaker, at: at(5)) == .refused(until: at(10)))
        #expect(limiter.admit(eto, at: at(5)) == .allowed)
        #expect(limiter.recentCount(fileMaker, at: at(5)) == 2)
        #expect(limiter.admit(fileMaker, at: at(10)) == .allowed)
        #expect(limiter.admit(fileMaker, at: at(11)) == .refused(until: at(14)))
        #expect(limiter.admit(fileMaker, at: at(14)) == .allowed)
        #expect(limiter.recentCount(fileMaker, at: at(100)) == 0)
    }

    @Test func afterUseRefreshesHaveTheirOwnWindow() {
        var limiter = RefreshLimiter(limit: RefreshLimit(maximum: 1, per: 10, afterUse: 2))
        let t = Date(timeIntervalSince1970: 0)
        func at(_ seconds: TimeInterval) -> Date { t.addingTimeInterval(seconds) }
        #expect(limiter.admit(fileMaker, at: at(0)) == .allowed)
        #expect(limiter.admit(fileMaker, at: at(1)) == .refused(until: at(10)))
        #expect(limiter.admit(fileMaker, at: at(2), afterUse: true) == .allowed)
        #expect(limiter.admit(fileMaker, at: at(3), afterUse: true) == .allowed)
        #expect(limiter.admit(fileMaker, at: at(4), afterUse: true) == .refused(until: at(12)))
        #expect(limiter.recentCount(fileMaker, at: at(4)) == 3)
        #expect(limiter.admit(fileMaker, at: at(12), afterUse: true) == .allowed)
    }
}
