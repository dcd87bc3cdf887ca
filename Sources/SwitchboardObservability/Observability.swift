// One call at a program's start makes its metrics registry, bootstraps swift-metrics with it
// (so every library's default factory writes there), records which program this is, and raises
// the process's descriptor limit (see `raiseDescriptorLimit`).

import CoreMetrics
import Foundation
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

    /// Makes the program's registry and bootstraps swift-metrics with it, and raises the
    /// descriptor limit; later calls in the same process return the first one (swift-metrics is
    /// bootstrapped once per process).
    public static func bootstrap(program: String) -> Observability {
        bootstrapped.withLock { made in
            if let made { return made }
            raiseDescriptorLimit()
            let observability = Observability(program: program)
            MetricsSystem.bootstrap(observability.factory)
            made = observability
            return observability
        }
    }

    /// The admin server at `address`, or nil when the program was told `--admin none`.
    public func adminServer(
        at address: AdminAddress?, readiness: Readiness, collectors: [AdminServer.Collector] = [],
        limits: AdminServer.Limits = AdminServer.Limits(), logger: Logger, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> AdminServer? {
        address.map {
            AdminServer(
                address: $0, factory: factory, readiness: readiness, collectors: collectors, limits: limits, logger: logger,
                onListening: onListening)
        }
    }

    /// Raises the soft limit on open descriptors to the hard limit, and returns the soft limit in
    /// force afterwards. The soft limit's usual 1,024 exists for programs that use select(2),
    /// which cannot watch a descriptor above 1,023; ours never do (NIO uses epoll, libzmq epoll
    /// and poll). A broker needs one descriptor per connected kiosk, worker and monitor, plus its
    /// journal and the allow-list it re-reads: the hard limit is what the administrator granted
    /// it, and the admin server's small connection limit keeps its share bounded within that.
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return -1 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur >= rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}
