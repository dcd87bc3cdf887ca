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
        public var host = Configuration.defaultHost
        /// Port; 0 picks a free one (the running emulator reports it).
        public var port = Configuration.defaultPort
        /// Which APIs to serve; the others answer 404.
        public var apis = Set(API.allCases)
        public var seed: EmulatorSeed
        /// Where to keep the data across restarts; nil keeps it in memory only.
        public var statePath: String?
        /// Serve HTTPS with this material; nil serves plain HTTP.
        public var tls: EmulatorTLS?
        /// Where `tls` was generated and its test CA written (`init(reader:)`'s `tls_generate`),
        /// for the program to tell; nil: not generated.
        public var generatedTLSDirectory: String?
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
        let responder = EmulatorResponder(
            control: controlRouter().buildResponder(), apis: apis.map { (api: $0, responder: router(for: $0).buildResponder()) })
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

    // MARK: Routing

    /// An emulated API's router: its routes behind the middleware every API shares (see
    /// `Support/Routing.swift`).
    func router(for api: any EmulatedAPI) -> Router<EmulatorContext> {
        let router = Router(context: EmulatorContext.self, options: api.routerOptions)
        let limit = configuration.maxBodyBytes
        router.add(
            middleware: BodyLimit(limit: limit, origin: { self.origin($0) }) { exchange in
                api.failureReply(status: 413, code: nil, message: "request body over \(limit) bytes", for: exchange)
            })
        router.add(middleware: RequestLogging(emulator: self, api: api))
        router.add(middleware: FaultInjection(faults: faults, api: api))
        router.add(middleware: ChangeTracking { self.dirty.store(true, ordering: .releasing) })
        router.add(middleware: UnknownRoute { api.unknownRoute(for: $0) })
        api.addRoutes(to: router)
        return router
    }

    /// `http(s)://` and the authority the client reached this server under (see `Exchange.origin`).
    func origin(_ request: Request) -> String {
        let listening = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return Exchange.origin(
            secure: configuration.tls != nil, host: request.head.authority, fallback: "\(listening):\(boundPort ?? configuration.port)")
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
