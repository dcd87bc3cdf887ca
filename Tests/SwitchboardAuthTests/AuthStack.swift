import Foundation
import Logging
import SwitchboardAuth
import SwitchboardBackends
import SwitchboardBroker
import SwitchboardBus
import SwitchboardCredentials
import SwitchboardEmulators
import SwitchboardHTTP
import SwitchboardTesting
import SwitchboardTokens
import Testing
import ZeroMQ

/// The whole credential path with real parts: the emulator (HTTP), a broker (Majordomo), the
/// `auth` service as a `ServiceWorker`, and a worker-side `AuthTokenProvider` with its own
/// cache, each logging into one capture so tests can search it for secrets.
struct AuthStack: Sendable {
    let emulator: RunningEmulator
    let broker: BrokerFixture
    let service: AuthService
    let tokens: AuthTokenProvider
    let client: ServiceClient
    let http: SwitchboardHTTPClient
    let logs: LogCapture
    let outbox: Outbox

    static let passwords = ["fm-demo-Passw0rd!", "eto-demo-Passw0rd!", "dir-demo-Passw0rd!", "sap-demo-Passw0rd!"]

    static func accounts(base: String, fileMakerPassword: String = "fm-demo-Passw0rd!", directoryBase: String? = nil) throws -> AuthAccounts
    {
        try AuthAccounts(accounts: [
            AuthAccount(
                backend: "filemaker", account: "switchboard", password: fileMakerPassword, baseURL: base, options: ["database": "Shelter"]),
            AuthAccount(
                backend: "eto", account: "intake@riverside.example", password: "eto-demo-Passw0rd!", baseURL: base + "/API",
                options: ["site": "101", "program": "792", "utc_offset": "-360"]),
            AuthAccount(
                backend: "directory", account: "outreach-team", password: "dir-demo-Passw0rd!",
                baseURL: directoryBase ?? base + "/directory"),
            AuthAccount(
                backend: "sap", account: "outreach1", password: "sap-demo-Passw0rd!", baseURL: base,
                options: ["application": "org.riverside.outreach"]),
        ])
    }

    var fileMaker: FileMakerClient { FileMakerClient(http: http, serverURL: emulator.baseURL, database: "Shelter", logger: logs.logger) }
    /// The emulator's control API, through our own HTTP client.
    func control(_ method: HTTPRequest.Method, _ path: String, json: String? = nil) async throws -> Data {
        let request = HTTPRequest(
            method, emulator.baseURL, path: ["_emulator"] + path.split(separator: "/").map { .plain(String($0)) },
            body: json.map { HTTPRequest.Body.raw(Data($0.utf8), contentType: "application/json") } ?? HTTPRequest.Body.none,
            api: .generic("emulator-control"), operation: "control")
        return try await http.execute(request, logger: logs.logger).body
    }

    /// The request log of one API.
    func requests(api: String) async throws -> [[String: Any]] {
        let request = HTTPRequest(
            .get, emulator.baseURL, path: ["_emulator", "requests"], query: [("api", api)], api: .generic("emulator-control"),
            operation: "requests")
        let body = try await http.execute(request, logger: logs.logger).body
        return try JSONSerialization.jsonObject(with: body) as? [[String: Any]] ?? []
    }

    /// How many FileMaker log-ins the emulator has seen.
    func fileMakerLogIns() async throws -> Int {
        try await requests(api: "filemaker").filter {
            ($0["method"] as? String) == "POST" && ($0["path"] as? String)?.hasSuffix("/sessions") == true
        }.count
    }

    static func run<T: Sendable>(
        fileMakerPassword: String = "fm-demo-Passw0rd!", directoryBase: String? = nil,
        refreshLimit: RefreshLimit = .init(maximum: 50, per: 60), _ body: @Sendable (AuthStack) async throws -> T
    ) async throws -> T {
        try await withEmulator { emulator in
            let broker = try await BrokerFixture.start { configuration in
                configuration.serviceHeartbeat = .milliseconds(500)
                configuration.serviceLiveness = 10
            }
            let logs = LogCapture()
            var retry = RetryPolicy()
            retry.baseDelay = .milliseconds(1)
            retry.maxDelay = .milliseconds(5)
            let http = try SwitchboardHTTPClient(configuration: .init(retryPolicy: retry), logger: logs.logger)
            let outbox = try broker.outbox("auth")
            let service = AuthService(
                accounts: try accounts(base: emulator.baseURL, fileMakerPassword: fileMakerPassword, directoryBase: directoryBase),
                authenticators: standardAuthenticators(http: http, logger: logs.logger),
                cache: CredentialCache(configuration: .init(refreshLimit: refreshLimit, logger: logs.logger)),
                events: AuthEvents(outbox: outbox), logger: logs.logger)
            var settings = ServiceWorker.Settings()
            settings.concurrency = 4
            // The suite's usual 500 ms x 10, and a minute per request: in the first minute of a
            // whole-suite run a check of four back ends missed 20 s once.
            settings.heartbeat = .milliseconds(500)
            settings.liveness = 10
            let worker = ServiceWorker(
                service: "auth", io: broker.io, endpoint: broker.endpoints.service, settings: settings, logger: logs.logger,
                handler: service.handle)
            var clientSettings = ServiceClient.Settings()
            clientSettings.timeout = .seconds(60)
            let client = ServiceClient(io: broker.io, endpoint: broker.endpoints.service, settings: clientSettings, logger: logs.logger)
            let tokens = AuthTokenProvider(
                client: client,
                cache: CredentialCache(configuration: .init(refreshLimit: refreshLimit, logger: logs.logger)))
            let stack = AuthStack(
                emulator: emulator, broker: broker, service: service, tokens: tokens, client: client, http: http, logs: logs, outbox: outbox
            )
            let result: Result<T, any Error>
            do {
                result = .success(
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await worker.run() }
                        defer { group.cancelAll() }
                        return try await body(stack)
                    })
            } catch {
                result = .failure(error)
            }
            await client.close()
            try? await http.shutdown()
            await broker.stop()
            return try result.get()
        }
    }
}
