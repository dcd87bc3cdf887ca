// The service plane's metrics: requests answered by service and status, their latency, and the
// workers of each service. Threading contract: made and used on the service broker's thread.

import CoreMetrics

final class ServiceMetrics {
    private let factory: any MetricsFactory
    private var answers: [String: Counter] = [:]
    private var latencies: [String: CoreMetrics.Timer] = [:]
    private var workerGauges: [String: Gauge] = [:]

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// Service names come from peers: past `BrokerMetrics.labelLimit` of them, `other`.
    private func bounded(_ service: String, among known: some Collection<String>) -> String {
        known.contains(service) || known.count < BrokerMetrics.labelLimit ? service : "other"
    }

    func answered(service: String, status: Int?, after duration: Duration) {
        let service = bounded(service, among: latencies.keys)
        let status = status.map(String.init) ?? "unreadable"
        let key = service + "\u{0}" + status
        let counter =
            answers[key]
            ?? {
                let made = Counter(label: "switchboard_service_requests_total", dimensions: [("service", service), ("status", status)], factory: factory)
                answers[key] = made
                return made
            }()
        counter.increment()
        let timer =
            latencies[service]
            ?? {
                let made = CoreMetrics.Timer(label: "switchboard_service_request_seconds", dimensions: [("service", service)], factory: factory)
                latencies[service] = made
                return made
            }()
        let (seconds, attoseconds) = duration.components
        timer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Sets each service's worker count; a service seen before and gone now reads 0 (so an
    /// alert on "no workers" sees it), rather than vanishing.
    func workers(_ counts: [String: Int]) {
        for (service, count) in counts where workerGauges[service] == nil && workerGauges.count < BrokerMetrics.labelLimit {
            workerGauges[service] = Gauge(label: "switchboard_service_workers", dimensions: [("service", service)], factory: factory)
            _ = count
        }
        for (service, gauge) in workerGauges { gauge.record(counts[service] ?? 0) }
    }
}
