// The desk's web server: plain server-rendered forms (they work without the script), and one
// small script served by the process that keeps the journey live over server-sent events.
//
// The rules, each for a leak or a forgery seen or plausible:
//  - Every page but sign-in and the two static files needs a session (a random 256-bit id in
//    an HttpOnly, SameSite=Strict cookie, Secure under TLS). Without one a page redirects to
//    sign-in and the event stream answers 401.
//  - Every POST must come from the desk's own origin (Origin, else Referer: SameSite does not
//    stop another port of the same host), and every POST but sign-in must carry the session's
//    CSRF token (form field `csrf` or header X-CSRF-Token), compared in constant time.
//  - Sign-in is locked after repeated wrong passwords (DeskSessions), and says "locked" the same
//    way whether the name exists or not.
//  - Every answer carries a CSP of `default-src 'self'` with `frame-ancestors 'none'` (no inline
//    script or style anywhere), nosniff, a same-origin Referrer-Policy and no-store.
//  - Logs name the staff id, never a name typed, a password, or anything about a person.

import Foundation
import HTTPTypes
public import Hummingbird
import HummingbirdCore
import HummingbirdTLS
public import Logging
public import NIOCore
import NIOSSL
public import ServiceLifecycle
import SwitchboardBus
public import SwitchboardProtocol
import SwitchboardRuntime

/// Where the desk listens, and whether that needs TLS.
public enum DeskListen {
    /// Whether `host` is a loopback address (or `localhost`).
    public static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return bare == "localhost" || bare == "::1" || bare.hasPrefix("127.")
    }

    /// Refuses a non-loopback address without TLS, naming the flags.
    public static func check(host: String, certificate: String?, key: String?) throws(DeskProblem) {
        guard (certificate == nil) == (key == nil) else {
            throw DeskProblem(field: nil, "give --tls-cert and --tls-key together")
        }
        guard isLoopback(host) || certificate != nil else {
            throw DeskProblem(
                field: nil,
                "--listen \(host) is not a loopback address: the desk serves passwords and personal data, so it needs --tls-cert FILE and --tls-key FILE there"
            )
        }
    }
}

/// A request's context: the client's address (for the sign-in limit) and its session.
public struct DeskRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    var session: DeskSessions.Session?

    public init(source: Source) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    var client: String { remoteAddress?.ipAddress ?? "unknown" }
}

/// The desk's web server as a Service.
public struct DeskServer: Service, Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// PEM files; both or neither.
        public var certificatePath: String?
        public var keyPath: String?
        public var usersPath: String

        public init(host: String, port: Int, certificatePath: String? = nil, keyPath: String? = nil, usersPath: String) {
            self.host = host
            self.port = port
            self.certificatePath = certificatePath
            self.keyPath = keyPath
            self.usersPath = usersPath
        }

        var tls: Bool { certificatePath != nil }
    }

    public let configuration: Configuration
    public let actions: DeskActions
    public let sessions: DeskSessions
    public let status: DeskStatus
    /// Whether the outbox's delivery reaches the broker.
    let connected: @Sendable () -> Bool
    /// Asks ETO for exact matches now; nil when the desk has no service client.
    let liveSearch: (@Sendable (ETOServiceContent.SearchQuery) async -> [ETOServiceContent.Participant]?)?
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    static let cookie = "desk_session"
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    public init(
        configuration: Configuration, actions: DeskActions, sessions: DeskSessions, status: DeskStatus,
        connected: @escaping @Sendable () -> Bool,
        liveSearch: (@Sendable (ETOServiceContent.SearchQuery) async -> [ETOServiceContent.Participant]?)?, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.actions = actions
        self.sessions = sessions
        self.status = status
        self.connected = connected
        self.liveSearch = liveSearch
        self.logger = logger
        self.onListening = onListening
    }

    public func run() async throws {
        let router = Router(context: DeskRequestContext.self)
        router.add(middleware: DeskHeaders())
        router.add(middleware: DeskSessionCheck(server: self))
        router.get("/desk.css") { _, _ in Self.asset(DeskPage.css, type: "text/css; charset=utf-8") }
        router.get("/desk.js") { _, _ in Self.asset(DeskPage.script, type: "text/javascript; charset=utf-8") }
        router.get("/signin") { request, _ in
            Self.html(.ok, DeskPage.signIn(message: request.uri.queryParameters["out"] != nil ? "You are signed out." : nil))
        }
        router.post("/signin") { request, context in try await signIn(request, context) }
        router.post("/signout") { request, context in
            guard let session = context.session else { return Self.redirect("/signin") }
            _ = try await form(request, session)
            sessions.signOut(session.id)
            logger.info("desk sign-out", metadata: ["staff": "\(session.staffID)"])
            var response = Self.redirect("/signin?out=1")
            response.headers[.setCookie] =
                "\(Self.cookie)=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/\(configuration.tls ? "; Secure" : "")"
            return response
        }
        router.get("/") { request, context in
            guard let session = context.session else { return Self.redirect("/signin") }
            // Parsed as a form (a GET form sends spaces as '+').
            let query = Self.parseForm(ByteBuffer(string: request.uri.query ?? ""))
            return try await page(
                session, status: .ok, message: query["done"].flatMap { DeskPage.doneMessages[$0] }, problem: nil,
                name: query["name"], dateOfBirth: query["dob"])
        }
        router.post("/checkin") { request, context in
            guard let session = context.session else { return Self.redirect("/signin") }
            let fields = try await form(request, session)
            guard let id = fields["participant_id"].flatMap({ Int64($0) }), id >= 1 else {
                return try await page(session, status: .unprocessableContent, problem: DeskProblem(field: "participant", "choose a person"))
            }
            let known = try await actions.store.person(id)
            let person =
                known
                ?? RosterPerson(
                    participantID: id, firstName: fields["first_name"] ?? "", lastName: fields["last_name"] ?? "",
                    dateOfBirth: fields["date_of_birth"])
            do {
                let row = try await actions.checkIn(person, bed: fields["bed"], notes: fields["notes"], staffID: session.staffID)
                logger.info("desk check-in saved", metadata: ["staff": "\(session.staffID)", "event_id": "\(row.eventID)"])
                status.changed()
                return Self.redirect("/?done=checkin")
            } catch let problem as DeskProblem {
                return try await page(session, status: .unprocessableContent, problem: problem)
            }
        }
        router.post("/walkin") { request, context in
            guard let session = context.session else { return Self.redirect("/signin") }
            let fields = try await form(request, session)
            do {
                let row = try await actions.walkIn(
                    firstName: fields["first_name"], lastName: fields["last_name"], dateOfBirth: fields["date_of_birth"],
                    gender: fields["gender"], bed: fields["bed"], notes: fields["notes"], staffID: session.staffID)
                logger.info("desk walk-in saved", metadata: ["staff": "\(session.staffID)", "event_id": "\(row.eventID)"])
                status.changed()
                return Self.redirect("/?done=walkin")
            } catch let problem as DeskProblem {
                return try await page(session, status: .unprocessableContent, problem: problem, walkIn: fields)
            }
        }
        router.post("/void") { request, context in
            guard let session = context.session else { return Self.redirect("/signin") }
            let fields = try await form(request, session)
            do {
                let row = try await actions.void(fields["event_id"] ?? "", reason: fields["reason"], staffID: session.staffID)
                logger.info(
                    "desk void saved",
                    metadata: ["staff": "\(session.staffID)", "event_id": "\(row.voidEventID ?? "")", "checkin": "\(row.eventID)"])
                status.changed()
                return Self.redirect("/?done=void")
            } catch let problem as DeskProblem {
                return try await page(session, status: .conflict, problem: problem)
            }
        }
        router.get("/events") { _, context in
            guard let session = context.session else { return Self.text(.unauthorized, "sign in first\n") }
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    var last = ""
                    var quiet = 0
                    while !Task.isCancelled && !Task.isShuttingDownGracefully {
                        // An idle desk signs out even with the page open: the stream is not use.
                        guard sessions.isAlive(session.id) else {
                            try await writer.write(ByteBuffer(string: "event: signedout\ndata: {}\n\n"))
                            break
                        }
                        let seen = status.changes
                        let snapshot = try await journeySnapshot()
                        if snapshot != last {
                            try await writer.write(ByteBuffer(string: "data: \(snapshot)\n\n"))
                            last = snapshot
                            quiet = 0
                        } else {
                            quiet += 1
                            if quiet >= 15 {
                                try await writer.write(ByteBuffer(string: ": still here\n\n"))
                                quiet = 0
                            }
                        }
                        // At once on a new outcome; at least every second (the outbox's
                        // deliveries and the session's idle clock are not announced).
                        await status.change(after: seen, within: .seconds(1))
                        try Task.checkCancellation()
                    }
                    try await writer.finish(nil)
                })
        }
        var server: HTTPServerBuilder = .http1()
        if let certificatePath = configuration.certificatePath, let keyPath = configuration.keyPath {
            let chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
            let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
            var tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            tls.minimumTLSVersion = .tlsv12
            server = try .tls(server, tlsConfiguration: tls)
        }
        var quiet = logger
        quiet.logLevel = .critical
        let app = Application(
            router: router, server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "switchboard-desk"),
            onServerRunning: { [onListening, configuration] channel in await onListening(channel.localAddress?.port ?? configuration.port)
            },
            logger: quiet)
        try await app.run()
    }

    // MARK: sign-in

    func signIn(_ request: Request, _ context: DeskRequestContext) async throws -> Response {
        let fields = Self.parseForm(try await request.body.collect(upTo: 16 * 1024))
        let name = fields["name"]?.trimmingCharacters(in: .whitespaces) ?? ""
        let password = fields["password"] ?? ""
        let client = context.client
        guard !name.isEmpty, !password.isEmpty else {
            return Self.html(.unprocessableContent, DeskPage.signIn(message: "Give your name and password."))
        }
        if sessions.isLocked(name: name, client: client) {
            logger.notice("desk sign-in refused: locked", metadata: ["client": "\(client)"])
            return Self.html(.tooManyRequests, DeskPage.signIn(message: DeskPage.lockedMessage))
        }
        let accounts: DeskAccounts
        do {
            accounts = try DeskAccounts(path: configuration.usersPath)
        } catch {
            logger.error("desk accounts cannot be read", metadata: ["reason": "\(error)"])
            return Self.html(.internalServerError, DeskPage.signIn(message: "The desk's accounts cannot be read; ask an administrator."))
        }
        let account = await accounts.verify(name: name, password: password)
        switch sessions.signIn(name: name, client: client, account: account) {
        case .signedIn(let session):
            logger.info("desk sign-in", metadata: ["staff": "\(session.staffID)", "client": "\(client)"])
            var response = Self.redirect("/")
            response.headers[.setCookie] =
                "\(Self.cookie)=\(session.id); HttpOnly; SameSite=Strict; Path=/\(configuration.tls ? "; Secure" : "")"
            return response
        case .refused:
            logger.notice("desk sign-in refused: wrong name or password", metadata: ["client": "\(client)"])
            return Self.html(.unauthorized, DeskPage.signIn(message: "Wrong name or password."))
        case .locked:
            logger.notice("desk sign-in refused: locked", metadata: ["client": "\(client)"])
            return Self.html(.tooManyRequests, DeskPage.signIn(message: DeskPage.lockedMessage))
        }
    }

    // MARK: forms and pages

    /// A POST's form, once its CSRF token is the session's (else a 403 is thrown).
    func form(_ request: Request, _ session: DeskSessions.Session) async throws -> [String: String] {
        let fields = Self.parseForm(try await request.body.collect(upTo: 64 * 1024))
        let offered = request.headers[Self.csrfHeader] ?? fields["csrf"] ?? ""
        guard ConstantTime.equal(offered, session.csrf) else {
            logger.notice("desk request refused: missing or wrong CSRF token", metadata: ["staff": "\(session.staffID)"])
            throw HTTPError(.forbidden, message: "refused: missing or wrong CSRF token; reload the page and try again")
        }
        return fields
    }

    static func parseForm(_ buffer: ByteBuffer) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            guard let key = parts.first else { continue }
            fields[decode(key)] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    func page(
        _ session: DeskSessions.Session, status code: HTTPResponse.Status, message: String? = nil, problem: DeskProblem?,
        name: String? = nil, dateOfBirth: String? = nil, walkIn: [String: String] = [:]
    ) async throws -> Response {
        var results: [RosterPerson]?
        var searchNote: String?
        let name = name?.trimmingCharacters(in: .whitespaces)
        let dob = dateOfBirth.flatMap { $0.isEmpty ? nil : $0 }
        if (name?.isEmpty == false) || dob != nil {
            var found = try await actions.store.search(name: name ?? "", dateOfBirth: dob)
            let words = (name ?? "").split(separator: " ")
            if let liveSearch, words.count >= 2 {
                let query = ETOServiceContent.SearchQuery(
                    siteID: Int(actions.siteID), programID: Int(actions.programID), firstName: String(words[0]),
                    lastName: words.dropFirst().joined(separator: " "), dateOfBirth: dob)
                if let live = await liveSearch(query) {
                    let people = live.map {
                        RosterPerson(
                            participantID: Int64($0.participantID), firstName: $0.firstName, lastName: $0.lastName,
                            dateOfBirth: $0.dateOfBirth)
                    }
                    try? await actions.store.upsert(people)
                    for person in people where !found.contains(where: { $0.participantID == person.participantID }) { found.append(person) }
                } else {
                    searchNote = "ETO did not answer; these are from the roster kept on this desk."
                }
            }
            results = found
        }
        let rows = try await actions.store.checkIns(day: DeskActions.day())
        let body = DeskPage.main(
            DeskPage.MainModel(
                kioskID: actions.kioskID, siteID: actions.siteID, programID: actions.programID, csrf: session.csrf,
                staffID: session.staffID, message: message, problem: problem, name: name ?? "", dateOfBirth: dob ?? "",
                results: results, searchNote: searchNote, walkIn: walkIn, rows: try await states(rows), banner: try await banner(),
                roster: try await rosterLine()))
        return Self.html(code, body)
    }

    /// Each row with the sentence its journey shows.
    func states(_ rows: [JourneyRow]) async throws -> [(JourneyRow, DeskPage.State)] {
        let pending = Set(try await actions.outbox.pending(limit: 10_000).map(\.eventID))
        let refused = Set(try await actions.outbox.rejected().map(\.entry.eventID))
        return rows.map { ($0, DeskPage.state(of: $0, pending: pending, refused: refused)) }
    }

    /// The offline banner, or nil.
    func banner() async throws -> String? {
        let waiting = try await actions.outbox.counts().pending
        guard !connected() || status.journeyReachable == false else { return nil }
        return "Offline: the broker does not answer. Check-ins are saved on this desk; \(waiting) waiting to be sent."
    }

    func rosterLine() async throws -> String {
        let updated = try await actions.store.setting(DeskRoster.updatedSetting).flatMap(Double.init)
        var line: String
        if let updated {
            let minutes = Int(max(0, Date().timeIntervalSince1970 - updated) / 60)
            line = minutes == 0 ? "Roster updated just now" : "Roster updated \(minutes) min ago"
        } else {
            line = "Roster: never updated — searching ETO only"
        }
        if status.rosterProblem != nil { line += " (ETO's list cannot be had now)" }
        return line + "."
    }

    /// What the event stream sends: every state the page shows, as JSON.
    func journeySnapshot() async throws -> String {
        let rows = try await states(try await actions.store.checkIns(day: DeskActions.day()))
        var states: [String: [String: String]] = [:]
        for (row, state) in rows { states[row.eventID] = ["kind": state.kind, "text": state.text] }
        let object: [String: Any] = [
            "banner": try await banner() ?? "", "roster": try await rosterLine(), "rows": states,
            "order": rows.map { $0.0.eventID },
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    static func html(_ status: HTTPResponse.Status, _ body: String) -> Response {
        text(status, body, type: "text/html; charset=utf-8")
    }

    static func text(_ status: HTTPResponse.Status, _ text: String, type: String = "text/plain; charset=utf-8") -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func asset(_ text: String, type: String) -> Response {
        self.text(.ok, text, type: type)
    }

    static func redirect(_ location: String) -> Response {
        var response = Response(status: .seeOther)
        response.headers[.location] = location
        return response
    }
}

extension DeskSessions {
    /// Whether the session is alive, without counting this as use.
    public func isAlive(_ id: String) -> Bool { peek(id) }
}

/// The headers every answer carries, errors included.
struct DeskHeaders<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.contentSecurityPolicy] =
            "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        response.headers[.cacheControl] = "no-store"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        return response
    }
}

/// Finds the request's session, and refuses a POST from another origin.
struct DeskSessionCheck: RouterMiddleware {
    typealias Context = DeskRequestContext
    let server: DeskServer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let cookies = request.headers[values: .cookie].flatMap { $0.split(separator: ";") }
        for cookie in cookies {
            let pair = cookie.trimmingCharacters(in: .whitespaces)
            if pair.hasPrefix("\(DeskServer.cookie)="),
                let session = server.sessions.session(String(pair.dropFirst(DeskServer.cookie.count + 1)))
            {
                context.session = session
            }
        }
        if request.method == .post {
            guard let refusal = sameOrigin(request) else { return try await next(request, context) }
            server.logger.notice("desk request refused: not from the desk's page", metadata: ["path": "\(request.uri.path)"])
            return DeskServer.text(.forbidden, refusal)
        }
        return try await next(request, context)
    }

    /// Why the POST is refused, or nil when it comes from this desk's own origin.
    func sameOrigin(_ request: Request) -> String? {
        // The origin the desk was reached under: the browser's own Host header (loopback,
        // a name, an address); a page of another port or host differs in it.
        SameOrigin.refusal(
            scheme: server.configuration.tls ? "https" : "http", host: request.head.authority, origin: request.headers[.origin],
            referer: request.headers[.referer], page: "the desk")
    }
}
