import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import ServiceLifecycle
import SwitchboardBus
import SwitchboardDesk
import SwitchboardEmulators
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization

/// A desk server on a free loopback port over a real outbox, store and accounts file, its log
/// captured; `delivery` and `journey` run too when given a broker.
struct DeskHarness: Sendable {
    static let staffName = "Ana Staff"
    static let password = "correct horse battery"

    let directory: TemporaryDirectory
    let outbox: Outbox
    let store: DeskStore
    let actions: DeskActions
    let sessions: DeskSessions
    let status: DeskStatus
    let capture: LogCapture
    let usersPath: String
    let account: DeskAccount

    init(kioskID: String = "desk-1", directory: TemporaryDirectory? = nil) throws {
        let directory = try directory ?? TemporaryDirectory("desk")
        self.directory = directory
        outbox = try Outbox(path: directory.path("kiosk/outbox.sqlite"), producer: kioskID)
        store = try DeskStore(path: directory.path("kiosk/desk.sqlite"))
        actions = DeskActions(outbox: outbox, store: store, kioskID: kioskID, siteID: 101, programID: 793)
        sessions = DeskSessions(idle: .seconds(600))
        status = DeskStatus()
        capture = LogCapture()
        usersPath = directory.path("kiosk/desk-users.json")
        var accounts = try DeskAccounts(path: usersPath)
        account = try accounts.add(name: Self.staffName, password: Self.password)
    }

    /// Waits until `condition` holds, checking it again each time the desk announces a change
    /// (`DeskStatus.changed()`, what wakes a page's event stream), never on a timer; fails after
    /// `timeout`.
    func whenShown(_ what: String, timeout: Duration = .seconds(20), _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            // Read the count before the check, so a change between the two wakes the wait.
            let seen = status.changes
            if try await condition() { return }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw WaitTimedOut(description: "timed out after \(timeout): \(what)") }
            await status.change(after: seen, within: left)
        }
    }

    /// Runs the server (and `extra` services) for `body`, then shuts them down gracefully.
    /// - Parameter tls: serve HTTPS with this certificate (the client trusts its authority).
    func run<T: Sendable>(
        connected: @escaping @Sendable () -> Bool = { true }, extra: [any Service] = [], tls: EmulatorTLS? = nil,
        liveSearch: (@Sendable (ETOServiceContent.SearchQuery) async -> [ETOServiceContent.Participant]?)? = nil,
        _ body: (DeskClient) async throws -> T
    ) async throws -> T {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var serverConfiguration = DeskServer.Configuration(host: "127.0.0.1", port: 0, usersPath: usersPath)
        var clientTLS: TLSConfiguration?
        if let tls {
            try tls.write(to: directory.path("tls"))
            serverConfiguration.certificatePath = directory.path("tls/server.pem")
            serverConfiguration.keyPath = directory.path("tls/server-key.pem")
            var trusting = TLSConfiguration.makeClientConfiguration()
            trusting.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array((tls.authorityPEM ?? "").utf8)))
            clientTLS = trusting
        }
        let server = DeskServer(
            configuration: serverConfiguration, actions: actions, sessions: sessions,
            status: status, connected: connected, liveSearch: liveSearch, logger: capture.logger
        ) { port in continuation.yield(port) }
        var quiet = Logger(label: "desk-test-group")
        quiet.logLevel = .critical
        var configuration = ServiceGroupConfiguration(
            services: extra.map { .init(service: $0) } + [.init(service: server)], logger: quiet)
        configuration.maximumGracefulShutdownDuration = .seconds(3)
        let group = ServiceGroup(configuration: configuration)
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { continuation.finish() }
                try await group.run()
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw WaitTimedOut(description: "the desk stopped before it listened") }
            let client = DeskClient(base: "\(tls == nil ? "http" : "https")://127.0.0.1:\(port)", tls: clientTLS)
            do {
                let result = try await body(client)
                try await client.http.shutdown()
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                try? await client.http.shutdown()
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
        }
    }

    /// Lines of the captured log that hold any personal datum or the password.
    func leaks(_ secrets: [String]) -> [String] {
        capture.lines(containing: secrets + [Self.password, Self.staffName])
    }
}

/// A browser, roughly: one cookie, no redirects followed, the page's own Origin on POSTs.
final class DeskClient: Sendable {
    let base: String
    let http: HTTPClient
    private let cookie = Mutex<String?>(nil)
    /// The last Set-Cookie header, whole.
    let setCookie = Mutex<String?>(nil)

    init(base: String, tls: TLSConfiguration? = nil) {
        self.base = base
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.redirectConfiguration = .disallow
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// The first chunk of the event stream.
    func firstEvent() async throws -> String {
        var request = HTTPClientRequest(url: base + "/events")
        if let cookie = cookie.withLock({ $0 }) { request.headers.add(name: "Cookie", value: cookie) }
        let response = try await http.execute(request, timeout: .seconds(30))
        guard response.status.code == 200 else { return "status \(response.status.code)" }
        for try await chunk in response.body { return String(buffer: chunk) }
        return ""
    }

    struct Answer {
        var status: Int
        var location: String?
        var body: String
        var headers: [String: String]
    }

    func get(_ path: String) async throws -> Answer {
        try await send("GET", path, form: nil, origin: nil)
    }

    /// A form POST; `origin` nil sends the desk's own.
    func post(_ path: String, _ form: [String: String], origin: String? = nil, withOrigin: Bool = true) async throws -> Answer {
        try await send("POST", path, form: form, origin: withOrigin ? (origin ?? base) : nil)
    }

    func send(_ method: String, _ path: String, form: [String: String]?, origin: String?) async throws -> Answer {
        var request = HTTPClientRequest(url: base + path)
        request.method = method == "POST" ? .POST : .GET
        if let cookie = cookie.withLock({ $0 }) { request.headers.add(name: "Cookie", value: cookie) }
        if let origin { request.headers.add(name: "Origin", value: origin) }
        if let form {
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
            let body = form.map { key, value in
                "\(key.addingPercentEncoding(withAllowedCharacters: allowed)!)=\(value.addingPercentEncoding(withAllowedCharacters: allowed)!)"
            }.joined(separator: "&")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await http.execute(request, timeout: .seconds(30))
        if let set = response.headers.first(name: "Set-Cookie") { setCookie.withLock { $0 = set } }
        if let set = response.headers.first(name: "Set-Cookie"), let pair = set.split(separator: ";").first {
            cookie.withLock { $0 = pair.hasSuffix("=") ? nil : String(pair) }
        }
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name.lowercased()] = header.value }
        let body = try await response.body.collect(upTo: 4 << 20)
        return Answer(
            status: Int(response.status.code), location: response.headers.first(name: "Location"), body: String(buffer: body),
            headers: headers)
    }

    /// The CSRF token in the page's forms.
    static func csrf(in page: String) -> String? {
        guard let range = page.range(of: "name=\"csrf\" value=\"") else { return nil }
        return String(page[range.upperBound...].prefix { $0 != "\"" })
    }

    /// Signs in and returns the main page's CSRF token.
    func signIn(_ name: String = DeskHarness.staffName, _ password: String = DeskHarness.password) async throws -> String {
        let answer = try await post("/signin", ["name": name, "password": password])
        guard answer.status == 303, answer.location == "/" else {
            throw WaitTimedOut(description: "sign-in answered \(answer.status): \(answer.body.prefix(200))")
        }
        let page = try await get("/")
        guard let token = Self.csrf(in: page.body) else { throw WaitTimedOut(description: "no CSRF token in the page") }
        return token
    }
}
