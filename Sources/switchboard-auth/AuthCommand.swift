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
            kept there too, in an encrypted file (AES-GCM, key file 0600). A data
            directory that group or others can reach is refused.
            SIGTERM or SIGINT: stop serving, log out of FileMaker (freeing its session
            slots), exit.

            The accounts file (protocol/README.md section 14.5), with made-up values:

            \(AuthAccounts.example)

            \(AuthAccounts.fields)
            """)

    /// Where state goes without --data-dir: the directory `switchboard up` gives auth.
    static let defaultDataDirectory = ".switchboard/auth/state"

    @Option(help: "The accounts file (JSON, mode 0600; format shown above).") var accounts: String?
    @Option(help: "The broker's service endpoint (Majordomo).") var service = "tcp://127.0.0.1:5563"
    @Option(help: "The broker's ingest endpoint, for auth.* events.") var ingest = "tcp://127.0.0.1:5560"
    @Option(name: .customLong("data-dir"), help: "Directory for the event outbox and the encrypted token file (created 0700).")
    var dataDirectory = AuthCommand.defaultDataDirectory
    @Option(name: .customLong("ca-file"), help: "An extra CA certificate (PEM) to trust for HTTPS, e.g. the emulator's ca.pem; repeatable.")
    var caFiles: [String] = []
    @Option(help: "Requests served at once.") var concurrency = 4
    @Option(name: .customLong("keep-alive"), help: "Seconds between checks that keep idle-clocked sessions alive.") var keepAlive = 60
    @Option(help: "This program's secret certificate (role auth), for a secure broker.") var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's public certificate or key.") var brokerKey: String?
    @Option(help: "Where to serve /metrics and /health (HOST:PORT or none; default 127.0.0.1:9563, or SWITCHBOARD_ADMIN).")
    var admin: String?
    @Option(name: .customLong("log-format"), help: "text or json.") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel: String?

    func run() async throws {
        do {
            try StructuredLogHandler.bootstrap(formatOption: logFormat, levelOption: logLevel)
        } catch {
            throw ValidationError("\(error)")
        }
        let logger = Logger(label: "auth")
        let adminAddress: AdminAddress?
        do {
            adminAddress = try AdminAddress.resolve(admin, defaultPort: 9563)
        } catch {
            throw ValidationError(error.description)
        }
        let observability = Observability.bootstrap(program: "switchboard-auth")

        let accounts: AuthAccounts
        let credentials: ClientCredentials?
        do {
            accounts = try AuthAccounts.load(path: self.accounts)
            credentials = try ClientCredentials.load(certificate: certificate, brokerKey: brokerKey)
        } catch let error as AuthError {
            throw ValidationError(error.message)
        } catch let error as Certificate.Failure {
            throw ValidationError(error.description)
        }
        let http: SwitchboardHTTPClient
        do {
            http = try SwitchboardHTTPClient(configuration: .init(extraCAFiles: caFiles), logger: logger)
        } catch {
            throw ValidationError("\(error)")
        }

        // Events always go through a durable outbox, as section 14.4 promises: without
        // --data-dir it lives in the default directory rather than nowhere. Absolute, so the
        // log says where.
        let dataDirectory = URL(fileURLWithPath: self.dataDirectory).standardizedFileURL.path
        let cache: CredentialCache
        let outbox: Outbox
        do {
            cache = try CredentialCache(
                configuration: .init(logger: logger), file: EncryptedCredentialFile(directory: dataDirectory), ifUnreadable: .startEmpty
            )
            outbox = try Outbox(path: dataDirectory + "/auth-outbox.sqlite", producer: credentials?.certificate.name ?? "auth")
        } catch {
            throw ValidationError("\(error) (the data directory is set with --data-dir)")
        }
        let service = AuthService(
            accounts: accounts, authenticators: standardAuthenticators(http: http, logger: logger), cache: cache,
            events: AuthEvents(outbox: outbox), logger: logger)

        let context = try Context()
        let io = try IOThread(context: context)
        var settings = ServiceWorker.Settings()
        settings.concurrency = max(1, concurrency)
        settings.socketOptions = credentials?.socketOptions ?? []
        let worker = ServiceWorker(
            service: "auth", io: io, endpoint: self.service, settings: settings, logger: logger, handler: service.handle)
        var senderSettings = OutboxSender.Settings()
        senderSettings.socketOptions = credentials?.socketOptions ?? []
        let sender = OutboxSender(outbox: outbox, io: io, endpoint: ingest, settings: senderSettings, logger: logger)
        var readiness = Readiness()
        readiness.add("broker") { sender.isConnected }
        let adminServer = observability.adminServer(
            at: adminAddress, readiness: readiness, collectors: [{ await sender.updateDepth() }], logger: logger)
        logger.info(
            "auth serving",
            metadata: [
                "accounts": "\(accounts.accounts.map { "\($0.backend)/\($0.account)" }.joined(separator: ","))", "outbox": "\(outbox.path)",
            ])
        ServiceReadiness.notify(.ready)
        let keepAliveInterval = Duration.seconds(max(1, keepAlive))
        var services: [any Service] = [
            OutboxSenderService(sender: sender), AuthSessions(auth: service, keepAliveInterval: keepAliveInterval, logger: logger),
            ServiceWorkerService(worker: worker),
        ]
        if let adminServer { services.append(adminServer) }
        // SIGTERM or SIGINT stops the services in reverse order: the admin server, the worker
        // (its request in hand answered), the sessions (logged out), then the outbox (what is
        // left sent, within the deadline).
        var configuration = ServiceGroupConfiguration(
            services: services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(8)
        try await ServiceGroup(configuration: configuration).run()
        logger.info("auth stopped")
        try? await cache.save()
        try? await http.shutdown()
    }
}
