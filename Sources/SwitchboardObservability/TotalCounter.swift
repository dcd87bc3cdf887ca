// A Prometheus counter for a figure that is only ever read as a total (CPU time from getrusage,
// the check-ins an outbox file has held over its life): each reading adds what is new since the
// last one, so the counter never goes back, whoever reads the total and how often.

public import CoreMetrics
import Synchronization

public final class TotalCounter: Sendable {
    private let counter: FloatingPointCounter
    /// The total already counted (readings may come from concurrent scrapes).
    private let counted = Mutex<Double>(0)

    public init(label: String, factory: any MetricsFactory) {
        counter = FloatingPointCounter(label: label, factory: factory)
    }

    /// Counts up to `total`; a lower total than before counts nothing.
    public func update(total: Double) {
        let delta = counted.withLock { counted -> Double in
            defer { counted = max(counted, total) }
            return total - counted
        }
        if delta > 0 { counter.increment(by: delta) }
    }
}
