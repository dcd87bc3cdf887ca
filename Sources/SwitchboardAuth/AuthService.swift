public import Foundation
public import Logging
public import SwitchboardBus
public import SwitchboardCredentials
import SwitchboardProtocol
public import SwitchboardTokens
import Synchronization

/// How `switchboard-auth` logs in to one kind of back end. Implementations are thin: the
/// back-end clients do the talking; this turns an account into a `Credential` with the headers
/// a worker must send, and knows how that back end's sessions are kept and ended.
public protocol BackendAuthenticator: Sendable {
    /// `eto`, `filemaker`, `directory` or `sap`.
    var backend: String { get }
    /// Logs in once. Throws `AuthError` (`.loginFailed` for refused credentials, naming the back
    /// end and account; `.backendUnavailable` when it cannot be reached). Never retries a
    /// refused log-in.
    func logIn(_ account: AuthAccount) async throws(AuthError) -> Credential
    /// Logs in for one scope of the account (ETO: a site). Back ends without scopes refuse any.
    func logIn(_ account: AuthAccount, scope: String) async throws(AuthError) -> Credential
    /// Keeps a live credential alive (FileMaker's idle clock). Returns the credential with its
    /// new expiry, or nil when the back end has no such notion. Throws when the credential is
    /// already dead.
    func keepAlive(_ credential: Credential, account: AuthAccount) async throws(AuthError) -> Credential?
    /// Ends the session on shutdown, freeing the server's slot; best effort.
    func logOut(_ credential: Credential, account: AuthAccount) async
    /// Asks the back end whether it still honours a credential it issued, without logging in
    /// (SAP: the registration). True: it does; false: it no longer knows it; nil: this back end
    /// has no such question, so `check` logs in afresh instead.
    func verify(_ credential: Credential, account: AuthAccount) async throws(AuthError) -> Bool?
    /// Whether a log-in leaves something on the server (SAP: a device registration), so that
    /// `check` logs in through the cache (at most once) rather than afresh each time.
    var logInLeavesState: Bool { get }
}

extension BackendAuthenticator {
    /// Most back ends have one token per account.
    public func logIn(_ account: AuthAccount, scope: String) async throws(AuthError) -> Credential {
        throw AuthError(.badRequest, "back end \(backend) has no scopes (token.get named scope '\(scope.prefix(40))')")
    }
    /// Most back ends have no idle clock to keep running.
    public func keepAlive(_ credential: Credential, account: AuthAccount) async throws(AuthError) -> Credential? { nil }
    /// Most back ends have no session to end.
    public func logOut(_ credential: Credential, account: AuthAccount) async {}
    /// Most back ends are checked by a fresh log-in.
    public func verify(_ credential: Credential, account: AuthAccount) async throws(AuthError) -> Bool? { nil }
    public var logInLeavesState: Bool { false }
}

/// The `auth` service: answers `token.get`, `token.invalidate` and `status` (protocol/README.md
/// section 14) from a credential cache that logs in on demand, one log-in at a time per
/// account however many workers ask.
public final class AuthService: Sendable {
    public let accounts: AuthAccounts
    public let cache: CredentialCache
    private let authenticators: [String: any BackendAuthenticator]
    private let events: AuthEvents?
    private let logger: Logger
    private let now: @Sendable () -> Date
    /// Accounts logged in at least once since start: the next log-in is a refresh.
    private let issued = Mutex<Set<CredentialKey>>([])
    /// Whether a `check` is running (one at a time: each logs in to every back end).
    private let checking = Mutex(false)

    /// - Parameters:
    ///   - events: where `auth.token.issued`, `auth.token.refreshed` and `auth.login.failed` go;
    ///     nil publishes none.
    public init(
        accounts: AuthAccounts, authenticators: [any BackendAuthenticator], cache: CredentialCache, events: AuthEvents?,
        logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.accounts = accounts
        self.authenticators = Dictionary(authenticators.map { ($0.backend, $0) }, uniquingKeysWith: { first, _ in first })
        self.cache = cache
        self.events = events
        self.logger = logger
        self.now = now
    }

    // MARK: Operations

    /// The handler a `ServiceWorker` for service `auth` runs.
    public func handle(_ request: ServiceRequest, _ partials: PartialReplies) async throws -> Data {
        do {
            switch request.operation {
            case "token.get":
                let body = try Self.decode(KeyRequest.self, request)
                let key = CredentialKey(backend: body.backend, account: body.account, scope: body.scope)
                // A worker whose token a back end refused names it, so auth never hands it back:
                // the report and the request for a new token are one message, with no window
                // in which another worker's token.get could fetch the dead token again.
                // `worked`: the token had served the worker's requests before it was refused (a
                // session that ended), so the log-in counts against the after-use budget.
                // A restarted auth no longer holds that token: the worker's word is all there is.
                if let rejected = body.rejected, !invalidate(key, fingerprint: rejected, hadWorked: body.worked == true),
                    body.worked == true
                {
                    cache.sessionEnded(key)
                }
                return try encode(TokenReply(key: key, credential: try await token(for: key)))
            case "token.invalidate":
                let body = try Self.decode(InvalidateRequest.self, request)
                let invalidated = invalidate(
                    CredentialKey(backend: body.backend, account: body.account, scope: body.scope), fingerprint: body.fingerprint)
                return try encode(["invalidated": invalidated])
            case "status":
                return try encode(status())
            case "check":
                let body = try Self.decodeCheck(request)
                guard let reply = await check(backend: body) else {
                    throw ServiceError(
                        status: ServiceStatus.conflict, code: "check-running",
                        message: "a check is running already; ask again when it ends",
                        retryable: true)
                }
                return try encode(reply)
            default:
                throw ServiceError(
                    status: ServiceStatus.notFound, code: "unknown-operation", message: "auth has no operation '\(request.operation)'")
            }
        } catch let error as AuthError {
            throw Self.serviceError(error)
        } catch let error as CredentialError {
            throw ServiceError(status: ServiceStatus.unavailable, code: "refresh-limit", message: error.description, retryable: true)
        }
    }

    /// A live credential for `key`, logging in when there is none.
    public func token(for key: CredentialKey) async throws -> Credential {
        guard let account = accounts.account(backend: key.backend, account: key.account) else {
            throw AuthError(.unknownAccount, "no account \(key.account) for back end \(key.backend)")
        }
        guard let authenticator = authenticators[key.backend] else {
            throw AuthError(.configuration, "no authenticator for back end \(key.backend)")
        }
        return try await cache.credential(for: key) { [events, logger, self] key in
            do {
                let credential: Credential
                if let scope = key.scope {
                    credential = try await authenticator.logIn(account, scope: scope)
                } else {
                    credential = try await authenticator.logIn(account)
                }
                let first = self.issued.withLock { $0.insert(key).inserted }
                logger.info(
                    "logged in",
                    metadata: ["backend": "\(key.backend)", "account": "\(key.account)", "fingerprint": "\(credential.fingerprint)"])
                await events?.publish(first ? .issued : .refreshed, key: key, credential: credential, reason: nil)
                return credential
            } catch {
                logger.warning("log-in failed", metadata: ["backend": "\(key.backend)", "account": "\(key.account)", "error": "\(error)"])
                await events?.publish(.loginFailed, key: key, credential: nil, reason: "\(error)")
                throw error
            }
        }
    }

    /// Drops the credential a worker reports as rejected, if it is still the current one
    /// (matched by fingerprint, so the token itself need not travel back).
    public func invalidate(_ key: CredentialKey, fingerprint: String, hadWorked: Bool = false) -> Bool {
        guard let current = cache.cached(key), current.fingerprint == fingerprint else { return false }
        let dropped = cache.invalidate(key, rejected: current, hadWorked: hadWorked)
        if dropped { logger.info("credential reported rejected", metadata: ["backend": "\(key.backend)", "account": "\(key.account)"]) }
        return dropped
    }

    /// The `backend` a `check` request names, if any (`{}` checks every account).
    static func decodeCheck(_ request: ServiceRequest) throws -> String? {
        guard case .object(let fields)? = JSONValue.parse(request.content) else {
            throw ServiceError(status: ServiceStatus.badRequest, code: "bad-request", message: "check takes {} or {\"backend\"}")
        }
        switch fields["backend"] {
        case nil: return nil
        case .string(let backend)?: return backend
        default: throw ServiceError(status: ServiceStatus.badRequest, code: "bad-request", message: "check: backend must be a string")
        }
    }

    /// Whether each account (of `backend`, or all) works now, asked of the back end itself:
    /// a fresh log-in, which FileMaker's session then ends; for SAP, whose every log-in registers a
    /// new device connection, the held registration is checked with the server, and only a
    /// registration the server no longer knows (or none) is made again, through the cache like
    /// `token.get`. A fresh log-in does not replace what workers hold. One check at a time: nil
    /// while another runs. Results carry codes and auth's own redacted messages, never a secret.
    public func check(backend: String?) async -> CheckReply? {
        guard
            checking.withLock({ running in
                defer { running = true }
                return !running
            })
        else { return nil }
        defer { checking.withLock { $0 = false } }
        var results: [CheckReply.Account] = []
        for account in accounts.accounts where backend == nil || account.backend == backend {
            results.append(await check(account))
        }
        logger.info(
            "accounts checked",
            metadata: ["accounts": "\(results.count)", "working": "\(results.filter { $0.result == .working }.count)"])
        return CheckReply(accounts: results, checkedAt: now())
    }

    private func check(_ account: AuthAccount) async -> CheckReply.Account {
        func answer(_ result: CheckReply.Result, _ detail: String, code: String? = nil) -> CheckReply.Account {
            CheckReply.Account(backend: account.backend, account: account.account, result: result, code: code, detail: detail)
        }
        guard let authenticator = authenticators[account.backend] else {
            return answer(.refused, "no authenticator for back end \(account.backend)", code: AuthError.Code.configuration.rawValue)
        }
        let key = CredentialKey(backend: account.backend, account: account.account, scope: nil)
        do {
            if let held = cache.cached(key), let known = try await authenticator.verify(held, account: account) {
                if known { return answer(.working, "the server knows the registration auth holds") }
                _ = cache.invalidate(key, rejected: held)
                _ = try await token(for: key)
                return answer(.working, "the server no longer knew the held registration; registered again")
            }
            if authenticator.logInLeavesState {
                _ = try await token(for: key)
                return answer(.working, "registered")
            }
            let credential = try await authenticator.logIn(account)
            await authenticator.logOut(credential, account: account)
            return answer(.working, "logged in")
        } catch let error as AuthError {
            switch error.code {
            case .loginFailed: return answer(.refused, error.message, code: error.code.rawValue)
            case .backendUnavailable: return answer(.unreachable, error.message, code: error.code.rawValue)
            default: return answer(.refused, error.message, code: error.code.rawValue)
            }
        } catch let error as CredentialError {
            return answer(.unreachable, error.description, code: "refresh-limit")
        } catch {
            return answer(.unreachable, "\(error)", code: AuthError.Code.backendUnavailable.rawValue)
        }
    }

    public func status() -> StatusReply {
        let entries = cache.snapshot()
        return StatusReply(
            accounts: accounts.accounts.map { account in
                // The account's default token, else any of its scopes' (ETO sites) that is held.
                let own = entries.filter { $0.key.backend == account.backend && $0.key.account == account.account }
                let entry = own.first { $0.key.scope == nil && $0.fingerprint != nil } ?? own.first { $0.fingerprint != nil } ?? own.first
                return .init(
                    backend: account.backend, account: account.account, loggedIn: entry?.fingerprint != nil,
                    fingerprint: entry?.fingerprint, issuedAt: entry?.issuedAt, expiresAt: entry?.expiresAt,
                    refreshing: entry?.refreshing ?? false, recentRefreshes: entry?.recentRefreshes ?? 0)
            })
    }

    // MARK: Keeping sessions alive, ending them

    /// Keeps idle-clocked sessions alive until cancelled: every `interval`, a credential that
    /// would expire within `window` is renewed in place (FileMaker `validateSession`); one that
    /// is already dead is dropped, so the next `token.get` logs in again.
    public func keepAlive(every interval: Duration = .seconds(60), window: TimeInterval = 5 * 60) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            await keepAliveOnce(window: window)
        }
    }

    public func keepAliveOnce(window: TimeInterval) async {
        for (account, key) in heldKeys() {
            guard let credential = cache.cached(key), let expires = credential.expiresAt, expires.timeIntervalSince(now()) < window,
                let authenticator = authenticators[account.backend]
            else { continue }
            do {
                if let renewed = try await authenticator.keepAlive(credential, account: account),
                    cache.cached(key)?.token == credential.token
                {
                    cache.store(renewed, for: key)
                }
            } catch {
                _ = cache.invalidate(key, rejected: credential)
                logger.info(
                    "session ended; next request logs in again", metadata: ["backend": "\(key.backend)", "account": "\(key.account)"])
            }
        }
    }

    /// Logs every held session out (FileMaker frees its slot); called on shutdown.
    public func logOutAll() async {
        for (account, key) in heldKeys() {
            guard let credential = cache.remove(key), let authenticator = authenticators[account.backend] else { continue }
            await authenticator.logOut(credential, account: account)
            logger.info("logged out", metadata: ["backend": "\(key.backend)", "account": "\(key.account)"])
        }
    }

    /// Every key the cache holds a credential for, with its account (each scope of an account
    /// is a key of its own).
    private func heldKeys() -> [(AuthAccount, CredentialKey)] {
        cache.snapshot().compactMap { entry in
            accounts.account(backend: entry.key.backend, account: entry.key.account).map { ($0, entry.key) }
        }
    }

    // MARK: Wire

    static func decode<T: Decodable>(_ type: T.Type, _ request: ServiceRequest) throws -> T {
        do {
            // Read through the protocol's own parser first: the broker let this request through
            // by the `backend` that parser sees (section 13.3), and Foundation's decoder might
            // read a duplicated key otherwise. Re-written, the content has each key once.
            guard let value = JSONValue.parse(request.content) else { throw CocoaError(.coderReadCorrupt) }
            var writer = JSONWriter()
            writer.value(value)
            return try JSONDecoder().decode(T.self, from: writer.data)
        } catch {
            throw ServiceError(
                status: ServiceStatus.badRequest, code: "bad-request",
                message: "\(request.operation) needs {\(T.self == KeyRequest.self ? "backend, account" : "backend, account, fingerprint")}")
        }
    }

    private func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(value)
    }

    static func serviceError(_ error: AuthError) -> ServiceError {
        switch error.code {
        case .unknownAccount: ServiceError(status: ServiceStatus.notFound, code: error.code.rawValue, message: error.message)
        case .loginFailed:
            ServiceError(status: ServiceStatus.badGateway, code: error.code.rawValue, message: error.message, retryable: false)
        case .backendUnavailable:
            ServiceError(status: ServiceStatus.unavailable, code: error.code.rawValue, message: error.message, retryable: true)
        case .badRequest: ServiceError(status: ServiceStatus.badRequest, code: error.code.rawValue, message: error.message)
        default: ServiceError(status: ServiceStatus.internalError, code: error.code.rawValue, message: error.message)
        }
    }
}

// MARK: Bodies (protocol/README.md section 14)

struct InvalidateRequest: Codable {
    var backend: String
    var account: String
    var scope: String?
    var fingerprint: String
}

/// The reply to `check` (protocol section 14.1): per account, whether it works now.
public struct CheckReply: Codable, Sendable {
    public enum Result: String, Codable, Sendable {
        /// The back end accepted the log-in (or knows the registration).
        case working
        /// The back end refused the credentials, or the account is misconfigured.
        case refused
        /// The back end could not be reached or failed, or auth's refresh limit held the log-in back.
        case unreachable
    }

    public struct Account: Codable, Sendable {
        public var backend: String
        public var account: String
        public var result: Result
        /// auth's error code (`login-failed`, `backend-unavailable`, `refresh-limit`, `configuration`), when not working.
        public var code: String?
        /// For people: what was done or what failed, naming the back end and account; never a secret.
        public var detail: String
    }

    public var accounts: [Account]
    public var checkedAt: Date

    enum CodingKeys: String, CodingKey {
        case accounts
        case checkedAt = "checked_at"
    }
}

public struct StatusReply: Codable, Sendable {
    public struct Account: Codable, Sendable {
        public var backend: String
        public var account: String
        public var loggedIn: Bool
        public var fingerprint: String?
        public var issuedAt: Date?
        public var expiresAt: Date?
        public var refreshing: Bool
        public var recentRefreshes: Int

        enum CodingKeys: String, CodingKey {
            case backend, account, fingerprint, refreshing
            case loggedIn = "logged_in"
            case issuedAt = "issued_at"
            case expiresAt = "expires_at"
            case recentRefreshes = "recent_refreshes"
        }
    }

    public var accounts: [Account]
}
