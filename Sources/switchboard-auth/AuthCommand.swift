import ArgumentParser
import Configuration
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
            Accounts (with their passwords) come from --accounts-file FILE, which only its
            owner may read (chmod 600), or from the environment variable
            SWITCHBOARD_AUTH_ACCOUNTS holding the same JSON; never from flags.
            Operations: token.get, token.invalidate, status (protocol/README.md section
            14). Events: auth.token.issued, auth.token.refreshed, auth.login.failed (no
            secrets), always written to an outbox under --data-dir (default
            \(AuthConfiguration.defaultDataDirectory) in the working directory, created
            0700) before they are sent to --ingest, so none is lost while the broker is
            away. Tokens are
            kept there too, in an encrypted file (AES-GCM, key file 0600), whose key
            is <data-dir>/credentials.key unless --credentials-key-file names a file
            elsewhere (made 0600 if missing): kept apart from the data directory, the
            sealed file is useless to whoever copies that directory or its backups. A
            data directory that group or others can reach is refused.
            SIGTERM or SIGINT: stop serving, log out of FileMaker (freeing its session
            slots), exit.

            The accounts file (protocol/README.md section 14.5), with made-up values:

            \(AuthAccounts.example)

            \(AuthAccounts.fields)
            """, version: SwitchboardVersion.current)

    // Each option is a key (`accounts_file` is `--accounts-file`), read through the program's
    // ConfigReader, where a flag is the top source; declared for --help and to refuse a misspelt flag.
    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"auth\" section, and the shared keys at its top.")
    var config: String?
    @Option(name: .customLong("accounts-file"), help: "The accounts file (JSON, mode 0600; format shown above; default: none).")
    var accountsFile: String?
    @Option(
        name: .customLong("broker-host"), help: "The broker's host name or address: its endpoints at the default ports (default 127.0.0.1)."
    )
    var brokerHost: String?
    @Option(help: "The broker's service endpoint (Majordomo; default tcp://<broker-host>:5563).") var service: String?
    @Option(help: "The broker's ingest endpoint, for auth.* events (default tcp://<broker-host>:5560).") var ingest: String?
    @Option(
        name: .customLong("data-dir"),
        help:
            "Directory for the event outbox and the encrypted token file (default \(AuthConfiguration.defaultDataDirectory); created 0700)."
    )
    var dataDir: String?
    @Option(
        name: .customLong("ca-file"),
        help:
            "An extra CA certificate (PEM) to trust for HTTPS, e.g. the emulator's ca.pem; repeatable, or comma-separated (default: none).")
    var caFile: [String] = []
    @Option(
        name: .customLong("credentials-key-file"),
        help: "The key file that seals the token file (default <data-dir>/credentials.key; made 0600 if missing).")
    var credentialsKeyFile: String?
    @Option(help: "Requests served at once, 1–64 (default \(AuthConfiguration.defaultConcurrency)).") var concurrency: String?
    @Option(
        name: .customLong("keep-alive"),
        help:
            "Time between checks that keep idle-clocked sessions alive, 1s–1d (default \(DurationText.format(AuthConfiguration.defaultKeepAlive)))."
    )
    var keepAlive: String?
    @Option(help: "This program's secret certificate (role auth), for a secure broker (default: none).") var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's public certificate or key (default: none).") var brokerKey: String?
    @Option(help: "Where to serve /metrics and /health: HOST:PORT or none (default \(AuthConfiguration.defaultAdmin)).") var admin: String?
    @Option(name: .customLong("log-format"), help: "text or json (default text).") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (default info).")
    var logLevel: String?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let settings: AuthConfiguration
        do {
            let configuration = try AuthConfiguration.programConfiguration(arguments: CommandLine.arguments, environment: environment)
            settings = try configuration.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader)
                return try AuthConfiguration(reader: reader)
            }
        } catch {
            throw ValidationError("\(error)")
        }
        let logger = Logger(label: "auth")
        let (endpoints, caFiles, credentialsKeyFile) = (settings.endpoints, settings.caFiles, settings.credentialsKeyFile)
        let observability = Observability.bootstrap(program: "switchboard-auth")

        let accounts: AuthAccounts
        let credentials: ClientCredentials?
        do {
            accounts = try AuthAccounts.load(path: settings.accountsFile, environment: environment)
            credentials = try ClientCredentials.load(certificate: settings.certificate, brokerKey: settings.brokerKey)
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
            let dataDirectory = URL(fileURLWithPath: settings.dataDirectory).standardizedFileURL.path
            let cache: CredentialCache
            let outbox: Outbox
            do {
                cache = try CredentialCache(
                    configuration: .init(logger: logger),
                    file: EncryptedCredentialFile(directory: dataDirectory, keyFile: credentialsKeyFile), ifUnreadable: .startEmpty
                )
                outbox = try Outbox(path: dataDirectory + "/auth-outbox.sqlite", producer: credentials?.certificate.name ?? "auth")
            } catch {
                throw ValidationError("\(error) (the data directory is set with --data-dir, the key file with --credentials-key-file)")
            }
            // Saved after the group, before the HTTP client goes (releases run newest first).
            runtime.onExit { try? await cache.save() }
            let service = AuthService(
                accounts: accounts, authenticators: standardAuthenticators(http: http, logger: logger), cache: cache,
                events: AuthEvents(outbox: outbox), logger: logger)

            let io = try runtime.ioThread()
            var workerSettings = ServiceWorker.Settings()
            workerSettings.concurrency = settings.concurrency
            workerSettings.socketOptions = credentials?.socketOptions ?? []
            let worker = ServiceWorker(
                service: "auth", io: io, endpoint: endpoints.service, settings: workerSettings, logger: logger, handler: service.handle)
            var senderSettings = OutboxSender.Settings()
            senderSettings.socketOptions = credentials?.socketOptions ?? []
            let sender = OutboxSender(outbox: outbox, io: io, endpoint: endpoints.ingest, settings: senderSettings, logger: logger)
            runtime.add(OutboxSenderService(sender: sender), name: "outbox")
            runtime.add(AuthSessions(auth: service, keepAliveInterval: settings.keepAlive, logger: logger), name: "sessions")
            runtime.add(ServiceWorkerService(worker: worker), name: "worker")
            var readiness = Readiness()
            readiness.add("broker") { sender.isConnected }
            runtime.serveAdmin(
                at: settings.admin, observability: observability, readiness: readiness, collectors: [{ await sender.updateDepth() }])
            logger.info(
                "auth serving",
                metadata: [
                    "accounts": "\(accounts.accounts.map { "\($0.backend)/\($0.account)" }.joined(separator: ","))",
                    "outbox": "\(outbox.path)",
                ])
            ServiceReadiness.notify(.ready, environment: ProcessInfo.processInfo.environment)
        }
    }
}
