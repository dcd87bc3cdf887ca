// The admin HTTP server every program runs beside its work: `/metrics` for Prometheus,
// `/health/live` and `/health/ready` for a supervisor (systemd, Kubernetes, `switchboard up`).
// Loopback by default: the figures name groups, services and producers, which an operator
// shares with the monitoring host on purpose, not with whoever reaches the machine. Bounded in
// time and connections (`Limits`, AdminConnections.swift) so that whoever does reach it cannot
// take the descriptors the program needs for its real work.

import CoreMetrics
import Foundation
import Hummingbird
import HummingbirdCore
public import Logging
import NIOCore
import Prometheus
public import ServiceLifecycle

/// Serves `/metrics`, `/health/live` and `/health/ready` until graceful shutdown or
/// cancellation.
public struct AdminServer: Service {
    /// Runs before each scrape to bring gauges up to date (outbox depth, group lag…); must not
    /// block the caller's thread.
    public typealias Collector = @Sendable () async -> Void

    public let address: AdminAddress
    public let limits: Limits
    let registry: PrometheusCollectorRegistry
    let readiness: Readiness
    let collectors: [Collector]
    let process: ProcessMetrics
    let readyGauge: CoreMetrics.Gauge
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    /// - Parameters:
    ///   - factory: the factory whose registry `/metrics` emits; the process figures and the
    ///     `switchboard_ready` gauge are made in it.
    ///   - limits: its time-outs and connection limit (the defaults are listed on `Limits`).
    ///   - onListening: called once with the bound port (useful with port 0).
    public init(
        address: AdminAddress, factory: SwitchboardMetricsFactory, readiness: Readiness, collectors: [Collector] = [],
        limits: Limits = Limits(), logger: Logger, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.address = address
        self.limits = limits
        self.registry = factory.registry
        self.readiness = readiness
        self.collectors = collectors
        self.process = ProcessMetrics(factory: factory)
        self.readyGauge = CoreMetrics.Gauge(label: "switchboard_ready", factory: factory)
        self.logger = logger
        self.onListening = onListening
    }

    public func run() async throws {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            await self.collect()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            let bytes = self.registry.emitToBuffer()
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        router.get("/health/live") { _, _ -> Response in
            Self.text(.ok, "live\n")
        }
        router.get("/health/ready") { _, _ -> Response in
            let results = await self.readiness.evaluate()
            let ready = results.allSatisfy(\.passed)
            self.readyGauge.record(ready ? 1 : 0)
            let checks = results.map { "\"\($0.name)\":\($0.passed)" }.joined(separator: ",")
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(
                status: ready ? .ok : .serviceUnavailable, headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: "{\"ready\":\(ready),\"checks\":{\(checks)}}\n")))
        }
        // Hummingbird logs every shutdown's cancelled connection wait as an error; the program
        // logs what matters itself.
        var quiet = logger
        quiet.logLevel = logger.logLevel <= .debug ? logger.logLevel : .critical
        let connections = AdminConnections(limits: limits)
        let app = Application(
            router: router,
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [connections.handler()], idleTimeout: TimeAmount(limits.idleTimeout))),
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "switchboard-admin"),
            onServerRunning: { [logger, address, onListening] channel in
                let port = channel.localAddress?.port ?? address.port
                logger.info("admin endpoint listening", metadata: ["address": "http://\(AdminAddress(host: address.host, port: port))"])
                await onListening(port)
            },
            logger: quiet)
        do {
            try await app.run()
        } catch let error as IOError where error.errnoCode == EADDRINUSE || error.errnoCode == EADDRNOTAVAIL {
            throw AdminAddress.Failure(
                "the admin endpoint (--admin) \(address) cannot be served: "
                    + (error.errnoCode == EADDRINUSE
                        ? "another process listens on that port (give each program on a host its own --admin HOST:PORT, or none)"
                        : "no interface of this host has that address"))
        }
    }

    /// Brings every scraped gauge up to date.
    func collect() async {
        process.update()
        for collector in collectors { await collector() }
        let ready = await readiness.evaluate().allSatisfy(\.passed)
        readyGauge.record(ready ? 1 : 0)
    }

    static func text(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
