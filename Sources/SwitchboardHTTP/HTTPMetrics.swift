// Each back-end attempt counted by back end, operation and status, and timed. Operation names
// are our own (`filemaker.create`…), statuses are HTTP codes: both bounded.

import CoreMetrics
import Synchronization

final class HTTPMetrics: Sendable {
    private let factory: any MetricsFactory
    private let counters = Mutex<[String: Counter]>([:])
    private let timers = Mutex<[String: CoreMetrics.Timer]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    func record(backend: String, operation: String, status: String, elapsed: Duration) {
        let key = "\(backend) \(operation) \(status)"
        let counter = counters.withLock { counters in
            if let known = counters[key] { return known }
            let made = Counter(
                label: "switchboard_backend_requests_total",
                dimensions: [("backend", backend), ("operation", operation), ("status", status)],
                factory: factory)
            counters[key] = made
            return made
        }
        counter.increment()
        let timer = timers.withLock { timers in
            let key = "\(backend) \(operation)"
            if let known = timers[key] { return known }
            let made = CoreMetrics.Timer(
                label: "switchboard_backend_request_seconds", dimensions: [("backend", backend), ("operation", operation)], factory: factory
            )
            timers[key] = made
            return made
        }
        let (seconds, attoseconds) = elapsed.components
        timer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
