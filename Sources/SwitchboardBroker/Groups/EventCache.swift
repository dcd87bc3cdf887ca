import Foundation

/// The events the broker has read from the journal for delivery, by `bus_seq`, so that a
/// delivery (and a redelivery) does not read the journal again.
///
/// Bounded twice. Events every group has settled are let go once `tidy` more events have come
/// in since the last look, so a broker whose groups keep up holds about their lag plus `tidy`
/// events, not `limit` (the soak, bench/soak, saw the broker's memory climb for as long as it
/// took to fill 50,000 events). And at `limit`, if letting go of the settled ones frees less than
/// a tenth (a group without members holds the floor back while the others move on), everything
/// goes: the cache is a bound, not a promise, and what a group still needs is read again from the
/// journal. Each look frees at least a tenth of the limit or moves the next look `tidy` events
/// further, so looking costs O(1) per cached event while the lag stays under the limit.
struct EventCache {
    static let limit = 50_000
    static let tidy = 5_000

    private var events: [Int64: JournaledEvent] = [:]
    private var lookAt: Int
    let limit: Int
    let tidy: Int

    init(limit: Int = EventCache.limit, tidy: Int = EventCache.tidy) {
        precondition(limit > 0 && tidy > 0 && tidy <= limit, "an event cache needs 0 < tidy <= limit")
        self.limit = limit
        self.tidy = tidy
        self.lookAt = tidy
    }

    var count: Int { events.count }
    var isFull: Bool { events.count >= limit }

    /// Whether event `busSeq` is held, without the copy of it (and the retains of its buffers)
    /// that `self[busSeq] == nil` makes.
    func contains(_ busSeq: Int64) -> Bool { events.index(forKey: busSeq) != nil }

    subscript(busSeq: Int64) -> JournaledEvent? {
        get { events[busSeq] }
        set { events[busSeq] = newValue }
    }

    /// Lets go of what every group has settled (`bus_seq` at or below `floor`), when it is time
    /// to look (above).
    mutating func trim(settledThrough floor: Int64) {
        guard events.count >= lookAt else { return }
        let kept = events.filter { $0.key > floor }
        events = events.count >= limit && kept.count > limit - limit / 10 ? [:] : kept
        lookAt = min(limit, events.count + tidy)
    }
}
