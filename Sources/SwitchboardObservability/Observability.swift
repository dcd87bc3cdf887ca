// One call at a program's start makes its metrics registry, bootstraps swift-metrics with it
// (so every library's default factory writes there), and records which program this is.

import CoreMetrics
public import Logging
public import Prometheus
import ServiceLifecycle
import SwitchboardProtocol
import Synchronization

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

    private static let bootstrapped = Mutex<Observability?>(nil)

    /// Makes the program's registry and bootstraps swift-metrics with it; later calls in the same
    /// process return the first one (swift-metrics is bootstrapped once per process).
    public static func bootstrap(program: String) -> Observability {
        bootstrapped.withLock { made in
            if let made { return made }
            let observability = Observability(program: program)
            MetricsSystem.bootstrap(observability.factory)
            made = observability
            return observability
        }
    }

    /// The admin server at `address`, or nil when the program was told `--admin none`.
    public func adminServer(
        at address: AdminAddress?, readiness: Readiness, collectors: [AdminServer.Collector] = [], logger: Logger
    ) -> AdminServer? {
        address.map { AdminServer(address: $0, factory: factory, readiness: readiness, collectors: collectors, logger: logger) }
    }
}
