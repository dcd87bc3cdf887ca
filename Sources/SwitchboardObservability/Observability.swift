// One call at a program's start makes its metrics registry, bootstraps swift-metrics with it
// (so every library's default factory writes there), and records which program this is.

import CoreMetrics
public import Logging
public import Prometheus
import ServiceLifecycle
import SwitchboardProtocol

/// A program's metrics and its admin server's parts.
public struct Observability: Sendable {
    public let program: String
    public let factory: SwitchboardMetricsFactory
    public var registry: PrometheusCollectorRegistry { factory.registry }

    /// A registry of its own, not bootstrapped into swift-metrics: for tests and for several
    /// brokers in one process.
    public init(program: String) {
        self.program = program
        self.factory = SwitchboardMetricsFactory()
        CoreMetrics.Gauge(
            label: "switchboard_build_info", dimensions: [("program", program), ("version", ProtocolVersion.current.description)],
            factory: factory
        ).record(1)
    }

    /// Makes the program's registry and bootstraps swift-metrics with it. Call once, at start.
    public static func bootstrap(program: String) -> Observability {
        let observability = Observability(program: program)
        MetricsSystem.bootstrap(observability.factory)
        return observability
    }

    /// The admin server at `address`, or nil when the program was told `--admin none`.
    public func adminServer(
        at address: AdminAddress?, readiness: Readiness, collectors: [AdminServer.Collector] = [], logger: Logger
    ) -> AdminServer? {
        address.map { AdminServer(address: $0, factory: factory, readiness: readiness, collectors: collectors, logger: logger) }
    }
}
