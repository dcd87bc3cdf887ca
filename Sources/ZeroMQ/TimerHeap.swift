/// The timers of an `IOThread`: a binary min-heap of deadlines, each naming its action by id.
///
/// Cancelling removes only the action (the owner's dictionary); the heap entry stays until its
/// deadline comes up and is then skipped. So cancelling costs nothing here, and a timer that is
/// nearly always cancelled (a request's time-out) costs one push and one pop.
struct TimerHeap {
    struct Entry {
        var deadline: ContinuousClock.Instant
        var id: Int
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }
    var first: Entry? { entries.first }

    mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popFirst() -> Entry? {
        guard !entries.isEmpty else { return nil }
        entries.swapAt(0, entries.count - 1)
        let first = entries.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count && entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count && entries[right].deadline < entries[smallest].deadline { smallest = right }
            guard smallest != parent else { break }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
        return first
    }

    mutating func removeAll() { entries.removeAll() }
}
