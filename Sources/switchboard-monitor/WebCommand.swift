// `switchboard-monitor web`: a live dashboard for operators. It reaches the broker with the
// monitor's (or an admin's) certificate like the other monitor commands, and serves one page
// whose figures arrive over Server-Sent Events once a second. The page is protected by a token,
// loopback by default, and shows no personal data (see DashboardState). An admin's certificate
// also lets the page replay a dead letter.
//
// The token is a secret, so it never travels where secrets leak: not on the command line (the
// process list shows it to every user), not in a journal (it is printed only to a terminal, and
// only when this process made it up), not in addresses after the first one (it opens the page
// once, becomes a cookie, and the browser is sent to an address without it), not in a Referer
// (`Referrer-Policy: no-referrer`). Requests that change something must also come from the
// page itself: SameSite=Strict cookies are sent by another page on another port of the same
// host, so a page there could otherwise press the replay button (see DashboardServer).

import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import SwitchboardBus
import SwitchboardMonitor
import SwitchboardObservability
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import UnixSignals
import ZeroMQ

struct WebCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "A live web dashboard: event rates, the journal head, groups' lag and dead letters, services, kiosks, problems.",
        discussion: """
            Open the address it prints with ?token=TOKEN once: the page then keeps the token in a
            cookie and drops it from the address. The token is read from --token-file (a file of
            mode 0600 holding one line), else SWITCHBOARD_DASHBOARD_TOKEN, else made up at start;
            it must be at least 16 characters, with no spaces, quotes, commas, semicolons or
            backslashes. Only a token made up at start is printed, and only to a terminal. The
            page shows counts, names of event types, groups, services and kiosks, and times: no
            names of people, dates of birth, locations or notes. Times read "12 s ago"; the
            event rate and each group's lag over the last hour are drawn as charts from samples
            it keeps in memory every 10 s since it started. With an admin's certificate, a
            dead letter can be replayed from the page; the broker refuses it for the monitor's
            role.
            """)

    @Option(help: "Where to serve the dashboard (HOST:PORT; default \(MonitorConfiguration.defaultListen), loopback).") var listen: String?
    @Option(
        help: "A file holding the token that opens the page (mode 0600, one line); else SWITCHBOARD_DASHBOARD_TOKEN; else a new random one."
    )
    var tokenFile: String?
    /// Gone: refused with the reason, so a script that still passes it learns why.
    @Option(help: .hidden) var token: String?
    @OptionGroup var connection: MonitorConnection

    func validate() throws {
        if token != nil {
            throw ValidationError(
                "--token is no longer accepted: a command line is visible to every user of the machine (ps, /proc). Put the token in a file only this user can read (chmod 600) and give --token-file PATH, or set SWITCHBOARD_DASHBOARD_TOKEN"
            )
        }
    }

    func run() async throws {
        let monitor = try connection.load()
        let logger = Logger(label: "dashboard")
        let environment = ProcessInfo.processInfo.environment
        let settings = monitor.connection
        let options = settings.socketOptions
        let address = monitor.listen
        let secret: DashboardToken
        do {
            secret = try DashboardToken.resolve(file: tokenFile, environment: environment)
        } catch {
            throw ValidationError(error.description)
        }
        let endpoints = JournalFollower.Endpoints(
            fanout: settings.endpoints.fanout, replay: settings.endpoints.replay, socketOptions: options)
        try await ProcessRuntime.run(program: "dashboard", logger: logger) { runtime in
            runtime.maximumGracefulShutdownDuration = .seconds(2)
            let io = try runtime.ioThread()
            let admin = GroupAdminClient(
                io: io, endpoint: settings.endpoints.groups,
                settings: .init(timeout: .seconds(2), socketOptions: options))
            var clientSettings = ServiceClient.Settings()
            clientSettings.socketOptions = options
            let services = ServiceClient(
                io: io, endpoint: settings.endpoints.service, settings: clientSettings,
                logger: logger)
            runtime.onExit { await services.close() }
            let state = DashboardState()
            let server = DashboardServer(address: address, token: secret.value, state: state, admin: admin, logger: logger) { port in
                let url = "http://\(AdminAddress(host: address.host, port: port))/"
                FileHandle.standardOutput.write(Data((secret.announcement(url: url, terminal: isatty(STDOUT_FILENO) == 1) + "\n").utf8))
            }
            runtime.add(DashboardFeed(endpoints: endpoints, io: io, state: state))
            runtime.add(DashboardPoll(admin: admin, services: services, state: state))
            runtime.add(server)
        }
    }
}

/// The dashboard's token and where it came from. One set of rules whatever the source: at least
/// 16 characters, all of them allowed in a cookie value (RFC 6265 cookie-octets: visible ASCII
/// but `"`, `,`, `;` and `\`), one trailing newline dropped.
struct DashboardToken: Sendable {
    enum Source: Sendable, Equatable {
        case file(String)
        case environment
        case generated
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let value: String
    let source: Source

    /// `--token-file`, else `SWITCHBOARD_DASHBOARD_TOKEN`, else a new random one.
    static func resolve(file: String?, environment: [String: String]) throws(Failure) -> DashboardToken {
        if let file {
            let attributes: [FileAttributeKey: Any]
            let data: Data
            do {
                attributes = try FileManager.default.attributesOfItem(atPath: file)
                data = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw Failure(description: "--token-file \(file) cannot be read: \(error.localizedDescription)")
            }
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
            // Anyone else who can read it can open the dashboard.
            guard mode & 0o077 == 0 else {
                throw Failure(
                    description: "--token-file \(file) can be read by others (mode \(String(mode, radix: 8))): chmod 600 \(file)")
            }
            return DashboardToken(value: try check(String(decoding: data, as: UTF8.self), "--token-file \(file)"), source: .file(file))
        }
        if let text = environment["SWITCHBOARD_DASHBOARD_TOKEN"] {
            return DashboardToken(value: try check(text, "SWITCHBOARD_DASHBOARD_TOKEN"), source: .environment)
        }
        return DashboardToken(value: DashboardServer.randomToken(), source: .generated)
    }

    static func check(_ text: String, _ origin: String) throws(Failure) -> String {
        var token = Substring(text)
        if token.hasSuffix("\r\n") { token = token.dropLast(2) } else if token.hasSuffix("\n") { token = token.dropLast() }
        guard token.utf8.count >= 16 else { throw Failure(description: "\(origin): the token must be at least 16 characters") }
        let allowed = token.utf8.allSatisfy { byte in
            (0x21...0x7e).contains(byte) && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: ",") && byte != UInt8(ascii: ";")
                && byte != UInt8(ascii: "\\")
        }
        guard allowed else {
            throw Failure(
                description:
                    "\(origin): the token may hold only visible ASCII characters other than quotes, commas, semicolons and backslashes")
        }
        return String(token)
    }

    /// The line printed when the page is served. The token itself only when this process made it
    /// up (nobody else knows it) and standard output is a terminal: a service manager's journal
    /// keeps what it is given and shows it to whoever reads the logs.
    func announcement(url: String, terminal: Bool) -> String {
        switch source {
        case .generated where terminal:
            return "Dashboard: \(url)?token=\(value) (a new random token; open this address once, the page keeps it in a cookie)"
        case .generated:
            return
                "Dashboard: \(url) (its token is a new random one, not shown because standard output is not a terminal; to choose one, give --token-file or SWITCHBOARD_DASHBOARD_TOKEN)"
        case .file(let path):
            return "Dashboard: \(url) (open it once with ?token= and the token in \(path))"
        case .environment:
            return "Dashboard: \(url) (open it once with ?token= and the token in SWITCHBOARD_DASHBOARD_TOKEN)"
        }
    }
}
