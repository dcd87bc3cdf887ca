import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import SwitchboardAuth
import SwitchboardBus
import SwitchboardCredentials
import SwitchboardHTTP
import SwitchboardObservability
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardTokens
import UnixSignals
import ZeroMQ

@main
struct AuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-auth",
        abstract: "The auth/token manager: holds the back-end accounts and serves tokens to workers (service `auth`).",
        discussion: """
            Accounts (with their passwords) come from --accounts FILE, which only its
            owner may read (chmod 600), or from the environment variable
            SWITCHBOARD_AUTH_ACCOUNTS holding the same JSON; never from flags.
            Operations: token.get, token.invalidate, status (protocol/README.md section
            14). Events: auth.token.issued, auth.token.refreshed, auth.login.failed (no
            secrets), always written to an outbox under --data-dir (default
            \(defaultDataDirectory) in the working directory, created 0700) before they
            are sent to --ingest, so none is lost while the broker is away. Tokens are
            kept there too, in an encrypted file (AES-GCM, key file 0600), whose key
            is <data-dir>/credentials.key unless --credentials-key names a file
            elsewhere (made 0600 if missing): kept apart from the data directory, the
            sealed file is useless to whoever copies that directory or its backups. A
            data directory that group or others can reach is refused.
            SIGTERM or SIGINT: stop serving, log out of FileMaker (freeing its session
            slots), exit.

            The accounts file (protocol/README.md section 14.5), with made-up values:

            \(AuthAccounts.example)

            \(AuthAccounts.fields)
            """)

    /// Where state goes without --data-dir: the directory `switchboard up` gives auth.
    static let defaultDataDirectory = ".switchboard/auth/state"

    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"auth\" section, and the shared keys at its top.")
    var config: String?
    @Option(help: "The accounts file (JSON, mode 0600; format shown above; key accounts_file).") var accounts: String?
    @Option(
        name: .customLong("broker-host"), help: "The broker's host name or address: its endpoints at the default ports (default 127.0.0.1)."
    )
    var brokerHost: String?
    @Option(help: "The broker's service endpoint (Majordomo; default tcp://<broker-host>:5563).") var service: String?
    @Option(help: "The broker's ingest endpoint, for auth.* events (default tcp://<broker-host>:5560).") var ingest: String?
    @Option(
        name: .customLong("data-dir"),
        help: "Directory for the event outbox and the encrypted token file (default \(AuthCommand.defaultDataDirectory); created 0700).")
    var dataDirectory: String?
    @Option(
        name: .customLong("ca-file"),
        help: "An extra CA certificate (PEM) to trust for HTTPS, e.g. the emulator's ca.pem; repeatable (ca_file: comma-separated).")
    var caFiles: [String] = []
    @Option(
        name: .customLong("credentials-key"),
        help: "The key file that seals the token file (default <data-dir>/credentials.key; made 0600 if missing; key credentials_key_file)."
    )
    var credentialsKey: String?
    @Option(help: "Requests served at once (default 4).") var concurrency: Int?
    @Option(name: .customLong("keep-alive"), help: "Seconds between checks that keep idle-clocked sessions alive (default 60).")
    var keepAlive: Int?
    @Option(help: "This program's secret certificate (role auth), for a secure broker.") var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's public certificate or key.") var brokerKey: String?
    @Option(help: "Where to serve /metrics and /health (HOST:PORT or none; default 127.0.0.1:9563).") var admin: String?
    @Option(name: .customLong("log-format"), help: "text or json.") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel: String?

    static let flagNames = [
        "accounts_file": "--accounts", "broker_host": "--broker-host", "service": "--service", "ingest": "--ingest",
        "data_dir": "--data-dir", "ca_file": "--ca-file", "concurrency": "--concurrency", "keep_alive": "--keep-alive",
        "certificate": "--certificate", "broker_key": "--broker-key", "admin": "--admin", "log_format": "--log-format",
        "log_level": "--log-level", "credentials_key_file": "--credentials-key",
    ]

    func run() async throws {
        let layers: ConfigurationLayers
        let endpoints: BrokerEndpoints
        let (accountsFile, dataDirectoryGiven, caFiles, concurrency, keepAlive, certificate, brokerKey, admin):
            (String?, String, [String], Int, Int, String?, String?, String?)
        let credentialsKeyFile: String?
        do {
            let given: [String: String?] = [
                "accounts_file": self.accounts, "broker_host": brokerHost, "service": service, "ingest": ingest,
                "data_dir": self.dataDirectory, "ca_file": self.caFiles.isEmpty ? nil : self.caFiles.joined(separator: ","),
                "concurrency": self.concurrency.map(String.init), "keep_alive": self.keepAlive.map(String.init),
                "certificate": self.certificate, "broker_key": self.brokerKey, "admin": self.admin, "log_format": logFormat,
                "log_level": logLevel, "credentials_key_file": credentialsKey,
            ]
            layers = try ConfigurationLayers(
                program: "auth", file: config, keys: Array(Self.flagNames.keys), flags: given.compactMapValues { $0 },
                flagNames: Self.flagNames)
            endpoints = try BrokerEndpoints(layers: layers)
            accountsFile = try layers.nonEmpty("accounts_file")
            dataDirectoryGiven = try layers.nonEmpty("data_dir") ?? Self.defaultDataDirectory
            caFiles = try layers.list("ca_file") ?? []
            concurrency = try layers.integer("concurrency", default: 4, in: 1...64)
            keepAlive = try layers.integer("keep_alive", default: 60, in: 1...86_400)
            certificate = try layers.nonEmpty("certificate")
            brokerKey = try layers.nonEmpty("broker_key")
            admin = try layers.nonEmpty("admin")
            credentialsKeyFile = try layers.nonEmpty("credentials_key_file")
            try StructuredLogHandler.bootstrap(
                formatOption: try layers.nonEmpty("log_format"), levelOption: try layers.nonEmpty("log_level"))
        } catch {
            throw ValidationError("\(error)")
        }
        let logger = Logger(label: "auth")
        let adminAddress: AdminAddress?
        do {
            adminAddress = try AdminAddress.resolve(admin, defaultPort: AdminPort.auth.defaultPort, environment: [:])
        } catch {
            throw ValidationError(error.description)
        }
        let observability = Observability.bootstrap(program: "switchboard-auth")

        let accounts: AuthAccounts
        let credentials: ClientCredentials?
        do {
            accounts = try AuthAccounts.load(path: accountsFile)
            credentials = try ClientCredentials.load(certificate: certificate, brokerKey: brokerKey, environment: [:])
        } catch let error as AuthError {
            throw ValidationError(error.message)
        } catch let error as Certificate.Failure {
            throw ValidationError(error.description)
        }
        try await ProcessRuntime.run(program: "auth", logger: logger) { runtime in
            // SIGTERM or SIGINT stops the services in reverse order: the admin server, the worker
            // (its request in hand answered), the sessions (logged out), the outbox (what is left
            // sent, within the deadline), then the I/O thread.
            runtime.maximumGracefulShutdownDuration = .seconds(8)
            let http: SwitchboardHTTPClient
            do {
                http = try SwitchboardHTTPClient(configuration: .init(extraCAFiles: caFiles), logger: logger)
            } catch {
                throw ValidationError("\(error)")
            }
            // The HTTP client must be shut down before it goes, or its deinit stops the process.
            runtime.onExit { try? await http.shutdown() }

            // Events always go through a durable outbox, as section 14.4 promises: without
            // --data-dir it lives in the default directory rather than nowhere. Absolute, so the
            // log says where.
            let dataDirectory = URL(fileURLWithPath: dataDirectoryGiven).standardizedFileURL.path
            let cache: CredentialCache
            let outbox: Outbox
            do {
                cache = try CredentialCache(
                    configuration: .init(logger: logger),
                    file: EncryptedCredentialFile(directory: dataDirectory, keyFile: credentialsKeyFile), ifUnreadable: .startEmpty
                )
                outbox = try Outbox(path: dataDirectory + "/auth-outbox.sqlite", producer: credentials?.certificate.name ?? "auth")
            } catch {
                throw ValidationError("\(error) (the data directory is set with --data-dir, the key file with --credentials-key)")
            }
            // Saved after the group, before the HTTP client goes (releases run newest first).
            runtime.onExit { try? await cache.save() }
            let service = AuthService(
                accounts: accounts, authenticators: standardAuthenticators(http: http, logger: logger), cache: cache,
                events: AuthEvents(outbox: outbox), logger: logger)

            let io = try runtime.ioThread()
            var settings = ServiceWorker.Settings()
            settings.concurrency = concurrency
            settings.socketOptions = credentials?.socketOptions ?? []
            let worker = ServiceWorker(
                service: "auth", io: io, endpoint: endpoints.service, settings: settings, logger: logger, handler: service.handle)
            var senderSettings = OutboxSender.Settings()
            senderSettings.socketOptions = credentials?.socketOptions ?? []
            let sender = OutboxSender(outbox: outbox, io: io, endpoint: endpoints.ingest, settings: senderSettings, logger: logger)
            runtime.add(OutboxSenderService(sender: sender), name: "outbox")
            runtime.add(AuthSessions(auth: service, keepAliveInterval: .seconds(keepAlive), logger: logger), name: "sessions")
            runtime.add(ServiceWorkerService(worker: worker), name: "worker")
            var readiness = Readiness()
            readiness.add("broker") { sender.isConnected }
            runtime.serveAdmin(
                at: adminAddress, observability: observability, readiness: readiness, collectors: [{ await sender.updateDepth() }])
            logger.info(
                "auth serving",
                metadata: [
                    "accounts": "\(accounts.accounts.map { "\($0.backend)/\($0.account)" }.joined(separator: ","))",
                    "outbox": "\(outbox.path)",
                ])
            ServiceReadiness.notify(.ready)
        }
    }
}
