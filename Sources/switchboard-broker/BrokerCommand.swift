import ArgumentParser
// Links jemalloc: the broker's malloc (bench/RESULTS.md, "Ingest: jemalloc in the broker").
import CJemalloc
import CoreMetrics
import Foundation
import Logging
import SwitchboardBroker
import SwitchboardBus
import SwitchboardObservability
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

@main
struct BrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-broker",
        abstract: "The Switchboard broker: durable event journal, live fan-out and replay.",
        discussion: """
            Settings come from, in rising order: defaults, a JSON file (--config FILE
            or SWITCHBOARD_CONFIG; its "broker" section, or the whole file when it
            has no sections), environment variables, flags. Each option below is a
            key: --groups-ack-wait is groups.ack_wait,
            {"broker": {"groups": {"ack_wait": "30s"}}} in the file and
            SWITCHBOARD_BROKER_GROUPS_ACK_WAIT in the environment (SWITCHBOARD_ADMIN,
            SWITCHBOARD_LOG_FORMAT and SWITCHBOARD_LOG_LEVEL below the broker's own).
            Durations are written 500ms, 30s, 2m, 12h, 7d; sizes 512KB, 1MB, 8GB.

            Without CURVE (--insecure) every endpoint must be loopback, ipc or
            inproc: anything else is refused at start. Bind to every interface with
            tcp://0.0.0.0:PORT, to one with tcp://eth0:PORT or its address.

            SIGTERM or SIGINT stops it gracefully: every acknowledged event is on disk.
            """, version: SwitchboardVersion.current)

    // Each option is a key of BrokerConfiguration, spelt by the rule (`groups.ack_wait` is
    // `--groups-ack-wait`); the values are read through the program's ConfigReader, where a flag
    // is the top source. The options are here for --help and to refuse a misspelt flag.
    private static let defaults = BrokerConfiguration()
    private static func format(_ duration: Duration) -> String { DurationText.format(duration) }

    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"broker\" section, or the whole file when it has none.")
    var config: String?
    @Option(help: "Ingest endpoint (ROUTER) producers send to (default \(defaults.ingestEndpoint)).") var ingest: String?
    @Option(help: "Fan-out endpoint (XPUB), the live stream (default \(defaults.fanoutEndpoint)).") var fanout: String?
    @Option(help: "Replay endpoint (ROUTER), FETCH of the journal (default \(defaults.replayEndpoint)).") var replay: String?
    @Option(help: "Service endpoint (Majordomo ROUTER) (default \(defaults.serviceEndpoint)).") var service: String?
    @Option(help: "Consumer-group endpoint (ROUTER) (default \(defaults.groupsEndpoint)).") var groups: String?
    @Option(name: .customLong("data-dir"), help: "Directory of the journal (default \(defaults.dataDirectory)).") var dataDir: String?
    @Option(help: "How often HEAD is published on the fan-out (default \(format(defaults.heartbeat))).") var heartbeat: String?
    @Option(name: .customLong("batch-limit"), help: "The most events journaled in one transaction (default \(defaults.batchLimit)).")
    var batchLimit: String?
    @Option(
        name: .customLong("retention-max-age"),
        help: "Delete events older than this, or none (default \(defaults.retentionMaxAge.map(format) ?? "none")).")
    var retentionMaxAge: String?
    @Option(
        name: .customLong("retention-max-bytes"),
        help:
            "Keep the journal's event bytes under this size, or none (default \(defaults.retentionMaxBytes.map(ByteCountText.format) ?? "none"))."
    )
    var retentionMaxBytes: String?
    @Option(name: .customLong("retention-interval"), help: "How often retention runs (default \(format(defaults.retentionInterval))).")
    var retentionInterval: String?
    @Option(name: .customLong("min-version"), help: "Refuse messages below this protocol version (default \(defaults.minimumVersion)).")
    var minVersion: String?
    @Option(help: "Messages queued per peer and socket, ZMQ_SNDHWM/RCVHWM (default \(defaults.highWaterMark)).") var hwm: String?
    @Option(
        name: .customLong("max-frame-bytes"),
        help: "A peer sending a bigger frame is disconnected, e.g. 1MB (default \(ByteCountText.format(defaults.maxFrameBytes))).")
    var maxFrameBytes: String?
    @Option(
        name: .customLong("max-pending-bytes"),
        help:
            "What one connection may have sent that the broker has not taken yet (default \(ByteCountText.format(defaults.maxPendingBytes)))."
    )
    var maxPendingBytes: String?
    @Option(
        name: .customLong("service-heartbeat"),
        help: "How often broker and workers send HEARTBEAT (default \(format(defaults.serviceHeartbeat))).")
    var serviceHeartbeat: String?
    @Option(
        name: .customLong("service-liveness"),
        help: "Heartbeats a worker may miss before it counts as dead, 3–10 (default \(defaults.serviceLiveness)).")
    var serviceLiveness: String?
    @Option(
        name: .customLong("service-wait"),
        help: "How long a request for a service with no worker waits before 503 (default \(format(defaults.serviceWait))).")
    var serviceWait: String?
    @Option(
        name: .customLong("service-queue-limit"),
        help: "Requests waiting per service; beyond it, 503 queue-full (default \(defaults.serviceQueueLimit)).")
    var serviceQueueLimit: String?
    @Option(
        name: .customLong("groups-ack-wait"),
        help: "How long a group member may hold a delivery unsettled (default \(format(defaults.groupAckWait))).")
    var groupsAckWait: String?
    @Option(
        name: .customLong("groups-max-deliver"),
        help: "Deliveries of one event to a group before it becomes a dead letter, 1–100 (default \(defaults.groupMaxDeliver)).")
    var groupsMaxDeliver: String?
    @Option(
        name: .customLong("groups-backoff"),
        help: "Waits after successive NACKs without a delay (default \(defaults.groupBackoff.map(format).joined(separator: ","))).")
    var groupsBackoff: String?
    @Option(
        name: .customLong("groups-liveness"),
        help: "A group member silent this long loses its deliveries (default \(format(defaults.groupLiveness))).")
    var groupsLiveness: String?
    @Option(
        name: .customLong("groups-commit-interval"),
        help:
            "How long what group members settle may wait for its commit; 0ms: every loop (default \(format(defaults.groupCommitInterval)))."
    )
    var groupsCommitInterval: String?
    @Option(
        name: .customLong("security-key"),
        help: "The broker's secret certificate (switchboard keygen --role broker); with --security-certificates, CURVE on every endpoint.")
    var securityKey: String?
    @Option(name: .customLong("security-certificates"), help: "Directory of the public certificates allowed to connect.")
    var securityCertificates: String?
    @Flag(help: "Run without CURVE: anyone who reaches the endpoints may connect. Local experiments only.") var insecure = false
    @Option(
        name: .customLong("journal-store"),
        help: "Where the journal, group cursors and dead letters live: sqlite or postgres (default \(defaults.journalStore.rawValue)).")
    var journalStore: String?
    @Option(
        name: .customLong("journal-postgres-host"),
        help:
            "The PostgreSQL server: host or host:port, or a comma-separated list of them (a primary and its standbys; the first that takes writes is used, and the list is tried again after a lost connection) (default \(defaults.postgres.host))."
    )
    var journalPostgresHost: String?
    @Option(
        name: .customLong("journal-postgres-port"), help: "The port of every host given without one (default \(defaults.postgres.port)).")
    var journalPostgresPort: String?
    @Option(name: .customLong("journal-postgres-database"), help: "The database (default \(defaults.postgres.database)).")
    var journalPostgresDatabase: String?
    @Option(name: .customLong("journal-postgres-user"), help: "The role (default \(defaults.postgres.user)).")
    var journalPostgresUser: String?
    @Option(
        name: .customLong("journal-postgres-password-file"),
        help: "A file (mode 0600) holding the role's password; never the password itself.")
    var journalPostgresPasswordFile: String?
    @Option(
        name: .customLong("journal-postgres-tls"),
        help: "verify-full (TLS, certificate and name checked) or disable (a server on loopback only) (default verify-full).")
    var journalPostgresTls: String?
    @Option(name: .customLong("journal-postgres-ca-file"), help: "PEM certificates that may sign the server's (default: the system's).")
    var journalPostgresCaFile: String?
    @Option(
        name: .customLong("journal-postgres-timeout"),
        help: "The longest connecting or one statement may take (default \(format(defaults.postgres.timeout))).")
    var journalPostgresTimeout: String?
    @Option(
        name: .customLong("lease-ttl"),
        help:
            "With journal.store postgres: how long the lease lasts unless renewed; a standby takes over this long after the active broker stops renewing (default \(format(defaults.lease.ttl)))."
    )
    var leaseTtl: String?
    @Option(
        name: .customLong("lease-holder"), help: "This broker's name in the lease and the logs (default: host name and process id).")
    var leaseHolder: String?
    @Option(help: "Where to serve /metrics and /health: HOST:PORT or none (default \(defaults.adminAddress)).") var admin: String?
    @Option(name: .customLong("log-format"), help: "text or json (default text).") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (default info).")
    var logLevel: String?

    func run() async throws {
        var settings: BrokerConfiguration
        do {
            let configuration = try BrokerConfiguration.programConfiguration(
                arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            settings = try configuration.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader)
                return try BrokerConfiguration(reader: reader)
            }
        } catch {
            throw ValidationError(error.description)
        }
        let logger = Logger(label: "broker")
        // This process is the broker's alone: it may give freed memory back (HeapTrim).
        settings.trimsHeap = true
        if settings.securityKey == nil {
            logger.warning(
                "running WITHOUT CURVE: anyone who can reach these endpoints can connect and publish; give --security-key and --security-certificates outside local experiments"
            )
        }
        let adminAddress: AdminAddress?
        do {
            adminAddress = try AdminAddress.parse(settings.adminAddress, option: "admin")
        } catch {
            throw ValidationError(error.description)
        }
        let observability = Observability.bootstrap(program: "switchboard-broker")
        try await ProcessRuntime.run(program: "switchboard-broker", logger: logger) { runtime in
            // The context's owner: it goes first, so it is terminated after the broker stopped.
            let io = try runtime.ioThread()
            // With no admin server nobody can read the metrics: the broker keeps none.
            let metrics: any MetricsFactory = adminAddress == nil ? NOOPMetricsHandler.instance : observability.factory
            let context = io.context
            @Sendable func makeBroker(_ configuration: BrokerConfiguration) throws -> Broker {
                do {
                    return try Broker(configuration: configuration, logger: logger, context: context, metrics: metrics)
                } catch let failure as Certificate.Failure {
                    throw ValidationError(failure.description)
                }
            }
            let ready: @Sendable () -> Void = { ServiceReadiness.notify(.ready, environment: ProcessInfo.processInfo.environment) }
            var readiness = Readiness()
            if settings.journalStore == .postgres {
                // One of a pair (or a single broker on PostgreSQL): it serves while it holds the
                // database's lease, and is a standby, ready to take over, otherwise. A standby
                // is not ready (it serves nothing), but it is live.
                let pair = try BrokerPairService(configuration: settings, logger: logger, makeBroker: makeBroker, onServing: ready)
                readiness.add("journal") { pair.isServing }
                runtime.add(pair, name: "broker")
            } else {
                let broker = try makeBroker(settings)
                readiness.add("journal") { broker.isServing }
                runtime.add(BrokerService(broker: broker, onServing: ready), name: "broker")
            }
            runtime.serveAdmin(at: adminAddress, observability: observability, readiness: readiness)
        }
    }
}
