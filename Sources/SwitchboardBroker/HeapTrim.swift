// Giving memory back after a crowd of connections has gone.
//
// Each ZeroMQ connection costs the broker some tens of kilobytes of libzmq buffers and pipes.
// When a thousand peers connect and go, libzmq frees all of it, but the allocator keeps the
// freed pages: glibc's sits on them in its free lists, jemalloc's (switchboard-broker links
// jemalloc) purges them only as later allocations drive its decay, and the process's RSS stays
// where the crowd left it (measured with glibc: 46 MB before 1,000 peers, 70 MB after them,
// 100 MB after eight such rounds, 48 MB after a malloc_trim). Nothing leaks, but an operator
// watching RSS cannot tell that from a leak, and the memory is not available to anything else
// on the machine. So at each heartbeat the broker looks at how much the allocator holds free,
// and when that grew by `threshold` since it last gave pages back, gives them back (glibc's
// malloc_trim, or jemalloc's purge of every arena). Both calls act on the whole process (and
// take every arena's lock while they walk it), so only a broker that owns its process does
// this (`BrokerConfiguration.trimsHeap`, set by switchboard-broker), never one embedded in
// another program or a test process.

import CMalloc

/// When to give the allocator's free pages back to the kernel: a value type, driven with the free
/// byte count at each heartbeat, tested without an allocator.
struct HeapTrim {
    /// Growth of free memory that is worth a trim: well above what a heartbeat's own work frees.
    var threshold = 16 << 20
    /// The free byte count after the last trim, or the lowest since (free memory reused).
    private(set) var floor: Int?

    /// Whether to trim now, given the allocator's free bytes.
    mutating func shouldTrim(freeBytes: Int) -> Bool {
        guard let floor else {
            self.floor = freeBytes
            return false
        }
        guard freeBytes >= floor + threshold else {
            self.floor = min(floor, freeBytes)
            return false
        }
        // Trimming keeps the chunks in the free lists (only their pages go back), so the count
        // stays: it is the new floor.
        self.floor = freeBytes
        return true
    }

    /// The allocator serving this process's malloc: "jemalloc" (switchboard-broker links it),
    /// "glibc" (a test process, or a broker built without it), or "unknown".
    static var allocator: String { String(cString: switchboard_heap_allocator()) }

    /// Checks and trims; returns the free bytes given back, if it trimmed (for the log).
    mutating func run() -> Int? {
        let free = switchboard_heap_free_bytes()
        guard free > 0, shouldTrim(freeBytes: Int(free)) else { return nil }
        _ = switchboard_heap_trim()
        return Int(free)
    }
}
