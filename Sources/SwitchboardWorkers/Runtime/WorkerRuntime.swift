// What every worker process has, whatever its back end: the settings it shares with the others
// (`WorkerOptions`, one `--help` vocabulary for all three), and the parts built from them
// (`WorkerRuntime`): its own CURVE identity, its own credential cache fed by `auth` over the
// service plane, its own durable event outbox, one HTTP client, and its group membership.
// A worker never holds a password: `auth` does, and hands out tokens.

public import ArgumentParser
import Foundation
public import Logging
public import ServiceLifecycle
public import SwitchboardAuth
public import SwitchboardBus
import SwitchboardCredentials
public import SwitchboardHTTP
public import SwitchboardObservability
import SwitchboardProtocol
import SwitchboardRuntime
public import SwitchboardSecurity
import Synchronization
import UnixSignals
public import ZeroMQ

/// The settings every worker takes, with the same names and defaults in each.
public struct WorkerOptions: ParsableArguments, Sendable {
    @Option(help: "The broker's consumer-group endpoint.") public var groups = "tcp://127.0.0.1:5564"
    @Option(help: "The broker's service endpoint (Majordomo), where `auth` answers token.get.") public var service = "tcp://127.0.0.1:5563"
    @Option(help: "The broker's ingest endpoint, for the events this worker publishes.") public var ingest = "tcp://127.0.0.1:5560"
    @Option(
        help: "This program's secret certificate (role worker:<service>) for a secure broker; or SWITCHBOARD_CERTIFICATE.")
    public var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's public certificate or key; or SWITCHBOARD_BROKER_KEY.")
    public var brokerKey: String?
    @Option(
        name: .customLong("data-dir"),
        help: "Directory for this worker's event outbox and its own state (created 0700; one open to others is refused).")
    public var dataDirectory: String?
    @Option(name: .customLong("ca-file"), help: "An extra CA certificate (PEM) to trust for HTTPS, e.g. the emulator's ca.pem; repeatable.")
    public var caFiles: [String] = []
    @Option(help: "Events in flight to this worker at once (its credit in the group).") public var credit = 16
    @Option(help: "This member's name in the broker's logs and `switchboard groups` (default: <service>:<host>-<pid>).")
    public var member: String?
    @Option(name: .customLong("auth-timeout"), help: "Seconds to wait for the auth service's answer to token.get.")
    public var authTimeout = 30
    @Option(
        name: .customLong("shutdown-timeout"),
        help:
            "Seconds SIGTERM waits for the work in hand and the outbox before it cancels the rest (nothing is lost: the broker redelivers, the outbox keeps)."
    )
    public var shutdownTimeout = 20
    @Option(
        help:
            "Where to serve /metrics and /health (HOST:PORT or none; default 127.0.0.1:9564 filemaker, 9565 eto, 9566 directory; or SWITCHBOARD_ADMIN)."
    )
    public var admin: String?
    @Option(name: .customLong("log-format"), help: "text or json.") public var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") public var logLevel: String?

    public init() {}

    public func validate() throws {
        guard (1...1000).contains(credit) else { throw ValidationError("--credit must be between 1 and 1000, got \(credit)") }
        guard (1...3600).contains(shutdownTimeout) else {
            throw ValidationError("--shutdown-timeout must be between 1 and 3600 seconds, got \(shutdownTimeout)")
        }
        guard (1...3600).contains(authTimeout) else {
            throw ValidationError("--auth-timeout must be between 1 and 3600 seconds, got \(authTimeout)")
        }
        if let admin { _ = try AdminAddress.parse(admin, option: "--admin") }
        for (name, value) in [("--groups", groups), ("--service", service), ("--ingest", ingest)] {
            guard value.hasPrefix("tcp://") || value.hasPrefix("ipc://") || value.hasPrefix("inproc://") else {
                throw ValidationError("\(name) must be a ZeroMQ endpoint (tcp://host:port, ipc://path), got '\(value)'")
            }
        }
    }
}

/// A failure to start a worker, naming the setting that is wrong.
public struct WorkerConfigurationError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// A peer that is not there yet (auth, the back end), rather than a wrong setting: worth
    /// another try at start.
    public var retryable: Bool
    public init(_ description: String, retryable: Bool = false) {
        self.description = description
        self.retryable = retryable
    }
}

/// The parts of one worker process, built once at start.
public final class WorkerRuntime: Sendable {
    /// The service and group this worker serves (`filemaker`, `eto`, `directory`).
    public let service: String
    public let options: WorkerOptions
    public let credentials: ClientCredentials?
    public let context: Context
    public let io: IOThread
    /// The client to the service plane: `auth` for tokens.
    public let serviceClient: ServiceClient
    public let tokens: AuthTokenProvider
    public let outbox: Outbox
    public let http: SwitchboardHTTPClient
    public let dataDirectory: String
    public let logger: Logger
    /// This process's metrics registry (swift-metrics is bootstrapped with it).
    public let observability: Observability
    /// Where the admin server listens (nil: `--admin none`).
    public let adminAddress: AdminAddress?
    /// The outbox's sender, once `outboxService()` made it.
    private let sender = Mutex<OutboxSender?>(nil)
    /// The name this worker's events carry: its certificate's principal under CURVE (the broker
    /// checks the two are the same, so several processes of one service need a certificate
    /// each), else `<service>-worker-<8 hex digits>` from this host and the data directory: two
    /// workers of one service number their events apart, and a restart keeps its name.
    public let producer: String

    /// A producer name without a certificate: stable for a host and data directory.
    static func anonymousProducer(service: String, host: String, dataDirectory: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a: a name, not a secret
        for byte in "\(host)|\(dataDirectory)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return "\(service)-worker-" + String(String(hash, radix: 16).suffix(8))
    }

    /// Builds the parts; every failure names the setting to fix.
    public init(service: String, options: WorkerOptions, logger: Logger) throws(WorkerConfigurationError) {
        self.service = service
        self.options = options
        self.logger = logger
        observability = Observability.bootstrap(program: "switchboard-\(service)")
        do {
            adminAddress = try AdminAddress.resolve(
                options.admin, defaultPort: ["filemaker": 9564, "eto": 9565, "directory": 9566][service] ?? 0)
        } catch {
            throw WorkerConfigurationError(error.description)
        }
        do {
            credentials = try ClientCredentials.load(certificate: options.certificate, brokerKey: options.brokerKey)
        } catch {
            throw WorkerConfigurationError("--certificate/--broker-key: \(error)")
        }
        if let credentials, credentials.certificate.role != .worker(service: service) {
            throw WorkerConfigurationError(
                "--certificate: \(credentials.certificate.name) has role \(credentials.certificate.role), but this program needs role worker:\(service)"
            )
        }
        let directory = URL(fileURLWithPath: options.dataDirectory ?? ".switchboard/\(service)").standardizedFileURL.path
        do {
            try PrivateFiles.ensureDirectory(directory, what: "\(service) worker data directory (--data-dir)")
        } catch {
            throw WorkerConfigurationError(error.description)
        }
        dataDirectory = directory
        let producer =
            credentials?.certificate.name
            ?? Self.anonymousProducer(service: service, host: ProcessInfo.processInfo.hostName, dataDirectory: directory)
        self.producer = producer
        do {
            outbox = try Outbox(path: directory + "/events-outbox.sqlite", producer: producer)
        } catch {
            throw WorkerConfigurationError("--data-dir: cannot open the event outbox in \(directory): \(error)")
        }
        do {
            http = try SwitchboardHTTPClient(
                configuration: .init(extraCAFiles: options.caFiles), logger: logger, metrics: observability.factory)
        } catch {
            throw WorkerConfigurationError("--ca-file: \(error)")
        }
        do {
            context = try Context()
            io = try IOThread(context: context)
        } catch {
            throw WorkerConfigurationError("cannot start ZeroMQ: \(error)")
        }
        var clientSettings = ServiceClient.Settings()
        clientSettings.socketOptions = credentials?.socketOptions ?? []
        clientSettings.timeout = .seconds(options.authTimeout)
        serviceClient = ServiceClient(io: io, endpoint: options.service, settings: clientSettings, logger: logger)
        tokens = AuthTokenProvider(
            client: serviceClient, cache: CredentialCache(configuration: .init(logger: logger, metrics: observability.factory)),
            timeout: .seconds(options.authTimeout))
    }

    /// This worker's member of its group, filtered to `topics`.
    public func consumer(topics: [String]) -> GroupConsumer {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "host"
        let settings = GroupConsumer.Settings(
            group: service, topics: topics, credit: options.credit, member: options.member ?? "\(service):\(host)-\(getpid())",
            socketOptions: credentials?.socketOptions ?? [])
        return GroupConsumer(io: io, endpoint: options.groups, settings: settings, logger: logger)
    }

    /// Writes an event to this worker's outbox; the outbox service sends it to the broker and
    /// keeps it until the broker has it on disk.
    public func publish(type: String, schema: String, content: some Encodable, key: String? = nil) async throws {
        let data = try WireJSON.encode(content)
        _ = try await outbox.enqueue(shared: Outbox.NewEvent(type: type, schema: schema, content: data, key: key))
    }

    /// Sends the outbox's events to the broker for as long as the process runs; on graceful
    /// shutdown it stops once nothing is left to send (the service group's deadline cuts a wait
    /// for an absent broker short; what is left stays in the outbox for the next start).
    public func outboxService() -> any Service {
        var settings = OutboxSender.Settings()
        settings.socketOptions = credentials?.socketOptions ?? []
        let made = OutboxSender(
            outbox: outbox, io: io, endpoint: options.ingest, settings: settings, logger: logger, metrics: observability.factory)
        sender.withLock { $0 = made }
        return OutboxSenderService(sender: made)
    }

    /// The admin server (`/metrics`, `/health/*`), ready when the worker is a member of its
    /// group and the broker answers its outbox; nil with `--admin none`.
    public func adminServer(consumer: GroupConsumer?) -> AdminServer? {
        var readiness = Readiness()
        if let consumer { readiness.add("group") { consumer.isJoined } }
        let sender = sender.withLock { $0 }
        if let sender { readiness.add("broker") { sender.isConnected } }
        return observability.adminServer(
            at: adminAddress, readiness: readiness, collectors: sender.map { sender in [{ await sender.updateDepth() }] } ?? [],
            logger: logger)
    }

    /// Runs `services` after this worker's outbox service in one `ServiceGroup` until SIGTERM or
    /// SIGINT (graceful: in reverse order, so the outbox sends what the others published last) or
    /// a failure, then releases everything. `name` is the program's, for the log.
    public func run(_ services: [any Service], name: String, consumer: GroupConsumer? = nil) async throws {
        let outbox = outboxService()
        let admin: [any Service] = adminServer(consumer: consumer).map { [$0] } ?? []
        var configuration = ServiceGroupConfiguration(
            services: ([outbox] + services + admin).map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        // Graceful shutdown finishes the handlers in hand and sends what the outbox holds; a
        // broker that stays away must not keep the process up: after this, what is left is
        // cancelled (the outbox keeps its events for the next start; unsettled deliveries come
        // again).
        configuration.maximumGracefulShutdownDuration = .seconds(options.shutdownTimeout)
        let group = ServiceGroup(configuration: configuration)
        do {
            try await group.run()
        } catch {
            logger.error("\(name) failed", metadata: ["error": "\(error)"])
            await close()
            throw error
        }
        await close()
        logger.info("\(name) stopped")
    }

    /// Releases the sockets and the HTTP client; call after the service group ended.
    public func close() async {
        await serviceClient.close()
        try? await http.shutdown()
        await io.shutdown()
        await context.terminate()
    }
}
