import ArgumentParser
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
            Settings come from, in rising order: defaults, a JSON file (--config FILE or
            SWITCHBOARD_CONFIG; its "broker" section, or the whole file when it has no
            sections), environment variables SWITCHBOARD_BROKER_<KEY> (e.g.
            SWITCHBOARD_BROKER_RETENTION_MAX_AGE; SWITCHBOARD_ADMIN under
            SWITCHBOARD_BROKER_ADMIN), flags. Keys: \(BrokerConfiguration.keys.joined(separator: ", ")).
            Without CURVE (--insecure) every endpoint must be loopback, ipc or inproc: anything
            else is refused at start. Bind to every interface with tcp://0.0.0.0:PORT, to one
            with tcp://eth0:PORT or its address.
            SIGTERM or SIGINT stops it gracefully: every acknowledged event is on disk.
            """)

    @Option(help: "A JSON configuration file.") var config: String?
    @Option(help: "Ingest endpoint (ROUTER), e.g. tcp://0.0.0.0:5560.") var ingest: String?
    @Option(help: "Fan-out endpoint (XPUB).") var fanout: String?
    @Option(help: "Replay endpoint (ROUTER).") var replay: String?
    @Option(help: "Service endpoint (Majordomo ROUTER), e.g. tcp://0.0.0.0:5563.") var service: String?
    @Option(help: "Consumer-group endpoint (ROUTER), e.g. tcp://0.0.0.0:5564.") var groups: String?
    @Option(name: .customLong("ack-wait"), help: "How long a group member may hold a delivery unsettled (default 30s).")
    var ackWait: String?
    @Option(name: .customLong("max-deliver"), help: "Deliveries of one event to a group before it becomes a dead letter (default 5).")
    var maxDeliver: String?
    @Option(help: "Waits after successive NACKs without a delay, e.g. 1s,5s,30s,120s (the default).") var backoff: String?
    @Option(name: .customLong("member-liveness"), help: "A group member silent this long loses its deliveries (default 3s).")
    var memberLiveness: String?
    @Option(
        name: .customLong("group-commit-interval"),
        help: "How long what group members settle may wait for its commit (default 10ms; 0ms: every loop iteration).")
    var groupCommitInterval: String?
    @Option(help: "The broker's secret certificate (switchboard keygen --role broker); with --certificates, CURVE on every endpoint.")
    var key: String?
    @Option(help: "Directory of the public certificates allowed to connect.") var certificates: String?
    @Flag(help: "Run without CURVE: anyone who reaches the endpoints may connect. Local experiments only.") var insecure = false
    @Option(name: .customLong("data-dir"), help: "Directory of the journal.") var dataDirectory: String?
    @Option(help: "HEAD interval, e.g. 1s or 500ms.") var heartbeat: String?
    @Option(name: .customLong("retention-max-age"), help: "Delete events older than this (e.g. 7d), or 'none'.") var retentionMaxAge:
        String?
    @Option(name: .customLong("retention-max-bytes"), help: "Keep the journal under this size (e.g. 8GB), or 'none'.")
    var retentionMaxBytes: String?
    @Option(name: .customLong("min-version"), help: "Refuse messages below this protocol version.") var minimumVersion: String?
    @Option(help: "Where to serve /metrics and /health (HOST:PORT, or none; default 127.0.0.1:9560).") var admin: String?
    @Option(name: .customLong("log-format"), help: "text or json.") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel: String?

    func run() async throws {
        do {
            try StructuredLogHandler.bootstrap(formatOption: logFormat, levelOption: logLevel)
        } catch {
            throw ValidationError("\(error)")
        }
        let logger = Logger(label: "broker")

        // Flags are the top layer, read through the same parsing and error messages as the rest.
        let flags: [(String, String, String?)] = [
            ("ingest", "--ingest", ingest), ("fanout", "--fanout", fanout), ("replay", "--replay", replay),
            ("service", "--service", service), ("groups", "--groups", groups), ("groups.ack_wait", "--ack-wait", ackWait),
            ("groups.max_deliver", "--max-deliver", maxDeliver), ("groups.backoff", "--backoff", backoff),
            ("groups.liveness", "--member-liveness", memberLiveness),
            ("groups.commit_interval", "--group-commit-interval", groupCommitInterval),
            ("security.key", "--key", key), ("security.certificates", "--certificates", certificates),
            ("insecure", "--insecure", insecure ? "true" : nil), ("data_dir", "--data-dir", dataDirectory),
            ("heartbeat", "--heartbeat", heartbeat), ("retention.max_age", "--retention-max-age", retentionMaxAge),
            ("retention.max_bytes", "--retention-max-bytes", retentionMaxBytes), ("min_version", "--min-version", minimumVersion),
            ("admin", "--admin", admin),
        ]
        var settings: BrokerConfiguration
        do {
            let layers = try BrokerConfiguration.layers(
                file: config, flags: flags.reduce(into: [:]) { $0[$1.0] = $1.2 },
                flagNames: flags.reduce(into: [:]) { $0[$1.0] = $1.1 })
            settings = try BrokerConfiguration(layers: layers)
        } catch let failure as ConfigurationLayers.Failure {
            throw ValidationError(failure.description)
        }
        // This process is the broker's alone: it may give freed memory back (HeapTrim).
        settings.trimsHeap = true
        if settings.securityKey == nil {
            logger.warning(
                "running WITHOUT CURVE: anyone who can reach these endpoints can connect and publish; give --key and --certificates outside local experiments"
            )
        }
        let adminAddress: AdminAddress?
        do {
            adminAddress = try AdminAddress.parse(settings.adminAddress, option: "admin (--admin)")
        } catch {
            throw ValidationError(error.description)
        }
        let observability = Observability.bootstrap(program: "switchboard-broker")
        try await ProcessRuntime.run(program: "switchboard-broker", logger: logger) { runtime in
            // The context's owner: it goes first, so it is terminated after the broker stopped.
            let io = try runtime.ioThread()
            let broker: Broker
            do {
                // With no admin server nobody can read the metrics: the broker keeps none.
                broker = try Broker(
                    configuration: settings, logger: logger, context: io.context,
                    metrics: adminAddress == nil ? NOOPMetricsHandler.instance : observability.factory)
            } catch let failure as Certificate.Failure {
                throw ValidationError(failure.description)
            }
            var readiness = Readiness()
            readiness.add("journal") { broker.isServing }
            runtime.add(BrokerService(broker: broker) { ServiceReadiness.notify(.ready) }, name: "broker")
            runtime.serveAdmin(at: adminAddress, observability: observability, readiness: readiness)
        }
    }
}
