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

    func answered(service: String, status: Int?, after duration: Duration) {
        // Service names come from peers: past `BrokerMetrics.labelLimit` of them, `other`.
        let known = latencies[service] != nil || latencies.count < BrokerMetrics.labelLimit
        let service = known ? service : "other"
        let status = status.map(String.init) ?? "unreadable"
        let key = service + "\u{0}" + status
        if answers[key] == nil {
            answers[key] = Counter(
                label: "switchboard_service_requests_total", dimensions: [("service", service), ("status", status)], factory: factory)
        }
        answers[key]?.increment()
        if latencies[service] == nil {
            latencies[service] = CoreMetrics.Timer(
                label: "switchboard_service_request_seconds", dimensions: [("service", service)], factory: factory)
        }
        let (seconds, attoseconds) = duration.components
        latencies[service]?.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Sets each service's worker count; a service seen before and gone now reads 0 (so an
    /// alert on "no workers" sees it), rather than vanishing.
    func workers(_ counts: [String: Int]) {
        for service in counts.keys where workerGauges[service] == nil && workerGauges.count < BrokerMetrics.labelLimit {
            workerGauges[service] = Gauge(label: "switchboard_service_workers", dimensions: [("service", service)], factory: factory)
        }
        for (service, gauge) in workerGauges { gauge.record(counts[service] ?? 0) }
    }
}
