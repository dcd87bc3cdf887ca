import Foundation
import Logging
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardTesting
import Synchronization
import Testing

/// One test's world: a running emulator, an HTTP client with tiny retry delays, the four
/// back-end clients, and the control API.
struct Harness: Sendable {
    let emulator: RunningEmulator
    let http: SwitchboardHTTPClient
    let logs: LogCapture

    var base: String { emulator.baseURL }
    var eto: ETOClient { ETOClient(http: http, baseURL: base + "/API", logger: logs.logger) }
    func fileMaker(_ version: FileMakerClient.Version = .vLatest) -> FileMakerClient {
        FileMakerClient(http: http, serverURL: base, database: "Shelter", version: version, logger: logs.logger)
    }
    /// The FileMaker client and a session of the seed's account, as most FileMaker tests start.
    func fileMakerSession() async throws -> (FileMakerClient, CredentialSource<FileMaker.Session>) {
        let fm = fileMaker()
        return (fm, .fixed(try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword)))
    }
    var directory: DirectoryClient { DirectoryClient(http: http, baseURL: base + "/directory", logger: logs.logger) }
    /// The outreach application's client, with the seed user's credentials (sent at once).
    var sap: SAPMobileServicesClient { sap(SAP.UserCredentials(user: Seed.sapUser, password: Seed.sapPassword)) }
    func sap(_ credentials: SAP.UserCredentials?) -> SAPMobileServicesClient {
        SAPMobileServicesClient(
            http: http, baseURL: base, applicationID: "org.riverside.outreach", credentials: credentials, logger: logs.logger)
    }

    // MARK: Control API (through our own HTTP client, so no other client is needed)

    private func control(
        _ method: SwitchboardHTTP.HTTPRequest.Method, _ path: [SwitchboardHTTP.HTTPRequest.PathSegment],
        query: [(name: String, value: String?)] = [], json: [String: Any]? = nil
    )
        async throws -> Any
    {
        var body = SwitchboardHTTP.HTTPRequest.Body.none
        if let json { body = .json(try JSONSerialization.data(withJSONObject: json)) }
        let request = SwitchboardHTTP.HTTPRequest(
            method, base, path: ["_emulator"] + path, query: query, body: body, api: .generic("emulator-control"), operation: "control")
        let response = try await http.execute(request)
        return try JSONSerialization.jsonObject(with: response.body, options: [.fragmentsAllowed])
    }

    /// `POST /_emulator/faults`.
    func fault(_ rule: [String: Any]) async throws { _ = try await control(.post, ["faults"], json: rule) }

    /// `GET /_emulator/requests?api=`: method, path, status, credential label of each request.
    func requests(_ api: String) async throws -> [[String: Any]] {
        try await control(.get, ["requests"], query: [("api", api)]) as? [[String: Any]] ?? []
    }

    /// How many logged requests of `api` have a path containing `fragment` (and the method, if given).
    func count(_ api: String, path fragment: String, method: String? = nil) async throws -> Int {
        try await requests(api).filter {
            (($0["path"] as? String) ?? "").contains(fragment) && (method == nil || ($0["method"] as? String) == method)
        }.count
    }

    func clearRequests() async throws { _ = try await control(.delete, ["requests"]) }
    func expire(_ api: String) async throws { _ = try await control(.post, ["expire"], json: ["api": api]) }
    func advanceClock(seconds: Int) async throws { _ = try await control(.post, ["clock"], json: ["advance_seconds": seconds]) }
}

/// Runs `body` against a fresh emulator; retries wait at most a few milliseconds.
func withHarness<T: Sendable>(logs: LogCapture = LogCapture(), _ body: @Sendable (Harness) async throws -> T) async throws -> T {
    try await withEmulator { emulator in
        let policy = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1), maxDelay: .milliseconds(4))
        let http = try SwitchboardHTTPClient(
            configuration: .init(connectTimeout: .seconds(5), timeout: .seconds(10), retryPolicy: policy), logger: logs.logger)
        do {
            let value = try await body(Harness(emulator: emulator, http: http, logs: logs))
            try await http.shutdown()
            return value
        } catch {
            try? await http.shutdown()
            throw error
        }
    }
}

/// A credential provider with one slot: logs in on first use and when told the credential was
/// rejected (unless someone already replaced it), counting log-ins. What the credential cache
/// does, reduced to what the tests need.
final class CountingProvider<Credential: Sendable & Equatable>: Sendable {
    private struct State {
        var current: Credential?
        var logIns = 0
    }
    private let state = Mutex(State())
    private let logIn: @Sendable () async throws -> Credential

    init(logIn: @escaping @Sendable () async throws -> Credential) { self.logIn = logIn }

    var logIns: Int { state.withLock { $0.logIns } }

    var provider: CredentialProvider<Credential> {
        { [self] forceRefresh, rejected in
            if let current = state.withLock({ $0.current }), !forceRefresh || current != rejected { return current }
            let fresh = try await logIn()
            state.withLock {
                $0.current = fresh
                $0.logIns += 1
            }
            return fresh
        }
    }
}

enum Seed {
    static let etoEmail = "intake@riverside.example"
    static let etoPassword = "eto-demo-Passw0rd!"
    static let enterprise = "6513270e-269e-4d37-b2a7-4de452e6b438"
    static let fmAccount = "switchboard"
    static let fmPassword = "fm-demo-Passw0rd!"
    static let directoryUser = "outreach-team"
    static let directoryPassword = "dir-demo-Passw0rd!"
    static let sapUser = "outreach1"
    static let sapPassword = "sap-demo-Passw0rd!"
}
