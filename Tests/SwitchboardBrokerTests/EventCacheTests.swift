import Foundation
import Testing

@testable import SwitchboardBroker

@Suite("Event cache")
struct EventCacheTests {
    static func event(_ busSeq: Int64) -> JournaledEvent {
        JournaledEvent(busSeq: busSeq, type: "checkin.recorded", header: Data(), parent: Data(), metadata: Data(), content: Data(count: 16))
    }

    /// Groups that keep up: the cache holds their lag plus at most `tidy` events, however many
    /// go through it (it used to fill to the limit before letting anything go).
    @Test func settledEventsGoOnceTidyMoreHaveComeIn() {
        var cache = EventCache(limit: 1_000, tidy: 100)
        var highest = 0
        for seq in Int64(1)...10_000 {
            cache[seq] = Self.event(seq)
            cache.trim(settledThrough: seq - 10)  // every group 10 behind
            highest = max(highest, cache.count)
        }
        #expect(highest <= 100 + 10)
        #expect(cache[10_000] != nil && cache[9_991] != nil)
    }

    /// A lagging group: nothing above its cursor goes before the limit, and at the limit, when
    /// letting go of the settled ones frees too little, everything goes (read again later).
    @Test func aLaggingGroupKeepsItsEventsUntilTheLimit() {
        var cache = EventCache(limit: 1_000, tidy: 100)
        for seq in Int64(1)...999 {
            cache[seq] = Self.event(seq)
            cache.trim(settledThrough: 0)
        }
        #expect(cache.count == 999)
        #expect(!cache.isFull)
        cache[1_000] = Self.event(1_000)
        #expect(cache.isFull)
        cache.trim(settledThrough: 50)  // frees 50, less than a tenth: all go
        #expect(cache.count == 0)
    }

    @Test func atTheLimitSettledEventsGoAndTheRestStay() {
        var cache = EventCache(limit: 1_000, tidy: 100)
        for seq in Int64(1)...1_000 { cache[seq] = Self.event(seq) }
        cache.trim(settledThrough: 400)
        #expect(cache.count == 600)
        #expect(cache[401] != nil && cache[400] == nil)
    }
}
