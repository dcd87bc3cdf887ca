// The dashboard's server side: the services that gather its state (DashboardFeed from the
// fan-out, DashboardPoll from the broker's tables) and the HTTP server that shows it
// (DashboardServer: the page, its Server-Sent Events stream, the replay action), on Hummingbird's
// Router with middleware for the headers every answer carries, the same-origin rule for changes
// and the token.

import Foundation
import HTTPTypes
import Hummingbird
public import Logging
import NIOCore
public import ServiceLifecycle
public import SwitchboardBus
public import SwitchboardObservability
import SwitchboardProtocol
import SwitchboardRuntime
public import ZeroMQ

/// Follows the fan-out (live only) into the state.
public struct DashboardFeed: Service {
    let endpoints: JournalFollower.Endpoints
    let io: IOThread
    let state: DashboardState

    public init(endpoints: JournalFollower.Endpoints, io: IOThread, state: DashboardState) {
        self.endpoints = endpoints
        self.io = io
        self.state = state
    }

    public func run() async throws {
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
public struct DashboardPoll: Service {
    let admin: GroupAdminClient
    let services: ServiceClient
    let state: DashboardState

    public init(admin: GroupAdminClient, services: ServiceClient, state: DashboardState) {
        self.admin = admin
        self.services = services
        self.state = state
    }

    public func run() async throws {
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
public struct DashboardServer: Service {
    let address: AdminAddress
    let token: String
    let state: DashboardState
    let admin: GroupAdminClient
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void
    /// Sent back by the page on every request that changes something.
    let csrf = DashboardServer.randomToken()

    static let cookie = "switchboard_dashboard"
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    /// - Parameters:
    ///   - token: what opens the page (checked by the caller: see the type's comment).
    ///   - onListening: called with the bound port once the server listens.
    public init(
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

    /// 32 random hexadecimal digits: the CSRF token, and a dashboard token nobody chose.
    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Every route: the page at `/`, the API under `/api`; all of them behind the token.
    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: DashboardHeaders())
        router.add(middleware: SameOriginChanges(csrf: csrf))
        let guarded = router.group().add(middleware: TokenRequired(server: self))
        guarded.get("/") { _, _ -> Response in
            var response = Self.text(.ok, DashboardPage.html(csrf: csrf), type: "text/html; charset=utf-8")
            response.headers[.contentSecurityPolicy] =
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'"
            return response
        }
        let api = guarded.group("api")
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
        return router
    }

    public func run() async throws {
        var quiet = logger
        quiet.logLevel = .critical
        let app = Application(
            router: router(),
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "switchboard-dashboard"),
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

/// The token check, once for every route. The page's address is the entry: `/?token=` turns
/// the token into the cookie and sends the browser to `/` without it; everywhere else the query
/// is never read, only the cookie or `Authorization: Bearer`.
struct TokenRequired<Context: RequestContext>: RouterMiddleware {
    let server: DashboardServer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let page = request.uri.path == "/"
        if page, let offered = request.uri.queryParameters["token"] {
            guard ConstantTime.equal(String(offered), server.token) else {
                return DashboardServer.text(.unauthorized, "This token does not open this dashboard.\n")
            }
            var response = Response(status: .seeOther)
            response.headers[.location] = "/"
            response.headers[.setCookie] = "\(DashboardServer.cookie)=\(server.token); HttpOnly; SameSite=Strict; Path=/"
            return response
        }
        guard server.authorized(request) else {
            return DashboardServer.text(
                .unauthorized,
                page
                    ? "This dashboard needs its token: open the address switchboard-monitor web printed, with ?token=.\n"
                    : "token required\n")
        }
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
