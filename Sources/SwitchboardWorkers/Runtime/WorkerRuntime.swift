// What every worker process has, whatever its back end: the settings it shares with the others
// (`WorkerSettings`, and `WorkerOptions`, one `--help` vocabulary for all three), and the parts built from them
// (`WorkerRuntime`): its own CURVE identity, its own credential cache fed by `auth` over the
// service plane, its own durable event outbox, one HTTP client, and its group membership.
// A worker never holds a password: `auth` does, and hands out tokens.

public import ArgumentParser
public import Configuration
public import Foundation
public import Logging
public import ServiceLifecycle
public import SwitchboardBus
import SwitchboardCredentials
public import SwitchboardHTTP
public import SwitchboardObservability
import SwitchboardProtocol
public import SwitchboardRuntime
public import SwitchboardSecurity
public import SwitchboardTokens
import Synchronization
public import ZeroMQ

/// The flags every worker takes, with the same names in each: each is a key of
/// `WorkerSettings` (`data_dir` is `--data-dir`), read through the program's `ConfigReader`,
/// where a flag is the top source. They are declared here for `--help` and so that a misspelt
/// flag is refused; none has a value of its own.
public struct WorkerOptions: ParsableArguments, Sendable {
    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its section for this worker, and the shared keys at its top.")
    public var config: String?
    @Option(
        name: .customLong("broker-host"), help: "The broker's host name or address: its endpoints at the default ports (default 127.0.0.1)."
    )
    public var brokerHost: String?
    @Option(help: "The broker's consumer-group endpoint (default tcp://<broker-host>:5564).") public var groups: String?
    @Option(help: "The broker's service endpoint (Majordomo), where `auth` answers token.get (default tcp://<broker-host>:5563).")
    public var service: String?
    @Option(help: "The broker's ingest endpoint, for the events this worker publishes (default tcp://<broker-host>:5560).")
    public var ingest: String?
    @Option(help: "This program's secret certificate (role worker:<service>) for a secure broker (default: none).")
    public var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's public certificate or key (default: none).") public var brokerKey: String?
    @Option(
        name: .customLong("data-dir"),
        help:
            "Directory for this worker's event outbox and its own state (default .switchboard/<service>; created 0700; one open to others is refused)."
    )
    public var dataDir: String?
    @Option(
        name: .customLong("ca-file"),
        help:
            "An extra CA certificate (PEM) to trust for HTTPS, e.g. the emulator's ca.pem; repeatable, or comma-separated (default: none).")
    public var caFile: [String] = []
    @Option(help: "Events in flight to this worker at once (its credit in the group; default \(WorkerSettings.defaultCredit)).")
    public var credit: String?
    @Option(help: "This member's name in the broker's logs and `switchboard groups` (default: <service>:<host>-<pid>).")
    public var member: String?
    @Option(
        name: .customLong("auth-timeout"),
        help:
            "How long to wait for the auth service's answer to token.get (default \(DurationText.format(WorkerSettings.defaultAuthTimeout)))."
    )
    public var authTimeout: String?
    @Option(
        name: .customLong("shutdown-timeout"),
        help:
            "How long SIGTERM waits for the work in hand and the outbox before it cancels the rest (default \(DurationText.format(WorkerSettings.defaultShutdownTimeout)); nothing is lost: the broker redelivers, the outbox keeps)."
    )
    public var shutdownTimeout: String?
    @Option(
        help: "Where to serve /metrics and /health (HOST:PORT or none; default 127.0.0.1:9564 filemaker, 9565 eto, 9566 directory).")
    public var admin: String?
    @Option(name: .customLong("log-format"), help: "text or json (default text).") public var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (default info).")
    public var logLevel: String?

    public init() {}
}

/// What every worker runs with, read from its program's configuration: defaults < file <
/// environment < flags.
public struct WorkerSettings: Sendable {
    public static let defaultCredit = 16
    public static let defaultAuthTimeout: Duration = .seconds(30)
    public static let defaultShutdownTimeout: Duration = .seconds(20)

    /// The keys every worker reads (`init(reader:)`); a worker adds its own.
    public static let keys =
        BrokerEndpoints.keys + [
            "certificate", "broker_key", "data_dir", "ca_file", "credit", "member", "auth_timeout", "shutdown_timeout", "admin",
            "log_format", "log_level",
        ]

    public var endpoints: BrokerEndpoints
    public var certificate: String?
    public var brokerKey: String?
    public var dataDirectory: String?
    public var caFiles: [String]
    public var credit: Int
    public var member: String?
    public var authTimeout: Duration
    public var shutdownTimeout: Duration
    public var admin: String?

    /// Keys read: the endpoints (`BrokerEndpoints(reader:)`: `broker_host`, `ingest`, `groups`,
    /// `service`, …); `certificate` and `broker_key` (this worker's secret certificate and the
    /// broker's public one, for CURVE; default none); `data_dir` (default `.switchboard/<service>`);
    /// `ca_file` (extra CA certificates for HTTPS, a list); `credit` (events in flight, 1–1000,
    /// default 16); `member` (this member's name, default `<service>:<host>-<pid>`);
    /// `auth_timeout` (the wait for `auth`'s token.get, 1s–1h, default 30s); `shutdown_timeout`
    /// (how long SIGTERM waits for the work in hand, 1s–1h, default 20s); `admin` (`HOST:PORT`
    /// or `none`; default loopback at the worker's port). Logging (`log_format`, `log_level`) is
    /// `StructuredLogHandler.bootstrap(reader:)`'s.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        endpoints = try BrokerEndpoints(reader: reader)
        certificate = try reader.nonEmpty("certificate")
        brokerKey = try reader.nonEmpty("broker_key")
        dataDirectory = try reader.nonEmpty("data_dir")
        caFiles = reader.stringArray(forKey: "ca_file")?.filter { !$0.isEmpty } ?? []
        credit = try reader.int("credit", default: Self.defaultCredit, in: 1...1000)
        member = try reader.nonEmpty("member")
        authTimeout = try reader.duration(
            "auth_timeout", default: Self.defaultAuthTimeout, in: Duration.seconds(1)...Duration.seconds(3600))
        shutdownTimeout = try reader.duration(
            "shutdown_timeout", default: Self.defaultShutdownTimeout, in: Duration.seconds(1)...Duration.seconds(3600))
        admin = try reader.nonEmpty("admin")
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
    public let settings: WorkerSettings
    public let credentials: ClientCredentials?
    /// The process's I/O thread, owner of its ZeroMQ context: the first service of `run`'s
    /// group, and shut down by `close()` whatever happens.
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
    public init(service: String, settings options: WorkerSettings, logger: Logger) throws(WorkerConfigurationError) {
        self.service = service
        self.settings = options
        self.logger = logger
        observability = Observability.bootstrap(program: "switchboard-\(service)")
        do {
            adminAddress = try AdminAddress.resolve(
                options.admin, defaultPort: AdminPort.of(service)?.defaultPort ?? 0)
        } catch {
            throw WorkerConfigurationError(error.description)
        }
        do {
            credentials = try ClientCredentials.load(certificate: options.certificate, brokerKey: options.brokerKey)
        } catch {
            throw WorkerConfigurationError("certificate/broker_key: \(error)")
        }
        if let credentials, credentials.certificate.role != .worker(service: service) {
            throw WorkerConfigurationError(
                "certificate: \(credentials.certificate.name) has role \(credentials.certificate.role), but this program needs role worker:\(service)"
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
            io = try IOThread()
        } catch {
            throw WorkerConfigurationError("cannot start ZeroMQ: \(error)")
        }
        var clientSettings = ServiceClient.Settings()
        clientSettings.socketOptions = credentials?.socketOptions ?? []
        clientSettings.timeout = options.authTimeout
        serviceClient = ServiceClient(io: io, endpoint: options.endpoints.service, settings: clientSettings, logger: logger)
        tokens = AuthTokenProvider(
            client: serviceClient, cache: CredentialCache(configuration: .init(logger: logger, metrics: observability.factory)),
            timeout: options.authTimeout)
    }

    /// This worker's member of its group, filtered to `topics`.
    public func consumer(topics: [String]) -> GroupConsumer {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "host"
        let member = GroupConsumer.Settings(
            group: service, topics: topics, credit: settings.credit, member: settings.member ?? "\(service):\(host)-\(getpid())",
            socketOptions: credentials?.socketOptions ?? [])
        return GroupConsumer(io: io, endpoint: settings.endpoints.groups, settings: member, logger: logger)
    }

    /// Writes an event to this worker's outbox; the outbox service sends it to the broker and
    /// keeps it until the broker has it on disk.
    public func publish(type: String, schema: String, content: some Encodable, key: String? = nil) async throws {
        let data = try (content as? any WireJSONWritable)?.wireJSON() ?? WireJSON.encode(content)
        _ = try await outbox.enqueue(shared: Outbox.NewEvent(type: type, schema: schema, content: data, key: key))
    }

    /// Puts an event whose content is already JSON in the outbox.
    public func publish(type: String, schema: String, json: Data, key: String? = nil) async throws {
        _ = try await outbox.enqueue(shared: Outbox.NewEvent(type: type, schema: schema, content: json, key: key))
    }

    /// Sends the outbox's events to the broker for as long as the process runs; on graceful
    /// shutdown it stops once nothing is left to send (the service group's deadline cuts a wait
    /// for an absent broker short; what is left stays in the outbox for the next start).
    public func outboxService() -> any Service {
        var settings = OutboxSender.Settings()
        settings.socketOptions = credentials?.socketOptions ?? []
        let made = OutboxSender(
            outbox: outbox, io: io, endpoint: self.settings.endpoints.ingest, settings: settings, logger: logger,
            metrics: observability.factory)
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

    /// Runs the I/O thread, this worker's outbox service, `services` and the admin server in one
    /// `ProcessRuntime` until SIGTERM or SIGINT (graceful: in reverse order, so the outbox sends
    /// what the others published last and the I/O thread goes last) or a failure, then releases
    /// everything (`close()`). `name` is the program's, for the log.
    public func run(_ services: [any Service], name: String, consumer: GroupConsumer? = nil) async throws {
        var runtime = ProcessRuntime(program: name, logger: logger)
        // Graceful shutdown finishes the handlers in hand and sends what the outbox holds; a
        // broker that stays away must not keep the process up: after this, what is left is
        // cancelled (the outbox keeps its events for the next start; unsettled deliveries come
        // again).
        runtime.maximumGracefulShutdownDuration = settings.shutdownTimeout
        runtime.add(io, name: "zeromq")
        runtime.onExit { [self] in await close() }
        runtime.add(outboxService(), name: "outbox")
        for service in services { runtime.add(service) }
        if let admin = adminServer(consumer: consumer) { runtime.add(admin, name: "admin") }
        try await runtime.run()
    }

    /// Releases the service client's socket, the HTTP client and the I/O thread (and with it the
    /// ZeroMQ context); `run` calls it on its way out, a program whose start fails after `init`
    /// calls it itself. Safe to call twice.
    public func close() async {
        await serviceClient.close()
        try? await http.shutdown()
        await io.shutdown()
    }
}
