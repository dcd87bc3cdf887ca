// `switchboard-monitor web`: a live dashboard for operators. It reaches the broker with the
// monitor's (or an admin's) certificate like the other monitor commands, and serves one page
// whose figures arrive over Server-Sent Events once a second. The page is protected by a token
// (printed at start, or given), loopback by default, and shows no personal data (see
// DashboardState). An admin's certificate also lets the page replay a dead letter.

import ArgumentParser
import Foundation
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
            Open the address it prints (it carries the token once; the browser keeps it in a
            cookie). The token is --token, else SWITCHBOARD_DASHBOARD_TOKEN, else a new random
            one printed at start. The page shows counts, names of event types, groups, services
            and kiosks, and times: no names of people, dates of birth, locations or notes. With
            an admin's certificate, a dead letter can be replayed from the page; the broker
            refuses it for the monitor's role.
            """)

    @Option(help: "Where to serve the dashboard (HOST:PORT; default 127.0.0.1:9570, loopback).") var listen: String?
    @Option(help: "The token that opens the page (or SWITCHBOARD_DASHBOARD_TOKEN); default: a new random one.") var token: String?
    @OptionGroup var connection: MonitorConnection

    /// Where the page is served: the layers' `listen`.
    func listenAddress() throws -> AdminAddress {
        let layers = try connection.settings(extra: ["listen": listen]).layers
        let text = layers.string("listen") ?? "127.0.0.1:9570"
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
        if let token, token.count < 16 { throw ValidationError("--token must be at least 16 characters") }
    }

    func run() async throws {
        StructuredLogHandler.bootstrap(level: .warning)
        let logger = Logger(label: "dashboard")
        let environment = ProcessInfo.processInfo.environment
        let settings = try connection.settings(extra: ["listen": listen])
        let options = settings.socketOptions
        let address = try listenAddress()
        let secret = token ?? environment["SWITCHBOARD_DASHBOARD_TOKEN"] ?? Self.randomToken()
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
        let server = DashboardServer(address: address, token: secret, state: state, admin: admin, logger: logger) { port in
            // The one place the token is shown: whoever started the dashboard opens it.
            FileHandle.standardOutput.write(
                Data("Dashboard: http://\(AdminAddress(host: address.host, port: port))/?token=\(secret)\n".utf8))
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
            let letters = try? await admin.deadLetters()
            let producers = try? await admin.producers()
            let directory = try? await services.directory(timeout: .seconds(1))
            state.broker(groups: groups, deadLetters: letters, producers: producers, services: directory?.services, error: problem)
            state.tick()
            try? await Task.sleep(for: .seconds(1))
        }
    }
}

/// The page, its live stream, and the replay action; every route needs the token.
struct DashboardServer: Service {
    let address: AdminAddress
    let token: String
    let state: DashboardState
    let admin: GroupAdminClient
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    static let cookie = "switchboard_dashboard"

    func authorized(_ request: Request) -> Bool {
        if request.uri.queryParameters["token"].map(String.init) == token { return true }
        if request.headers[.authorization] == "Bearer \(token)" { return true }
        let cookies = request.headers[values: .cookie].flatMap { $0.split(separator: ";") }
        return cookies.contains { $0.trimmingCharacters(in: .whitespaces) == "\(Self.cookie)=\(token)" }
    }

    static func text(_ status: HTTPResponse.Status, _ text: String, type: String = "text/plain; charset=utf-8") -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    func run() async throws {
        let router = Router()
        router.get("/") { request, _ -> Response in
            guard authorized(request) else {
                return Self.text(.unauthorized, "This dashboard needs its token: open the address switchboard-monitor web printed.\n")
            }
            var response = Self.text(.ok, DashboardPage.html, type: "text/html; charset=utf-8")
            response.headers[.setCookie] = "\(Self.cookie)=\(token); HttpOnly; SameSite=Strict; Path=/"
            response.headers[.contentSecurityPolicy] = "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"
            return response
        }
        router.get("/api/snapshot") { request, _ -> Response in
            guard authorized(request) else { return Self.text(.unauthorized, "token required\n") }
            return Self.text(.ok, String(decoding: state.snapshot(), as: UTF8.self), type: "application/json")
        }
        router.get("/api/stream") { request, _ -> Response in
            guard authorized(request) else { return Self.text(.unauthorized, "token required\n") }
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            headers[.cacheControl] = "no-store"
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
        router.post("/api/dlq/replay") { request, _ -> Response in
            guard authorized(request) else { return Self.text(.unauthorized, "token required\n") }
            guard let group = request.uri.queryParameters["group"].map(String.init),
                let busSeq = request.uri.queryParameters["bus_seq"].flatMap({ Int64(String($0)) })
            else { return Self.text(.badRequest, "group and bus_seq are required\n") }
            do throws(GroupAdminError) {
                let replayed = try await admin.replay(group: group, .busSeq(busSeq))
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
