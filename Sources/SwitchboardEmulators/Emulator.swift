import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
public import Logging
import NIOCore
import NIOSSL
import Synchronization

/// The four emulated back ends behind one HTTP(S) server, each under its real path shape:
/// ETO at `/API/…`, the FileMaker Data API at `/fmi/data/…`, the Directory at `/directory/…`,
/// SAP Mobile Services at `/odata/applications/…` and `/{appId}`; plus the control API at
/// `/_emulator/…` (faults, request log, clock, expiry, reset), a prefix no real API uses.
///
/// State lives in memory; with `statePath` set, the data (not sessions) is loaded from that file
/// at start when it exists, written back within a second of any change, and on shutdown.
public final class Emulator: Sendable {
    public enum API: String, Sendable, CaseIterable {
        case eto, filemaker, directory, sap
    }

    public struct Configuration: Sendable {
        /// Address to listen on (loopback by default).
        public var host = "127.0.0.1"
        /// Port; 0 picks a free one (the running emulator reports it).
        public var port = 8480
        /// Which APIs to serve; the others answer 404.
        public var apis = Set(API.allCases)
        public var seed: EmulatorSeed
        /// Where to keep the data across restarts; nil keeps it in memory only.
        public var statePath: String?
        /// Serve HTTPS with this material; nil serves plain HTTP.
        public var tls: EmulatorTLS?
        /// The largest request body accepted (413 above it).
        public var maxBodyBytes = 16 << 20

        public init(seed: EmulatorSeed) { self.seed = seed }
    }

    let configuration: Configuration
    let logger: Logger
    let clock = EmulatorClock()
    let secrets = SecretBook()
    let faults = FaultInjector()
    let log = RequestLog()
    let apis: [any EmulatedAPI]
    private let dirty = Atomic<Bool>(false)
    private let port = Mutex<Int?>(nil)

    /// - Parameter configuration: reads `host`, `port`, `apis`, `seed`, `statePath`, `tls`, `maxBodyBytes`.
    public init(configuration: Configuration, logger: Logger = Logger(label: "switchboard.emulator")) throws {
        self.configuration = configuration
        self.logger = logger
        let all: [any EmulatedAPI] = [
            ETOEmulator(clock: clock, secrets: secrets), FileMakerEmulator(clock: clock, secrets: secrets),
            DirectoryEmulator(clock: clock, secrets: secrets), SAPEmulator(clock: clock, secrets: secrets),
        ]
        self.apis = all.filter { configuration.apis.contains(API(rawValue: $0.name)!) }
        var initial = configuration.seed
        if let path = configuration.statePath, FileManager.default.fileExists(atPath: path) {
            initial = try EmulatorSeed.load(from: URL(fileURLWithPath: path))
            logger.info("emulator state loaded", metadata: ["path": "\(path)"])
        }
        for api in all { api.load(initial) }
    }

    /// The port the server listens on, once it is running.
    public var boundPort: Int? { port.withLock { $0 } }

    /// Serves until the task is cancelled (or the service group shuts down), then saves state.
    /// `onListening` runs once with the bound port.
    public func run(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            try await self.respond(to: request)
        }
        var server: HTTPServerBuilder = .http1(configuration: .init(additionalChannelHandlers: [CloseConnectionHandler()]))
        if let tls = configuration.tls {
            let chain = try NIOSSLCertificate.fromPEMBytes(Array(tls.certificateChainPEM.utf8))
            let key = try NIOSSLPrivateKey(bytes: Array(tls.privateKeyPEM.utf8), format: .pem)
            var tlsConfiguration = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            tlsConfiguration.minimumTLSVersion = .tlsv12
            server = try .tls(server, tlsConfiguration: tlsConfiguration)
        }
        // Hummingbird logs a cancelled connection wait as an error at every shutdown; the
        // emulator reports what matters itself, so the framework only speaks when asked to debug.
        var quiet = logger
        quiet.logLevel = logger.logLevel <= .debug ? logger.logLevel : .critical
        let app = Application(
            responder: responder, server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "switchboard-emulator"),
            onServerRunning: { [self, logger, configuration] channel in
                let bound = channel.localAddress?.port ?? configuration.port
                self.port.withLock { $0 = bound }
                logger.info(
                    "emulator listening",
                    metadata: [
                        "address": "\(configuration.tls == nil ? "http" : "https")://\(configuration.host):\(bound)",
                        "apis": "\(configuration.apis.map(\.rawValue).sorted().joined(separator: ","))",
                    ])
                await onListening(bound)
            },
            logger: quiet)
        // The server ends on cancellation or on a service group's graceful shutdown (which
        // lets it finish the requests in hand instead of dropping accepted connections); the
        // saver ends with it.
        try await withThrowingTaskGroup(of: Void.self) { group in
            if configuration.statePath != nil {
                group.addTask { await self.saveWhileRunning() }
            }
            defer { group.cancelAll() }
            try await app.run()
        }
        if configuration.statePath != nil { try saveState() }
    }

    private func saveWhileRunning() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            if dirty.exchange(false, ordering: .acquiringAndReleasing) {
                do { try saveState() } catch { logger.error("emulator state not saved", metadata: ["error": "\(error)"]) }
            }
        }
    }

    /// Writes the data to `statePath` (atomically: a temporary file, then a rename).
    func saveState() throws {
        guard let path = configuration.statePath else { return }
        var seed = configuration.seed
        for api in apis { api.save(into: &seed) }
        try seed.encoded().write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    // MARK: Dispatch

    func respond(to request: Request) async throws -> Response {
        let started = ContinuousClock.now
        let path = request.uri.path
        // The path is split and decoded once, here, for dispatch and for the handler.
        let segments = Exchange.segments(of: path)
        let listening = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let origin = Exchange.origin(
            secure: configuration.tls != nil, host: request.head.authority,
            fallback: "\(listening):\(boundPort ?? configuration.port)")
        func exchange(_ body: Data) -> Exchange {
            Exchange(
                method: request.method, path: path, segments: segments, query: request.uri.query, headers: request.headers, body: body,
                origin: origin)
        }
        if segments.first == "_emulator" {
            let body = try await request.body.collect(upTo: configuration.maxBodyBytes)
            return Self.response(control(exchange(Data(body.readableBytesView))))
        }
        guard let api = apis.first(where: { $0.owns(segments) }) else {
            return Self.response(.json(404, ["error": .string("no emulated API serves \(path)")]))
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: configuration.maxBodyBytes)
        } catch {
            return Self.response(
                api.failureReply(
                    status: 413, code: nil, message: "request body over \(configuration.maxBodyBytes) bytes", for: exchange(Data())))
        }
        let exchange = exchange(Data(body.readableBytesView))
        let decision = faults.decide(api: api.name, method: request.method.rawValue, path: path)
        if decision.delay > 0 { try await Task.sleep(for: .milliseconds(decision.delay)) }
        var reply: Reply
        if let rule = decision.action {
            reply = faultReply(rule, api: api, exchange: exchange)
        } else {
            reply = api.handle(exchange)
            if exchange.method != .get, reply.status < 400 { dirty.store(true, ordering: .releasing) }
        }
        record(exchange, api: api, reply: reply, fault: decision.action, started: started)
        return Self.response(reply)
    }

    private func faultReply(_ rule: FaultRule, api: any EmulatedAPI, exchange: Exchange) -> Reply {
        switch rule.kind {
        case .close: return .closeConnection
        case .expire:
            _ = api.expireAll()
            return api.expiredReply(for: exchange)
        case .loginPage:
            return .text(
                200,
                "<!DOCTYPE html><html><head><title>Log in</title></head><body><form method=\"post\" action=\"/Login.aspx\">"
                    + "<input name=\"email\"><input type=\"password\" name=\"password\"><button>Log in</button></form></body></html>",
                contentType: "text/html; charset=utf-8")
        case .body:
            return .json(rule.status ?? 200, rule.body ?? .null)
        case .status, .latency:
            let status = rule.status ?? 500
            var reply = api.failureReply(status: status, code: rule.code, message: rule.message, for: exchange)
            if status == 429 || status == 503, let retryAfter = rule.retryAfter {
                reply.headers.append(("Retry-After", String(retryAfter)))
            }
            return reply
        }
    }

    private func record(_ exchange: Exchange, api: any EmulatedAPI, reply: Reply, fault: FaultRule?, started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        let credential = api.credentialLabel(for: exchange)
        var shown = secrets.maskPath(exchange.segments)
        if !exchange.query.isEmpty {
            shown +=
                "?"
                + exchange.query.sorted { $0.key < $1.key }.map { name, value in
                    let lowered = name.lowercased()
                    let masked =
                        lowered.contains("password") || lowered.contains("token") || lowered.contains("key")
                        ? "‹\(secrets.label(for: value) ?? "secret")›" : secrets.mask(value)
                    return "\(name)=\(masked)"
                }.joined(separator: "&")
        }
        let now = clock.now()
        log.append { sequence in
            RequestLog.Entry(
                sequence: sequence, time: now, api: api.name, method: exchange.method.rawValue, path: shown,
                status: reply.close ? 0 : reply.status, credential: credential,
                fault: fault.map { "\($0.kind.rawValue)#\($0.id)" },
                milliseconds: Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
        }
        logger.debug(
            "\(exchange.method.rawValue) \(shown) → \(reply.close ? "closed" : String(reply.status))", metadata: ["api": "\(api.name)"])
    }

    static func response(_ reply: Reply) -> Response {
        var fields = HTTPFields()
        for (name, value) in reply.headers {
            if let field = HTTPField.Name(name) { fields.append(HTTPField(name: field, value: value)) }
        }
        if reply.close { fields[CloseConnectionHandler.closeMarker] = "1" }
        return Response(
            status: .init(code: reply.status, reasonPhrase: reasonPhrase(reply.status)), headers: fields,
            body: .init(byteBuffer: ByteBuffer(bytes: reply.body)))
    }
}
