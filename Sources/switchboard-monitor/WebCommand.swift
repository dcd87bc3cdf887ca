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
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SwitchboardBus
import SwitchboardObservability
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import Synchronization
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

    @Option(help: "Where to serve the dashboard (HOST:PORT; default \(WebCommand.defaultListen), loopback).") var listen: String?
    @Option(
        help: "A file holding the token that opens the page (mode 0600, one line); else SWITCHBOARD_DASHBOARD_TOKEN; else a new random one."
    )
    var tokenFile: String?
    /// Gone: refused with the reason, so a script that still passes it learns why.
    @Option(help: .hidden) var token: String?
    @OptionGroup var connection: MonitorConnection

    static let defaultListen = "127.0.0.1:9570"

    /// Where the page is served: the monitor's key `listen`.
    func listenAddress() throws -> AdminAddress {
        let text: String
        do {
            text = try connection.settings().configuration.read { reader in try reader.nonEmpty("listen") } ?? Self.defaultListen
        } catch {
            throw ValidationError("\(error)")
        }
        do {
            guard text != "none", let address = try AdminAddress.parse(text, option: "listen") else {
                throw ValidationError("listen must be HOST:PORT, got '\(text)'")
            }
            return address
        } catch let failure as AdminAddress.Failure {
            throw ValidationError(failure.description)
        }
    }

    func validate() throws {
        _ = try listenAddress()
        if token != nil {
            throw ValidationError(
                "--token is no longer accepted: a command line is visible to every user of the machine (ps, /proc). Put the token in a file only this user can read (chmod 600) and give --token-file PATH, or set SWITCHBOARD_DASHBOARD_TOKEN"
            )
        }
    }

    func run() async throws {
        try connection.bootstrapLogging()
        let logger = Logger(label: "dashboard")
        let environment = ProcessInfo.processInfo.environment
        let settings = try connection.settings()
        let options = settings.socketOptions
        let address = try listenAddress()
        let secret: DashboardToken
        do {
            secret = try DashboardToken.resolve(file: tokenFile, environment: environment)
        } catch {
            throw ValidationError(error.description)
        }
        let endpoints = JournalFollower.Endpoints(
            fanout: settings.endpoints.fanout, replay: settings.endpoints.replay, socketOptions: options)
        let context = try Context()
        let io = try IOThread(context: context)
        let admin = GroupAdminClient(
            io: io, endpoint: settings.endpoints.groups,
            settings: .init(timeout: .seconds(2), socketOptions: options))
        var clientSettings = ServiceClient.Settings()
        clientSettings.socketOptions = options
        let services = ServiceClient(
            io: io, endpoint: settings.endpoints.service, settings: clientSettings,
            logger: logger)
        let state = DashboardState()
        let server = DashboardServer(address: address, token: secret.value, state: state, admin: admin, logger: logger) { port in
            let url = "http://\(AdminAddress(host: address.host, port: port))/"
            FileHandle.standardOutput.write(Data((secret.announcement(url: url, terminal: isatty(STDOUT_FILENO) == 1) + "\n").utf8))
        }
        var configuration = ServiceGroupConfiguration(
            services: [
                .init(service: DashboardFeed(endpoints: endpoints, io: io, state: state)),
                .init(service: DashboardPoll(admin: admin, services: services, state: state)), .init(service: server),
            ], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(2)
        let group = ServiceGroup(configuration: configuration)
        do {
            try await group.run()
        } catch {
            await services.close()
            await io.shutdown()
            await context.terminate()
            throw error
        }
        await services.close()
        await io.shutdown()
        await context.terminate()
    }

    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
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
        return DashboardToken(value: WebCommand.randomToken(), source: .generated)
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

/// Follows the fan-out (live only) into the state.
struct DashboardFeed: Service {
    let endpoints: JournalFollower.Endpoints
    let io: IOThread
    let state: DashboardState

    func run() async throws {
        // Ends when cancelled: the group cancels it shortly after a graceful shutdown begins
        // (a follower waits for the next event, which may not come).
        let follower = JournalFollower(io: io, endpoints: endpoints, topics: [], from: nil)
        while !Task.isCancelled {
            switch try? await follower.next() {
            case .event(let event)?: state.record(event)
            case .welcome(_, let head)?: state.head(head)
            case nil: try? await Task.sleep(for: .milliseconds(200))
            default: continue
            }
        }
        await follower.close()
    }
}

/// Reads the broker's tables every second.
struct DashboardPoll: Service {
    let admin: GroupAdminClient
    let services: ServiceClient
    let state: DashboardState

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            var problem: String?
            let groups: [GroupInfo]?
            do { groups = try await admin.groups() } catch {
                groups = nil
                problem = "groups: \(error)"
            }
            // The newest page and the counts of all: a panel, not the whole list (10,000 dead
            // letters would not fit in one reply, nor on a page).
            let letters = try? await admin.deadLetterPage(newest: true, limit: DashboardState.deadLetterRows)
            let producers = try? await admin.producers()
            let directory = try? await services.directory(timeout: .seconds(1))
            state.broker(groups: groups, deadLetters: letters, producers: producers, services: directory?.services, error: problem)
            state.tick()
            try? await Task.sleep(for: .seconds(1))
        }
    }
}

/// The page, its live stream, and the replay action; every route needs the token.
///
/// The rules, each for a leak or a forgery seen or plausible:
///  - The token opens the page from the query only on `/`, which turns it into an HttpOnly,
///    SameSite=Strict cookie and redirects to `/`, so the address bar, the history and any
///    Referer no longer hold it. The API takes the cookie or `Authorization: Bearer`, never the
///    query. The dashboard serves plain HTTP only, so the cookie cannot be `Secure` (a browser
///    would not send it back).
///  - Every request that changes something (every method but GET and HEAD) needs an Origin (or,
///    when a browser sends none, a Referer) of this dashboard's own origin, and the page's CSRF
///    token in `X-CSRF-Token`. SameSite=Strict does not stop another port of 127.0.0.1 (the same
///    site), so the cookie alone proves nothing. The CSRF token is made per process and is in
///    the page only, which only a holder of the token gets.
///  - JSON APIs take only `application/json`: a form can send no such body, and a script of
///    another origin cannot send one without a CORS preflight, which this server never grants.
///  - Every answer says `Referrer-Policy: no-referrer`, `Cache-Control: no-store`,
///    `X-Content-Type-Options: nosniff` and refuses framing (`X-Frame-Options: DENY`, CSP
///    `frame-ancestors 'none'`).
///  - Secrets are compared in constant time.
struct DashboardServer: Service {
    let address: AdminAddress
    let token: String
    let state: DashboardState
    let admin: GroupAdminClient
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void
    /// Sent back by the page on every request that changes something.
    let csrf = WebCommand.randomToken()

    static let cookie = "switchboard_dashboard"
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    init(
        address: AdminAddress, token: String, state: DashboardState, admin: GroupAdminClient, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void
    ) {
        self.address = address
        self.token = token
        self.state = state
        self.admin = admin
        self.logger = logger
        self.onListening = onListening
    }

    /// The cookie or the bearer header (never the query: see the type's comment).
    func authorized(_ request: Request) -> Bool {
        if let bearer = request.headers[.authorization], bearer.hasPrefix("Bearer "),
            ConstantTime.equal(String(bearer.dropFirst(7)), token)
        {
            return true
        }
        let cookies = request.headers[values: .cookie].flatMap { $0.split(separator: ";") }
        return cookies.contains { cookie in
            let pair = cookie.trimmingCharacters(in: .whitespaces)
            return pair.hasPrefix("\(Self.cookie)=") && ConstantTime.equal(String(pair.dropFirst(Self.cookie.count + 1)), token)
        }
    }

    static func text(_ status: HTTPResponse.Status, _ text: String, type: String = "text/plain; charset=utf-8") -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// What `/api/dlq/replay` takes.
    struct Replay: Decodable {
        var group: String
        var busSeq: Int64
        enum CodingKeys: String, CodingKey {
            case group
            case busSeq = "bus_seq"
        }
    }

    func run() async throws {
        let router = Router()
        router.add(middleware: DashboardHeaders())
        router.add(middleware: SameOriginChanges(csrf: csrf))
        router.get("/") { request, _ -> Response in
            if let offered = request.uri.queryParameters["token"] {
                // The entry: the token from the address becomes the cookie, and the address
                // loses it.
                guard ConstantTime.equal(String(offered), token) else {
                    return Self.text(.unauthorized, "This token does not open this dashboard.\n")
                }
                var response = Response(status: .seeOther)
                response.headers[.location] = "/"
                response.headers[.setCookie] = "\(Self.cookie)=\(token); HttpOnly; SameSite=Strict; Path=/"
                return response
            }
            guard authorized(request) else {
                return Self.text(
                    .unauthorized, "This dashboard needs its token: open the address switchboard-monitor web printed, with ?token=.\n")
            }
            var response = Self.text(.ok, DashboardPage.html(csrf: csrf), type: "text/html; charset=utf-8")
            response.headers[.contentSecurityPolicy] =
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'"
            return response
        }
        let api = router.group("api").add(middleware: TokenRequired(server: self))
        api.get("snapshot") { _, _ -> Response in
            Self.text(.ok, String(decoding: state.snapshot(), as: UTF8.self), type: "application/json")
        }
        api.get("stream") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    // A snapshot at once, then one a second, until the page goes away.
                    while !Task.isCancelled {
                        let frame = "data: " + String(decoding: state.snapshot(), as: UTF8.self) + "\n\n"
                        try await writer.write(ByteBuffer(string: frame))
                        try await Task.sleep(for: .seconds(1))
                    }
                    try await writer.finish(nil)
                })
        }
        api.post("dlq/replay") { request, _ -> Response in
            let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
            guard type == "application/json" else {
                return Self.text(.unsupportedMediaType, "this API takes application/json only\n")
            }
            let body = try await request.body.collect(upTo: 4096)
            guard let replay = try? JSONDecoder().decode(Replay.self, from: Data(body.readableBytesView)) else {
                return Self.text(.badRequest, "a JSON object with group and bus_seq is required\n")
            }
            do throws(GroupAdminError) {
                let replayed = try await admin.replay(group: replay.group, .busSeq(replay.busSeq))
                return Self.text(.ok, "replayed \(replayed.map(String.init).joined(separator: ", "))\n")
            } catch {
                return Self.text(.init(code: error.status ?? 502), "\(error)\n")
            }
        }
        var quiet = logger
        quiet.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname(address.host, port: address.port), serverName: "switchboard-dashboard"),
            onServerRunning: { [onListening, address] channel in await onListening(channel.localAddress?.port ?? address.port) },
            logger: quiet)
        try await app.run()
    }
}

/// The headers every answer carries, errors (a 404 from the router) included.
struct DashboardHeaders<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        response.headers[.cacheControl] = "no-store"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        if response.headers[.contentSecurityPolicy] == nil {
            response.headers[.contentSecurityPolicy] = "default-src 'none'; frame-ancestors 'none'"
        }
        return response
    }
}

/// The API's routes need the token (cookie or bearer).
struct TokenRequired<Context: RequestContext>: RouterMiddleware {
    let server: DashboardServer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard server.authorized(request) else { return DashboardServer.text(.unauthorized, "token required\n") }
        return try await next(request, context)
    }
}

/// A request that may change something (any method but GET and HEAD) must come from the page:
/// an Origin (else a Referer) of this dashboard's origin, and the page's CSRF token.
struct SameOriginChanges<Context: RequestContext>: RouterMiddleware {
    let csrf: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method != .get && request.method != .head else { return try await next(request, context) }
        // The origin this dashboard was reached under: the browser's own Host header. It is
        // reached under several (127.0.0.1, localhost, an SSH tunnel's or a container's
        // published port), so no configured name would do; a page on another port or host
        // differs in it. A DNS-rebound name passes this check but has neither the cookie nor the
        // CSRF token.
        if let refusal = SameOrigin.refusal(
            scheme: "http", host: request.head.authority, origin: request.headers[.origin], referer: request.headers[.referer],
            page: "this dashboard")
        {
            return DashboardServer.text(.forbidden, refusal)
        }
        guard let offered = request.headers[DashboardServer.csrfHeader], ConstantTime.equal(offered, csrf) else {
            return DashboardServer.text(
                .forbidden, "refused: missing or wrong X-CSRF-Token header; this dashboard takes changes only from its page\n")
        }
        return try await next(request, context)
    }
}
