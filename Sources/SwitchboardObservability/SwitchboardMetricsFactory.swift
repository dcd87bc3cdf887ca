// The swift-metrics back end of every Switchboard program: Prometheus, with the catalog's help
// texts and buckets. Libraries take an `any MetricsFactory` (default `MetricsSystem.factory`),
// so a program bootstraps this once and a test gives each broker or worker a registry of its
// own.

public import CoreMetrics
public import Prometheus

/// A `MetricsFactory` writing into one `PrometheusCollectorRegistry`.
///
/// Timers and aggregating recorders become histograms with the catalog's buckets (seconds for
/// timers); non-aggregating recorders and meters become gauges; counters are counters.
public struct SwitchboardMetricsFactory: MetricsFactory, Sendable {
    public let registry: PrometheusCollectorRegistry

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
    }

    /// The whole name as the descriptor's metric name, with the catalog's help text.
    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: MetricCatalog.description(of: label)?.help ?? "")
    }

    private func buckets(_ label: String) -> [Double] {
        let buckets = MetricCatalog.description(of: label)?.buckets ?? []
        return buckets.isEmpty ? MetricCatalog.fastBuckets : buckets
    }

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets(label))
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let buckets = buckets(label).map { Duration.nanoseconds(Int64(($0 * 1e9).rounded())) }
        return registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets)
    }

    public func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge {
            registry.unregisterGauge(gauge)
        } else if let histogram = handler as? ValueHistogram {
            registry.unregisterValueHistogram(histogram)
        }
    }

    public func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    public func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}
