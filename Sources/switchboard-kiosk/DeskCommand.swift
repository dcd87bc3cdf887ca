// `switchboard-kiosk desk` (the front desk page) and `desk-user` (its staff accounts). The desk
// is one process and one ServiceGroup: the admin server and the outbox's delivery exactly as
// `serve` runs them (KioskServices), then the journey (replay polling), the roster refresh and
// the web server. Shutdown goes in reverse: the page stops taking check-ins first, and the
// delivery drains what is waiting.

import ArgumentParser
import Configuration
import Foundation
import Logging
import ServiceLifecycle
import SwitchboardBus
import SwitchboardDesk
import SwitchboardKiosk
import SwitchboardObservability
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import UnixSignals
import ZeroMQ

struct DeskCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "desk",
        abstract: "Serve the front desk page: staff sign in, find people, check them in, enter walk-ins, void mistakes.",
        discussion: """
            One process: the page, the kiosk's outbox (sent to the broker as `serve` does, so a \
            check-in made while the broker is down is kept and sent later) and /metrics and \
            /health on --admin. The page lists today's check-ins at this desk and where each is \
            (saved here, on the broker, in FileMaker, in ETO, voided, or a problem), live. It \
            keeps a roster of the site's participants (the eto service's participants.list) so \
            people are found while ETO or the broker is down. Staff accounts come from \
            `switchboard-kiosk desk-user add NAME`. --listen other than loopback needs \
            --tls-cert and --tls-key. --site-id and --program-id (keys site_id, program_id) are \
            required.
            """)

    @OptionGroup var options: KioskOptions
    @Option(
        help:
            "Where to serve the page (HOST:PORT; default \(DeskConfiguration.defaultListen)). Not loopback: needs --tls-cert and --tls-key."
    )
    var listen: String?
    @Option(name: .customLong("tls-cert"), help: "The page's TLS certificate chain (PEM).") var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "The page's TLS private key (PEM).") var tlsKey: String?
    @Option(name: .customLong("site-id"), help: "The ETO site of this desk's check-ins (required).") var siteID: String?
    @Option(name: .customLong("program-id"), help: "The ETO program of this desk's check-ins (required).") var programID: String?
    @Option(help: "The staff accounts file (default <data-dir>/kiosk/<id>/desk-users.json).") var users: String?
    @Option(help: "Sign-out after this long without use.") var idle: String = "10m"
    @Option(name: .customLong("roster-refresh"), help: "How often to refresh the roster from ETO.") var rosterRefresh: String = "5m"
    @Option(help: "Where to serve /metrics and /health (HOST:PORT or none; default \(KioskConfiguration.defaultAdmin)).")
    var admin: String?

    /// The flags that are no keys, checked before any configuration is read.
    func validate() throws {
        guard let idle = DurationText.parse(idle), idle > .zero else {
            throw ValidationError("--idle: '\(idle)' is not a duration like 10m")
        }
        guard let refresh = DurationText.parse(rosterRefresh), refresh >= .seconds(1) else {
            throw ValidationError("--roster-refresh: '\(rosterRefresh)' is not a duration like 5m")
        }
    }

    func run() async throws {
        let kiosk = try options.load()
        let desk: DeskConfiguration
        do {
            desk = try kiosk.program.read { reader in try DeskConfiguration(reader: reader) }
            try DeskListen.check(host: desk.listen.host, certificate: tlsCert, key: tlsKey)
        } catch let failure as ConfigurationError {
            throw ValidationError(failure.description)
        } catch {
            throw ValidationError("\(error)")
        }
        let idle = DurationText.parse(idle) ?? .seconds(600)
        let rosterRefresh = DurationText.parse(rosterRefresh) ?? .seconds(300)
        let kioskID = kiosk.id
        let adminAddress = kiosk.settings.admin
        let (outbox, logger) = try kiosk.open()
        let directory = (kiosk.settings.outboxPath as NSString).deletingLastPathComponent
        let usersPath = users ?? DeskUserCommand.defaultPath(kiosk: kiosk)
        do {
            _ = try DeskAccounts(path: usersPath)
        } catch {
            throw ValidationError(error.description)
        }
        let store: DeskStore
        do {
            store = try DeskStore(path: (directory as NSString).appendingPathComponent("desk.sqlite"))
        } catch {
            throw KioskFailure("cannot open the desk's store in \(directory): \(error)")
        }
        let connection = kiosk.settings.connection
        let (endpoint, senderSettings) = (kiosk.ingestEndpoint, kiosk.senderSettings)
        let socketOptions = connection.socketOptions
        try await ProcessRuntime.run(program: "desk", logger: logger) { runtime in
            runtime.maximumGracefulShutdownDuration = KioskServices.shutdownDeadline
            let io = try runtime.ioThread()
            let services = KioskServices(
                io: io, outbox: outbox, endpoint: endpoint, settings: senderSettings, admin: adminAddress,
                observability: Observability.bootstrap(program: "switchboard-kiosk"), recorder: nil, logger: logger)
            var clientSettings = ServiceClient.Settings()
            clientSettings.socketOptions = socketOptions
            let client = ServiceClient(io: io, endpoint: connection.endpoints.service, settings: clientSettings, logger: logger)
            runtime.onExit { await client.close() }
            let lookup = ETOLookup(client: client)
            let status = DeskStatus()
            let delivery = services.delivery
            let server = DeskServer(
                configuration: .init(
                    host: desk.listen.host, port: desk.listen.port, certificatePath: tlsCert, keyPath: tlsKey, usersPath: usersPath),
                actions: DeskActions(
                    outbox: outbox, store: store, kioskID: kioskID, siteID: desk.siteID, programID: desk.programID),
                sessions: DeskSessions(idle: idle), status: status, connected: { delivery.isConnected },
                liveSearch: { query in try? await lookup.search(query, timeout: .seconds(2)) }, logger: logger
            ) { [scheme = tlsCert == nil ? "http" : "https", host = desk.listen.host] port in
                // Written at once (print buffers when standard output is not a terminal).
                FileHandle.standardOutput.write(
                    Data("Front desk \(kioskID): \(scheme)://\(host):\(port)/ (accounts: \(usersPath)). Ctrl-C stops.\n".utf8))
            }
            runtime.add(services.configurations)
            runtime.add(
                DeskJourney(
                    io: io, replay: connection.endpoints.replay, socketOptions: socketOptions, store: store, status: status, logger: logger),
                name: "journey")
            runtime.add(
                DeskRoster(
                    client: client, store: store, status: status, siteID: desk.siteID, programID: desk.programID,
                    interval: rosterRefresh, logger: logger), name: "roster")
            runtime.add(server, name: "desk")
            ServiceReadiness.notify(.ready, environment: ProcessInfo.processInfo.environment)
        }
        print("Front desk stopped; \(try await outbox.counts().pending) check-ins waiting.")
    }
}

struct DeskUserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "desk-user", abstract: "Manage the front desk's staff accounts.",
        discussion: """
            Accounts live in a file of mode 0600 (default <data-dir>/kiosk/<id>/desk-users.json): \
            per account the name, a staff id (staff- and 8 hex digits: what check-in events carry \
            as recorded_by, never the name) and a PBKDF2-HMAC-SHA256 hash of the password \
            (210,000 rounds, a 16-byte random salt). A running desk reads the file at each \
            sign-in, so changes take effect at once.
            """,
        subcommands: [DeskUserAdd.self, DeskUserList.self, DeskUserRemove.self])

    static func defaultPath(kiosk: Kiosk) -> String {
        (kiosk.settings.dataDirectory as NSString).appendingPathComponent("kiosk/\(kiosk.id)/desk-users.json")
    }
}

struct DeskUserOptions: ParsableArguments {
    @OptionGroup var options: KioskOptions
    @Option(help: "The staff accounts file (default <data-dir>/kiosk/<id>/desk-users.json).") var users: String?

    func open() throws -> DeskAccounts {
        let path = try users ?? DeskUserCommand.defaultPath(kiosk: options.load())
        do {
            return try DeskAccounts(path: path)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

struct DeskUserAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Add a staff account; the password is asked on the terminal (twice, not shown).")

    @OptionGroup var common: DeskUserOptions
    @Argument(help: "The name staff type to sign in.") var name: String
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input (one line), for scripts.")
    var passwordStdin = false

    func run() async throws {
        var accounts = try common.open()
        let password: String
        if passwordStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw ValidationError("--password-stdin: no password on standard input")
            }
            password = line
        } else {
            guard isatty(STDIN_FILENO) == 1 else {
                throw ValidationError("standard input is not a terminal: give --password-stdin to read the password from it")
            }
            let first = try Terminal.readSecret("Password for \(name): ")
            let second = try Terminal.readSecret("Again: ")
            guard first == second else { throw ValidationError("the two passwords differ; nothing was saved") }
            password = first
        }
        do {
            let account = try accounts.add(name: name, password: password)
            print("Added \(name) as \(account.staffID) in \(accounts.path).")
        } catch let failure as DeskAccounts.Failure {
            throw ValidationError(failure.description)
        }
    }
}

struct DeskUserList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the staff accounts (names and staff ids).")

    @OptionGroup var common: DeskUserOptions

    func run() async throws {
        let accounts = try common.open()
        if accounts.accounts.isEmpty { print("No desk accounts in \(accounts.path).") }
        for account in accounts.accounts { print("\(account.staffID)  \(account.name)") }
    }
}

struct DeskUserRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a staff account.")

    @OptionGroup var common: DeskUserOptions
    @Argument(help: "The account's name.") var name: String

    func run() async throws {
        var accounts = try common.open()
        guard try accounts.remove(name: name) else {
            throw ValidationError("no desk account named '\(name)' in \(accounts.path)")
        }
        print("Removed \(name) from \(accounts.path); a session of theirs ends at its idle time.")
    }
}

/// A line typed on the terminal without echo.
enum Terminal {
    static func readSecret(_ prompt: String) throws -> String {
        FileHandle.standardError.write(Data(prompt.utf8))
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { throw ValidationError("cannot read the terminal's settings") }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line = readLine(strippingNewline: true) else { throw ValidationError("no password given") }
        return line
    }
}
