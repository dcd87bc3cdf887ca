import Foundation

/// The last events the broker journaled, kept in memory in `bus_seq` order, so the groups read
/// what was just written without asking the journal for it again (and without parsing a stored
/// header for its ordering key).
///
/// The ring holds a run of consecutive sequence numbers: every event the broker journals is
/// offered in order as it is published (`BrokerCore.publish`), and an event that does not follow
/// the last one (after a restart, say) starts the run again. `read` answers only what the run
/// covers up to the journal's head, with the answer `Journal.read` would give; for anything
/// else it says nil and the caller reads the journal.
struct RecentEvents {
    struct Entry {
        var event: JournaledEvent
        /// The header's `key`.
        var key: String?
    }

    static let capacity = 8192

    private var ring: [Entry?]
    /// Where `first` is in the ring.
    private var start = 0
    private(set) var count = 0
    /// The `bus_seq` of the oldest entry held.
    private(set) var first: Int64 = 0

    init(capacity: Int = RecentEvents.capacity) {
        precondition(capacity > 0, "a ring needs room for one event")
        ring = Array(repeating: nil, count: capacity)
    }

    /// The `bus_seq` of the newest entry held (`first - 1` when empty).
    var last: Int64 { first + Int64(count) - 1 }

    /// Keeps a journaled event; the oldest goes when the ring is full.
    /// - Returns: the entry that went, if one did.
    @discardableResult
    mutating func append(_ event: JournaledEvent, key: String?) -> Entry? {
        if count > 0, event.busSeq != last + 1 {
            count = 0
        }
        if count == 0 {
            start = 0
            first = event.busSeq
        }
        var evicted: Entry?
        if count == ring.count {
            evicted = ring[start].take()
            start = (start + 1) % ring.count
            first += 1
            count -= 1
        }
        let slot = (start + count) % ring.count
        if evicted == nil { evicted = ring[slot].take() }
        ring[slot] = Entry(event: event, key: key)
        count += 1
        return evicted
    }

    /// `Journal.read(from:to: nil, topics:limit:)` (scan window `scanWindow`) from memory, or nil
    /// when the ring does not hold every sequence number from the read's start to `head`.
    /// - Parameter journalFirst: the journal's lowest retained `bus_seq` (retention may have
    ///   deleted events the ring still holds).
    /// The broker reads through `visit`; this array form is what tests hold against the journal.
    func read(
        from: Int64, topics: [String], limit: Int, head: Int64, journalFirst: Int64, scanWindow: Int64 = 50_000
    ) -> (events: [Entry], through: Int64)? {
        var events: [Entry] = []
        let through = visit(from: from, topics: topics, limit: limit, head: head, journalFirst: journalFirst, scanWindow: scanWindow) {
            events.append($0)
        }
        return through.map { (events, $0) }
    }

    /// `read` without the array: `body` sees each entry where it lies in the ring, in order, and
    /// the result is the read's `through` (nil as for `read`). The broker's groups read every
    /// event this way; an array of copies, each event's buffers retained and released once more,
    /// was a twentieth of the broker thread while a group consumed.
    func visit(
        from: Int64, topics: [String], limit: Int, head: Int64, journalFirst: Int64, scanWindow: Int64 = 50_000,
        _ body: (borrowing Entry) -> Void
    ) -> Int64? {
        let begin = max(from, journalFirst)
        guard count > 0, begin <= head, head == last, begin >= first, limit > 0 else { return nil }
        let end = min(head, begin + scanWindow - 1)
        var taken = 0
        var busSeq = begin
        while busSeq <= end {
            let index = (start + Int(busSeq - first)) % ring.count
            if topics.isEmpty || topics.contains(where: { ring[index]!.event.type.utf8.starts(with: $0.utf8) }) {
                body(ring[index]!)
                taken += 1
                if taken == limit { return busSeq }
            }
            busSeq += 1
        }
        return end
    }
}
