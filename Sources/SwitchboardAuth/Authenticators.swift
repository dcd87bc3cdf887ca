public import Foundation
public import Logging
import SwitchboardBackends
public import SwitchboardCredentials
public import SwitchboardHTTP
public import SwitchboardTokens

// How `switchboard-auth` logs in to each back end, on the back-end clients. Each turns an
// account into a `Credential` that carries the headers a worker sends, so workers need no
// back-end knowledge to use it; the conversions back to the clients' credential types are in
// SwitchboardTokens (`AuthTokenProvider+Backends.swift`), which workers and auth share.

extension AuthError {
    /// A log-in failure in operator terms: refused credentials are `.loginFailed`, anything
    /// else `.backendUnavailable`. The HTTP error's text is already redacted.
    static func from(_ error: HTTPError, backend: String, account: String) -> AuthError {
        if error.isInvalidCredentials {
            return AuthError(.loginFailed, "\(backend) refused the log-in of account \(account): \(error.vendorMessage ?? error.message)")
        }
        return AuthError(.backendUnavailable, "\(backend) log-in for account \(account) failed: \(error)")
    }
}

public struct FileMakerAuthenticator: BackendAuthenticator {
    public let backend = "filemaker"
    let http: SwitchboardHTTPClient
    let logger: Logger
    let now: @Sendable () -> Date

    public init(http: SwitchboardHTTPClient, logger: Logger, now: @escaping @Sendable () -> Date = { Date() }) {
        self.http = http
        self.logger = logger
        self.now = now
    }

    func client(_ account: AuthAccount) throws(AuthError) -> FileMakerClient {
        FileMakerClient(http: http, serverURL: account.baseURL, database: try account.option("database"), logger: logger)
    }

    public func logIn(_ account: AuthAccount) async throws(AuthError) -> Credential {
        let client = try client(account)
        do {
            let session = try await client.logIn(account: account.account, password: account.password)
            return credential(session)
        } catch {
            throw AuthError.from(error, backend: backend, account: account.account)
        }
    }

    /// A FileMaker token lives 15 minutes after its last use; `expiresAt` counts from the last
    /// call auth made or saw, which is never later than the server's own clock.
    func credential(_ session: FileMaker.Session) -> Credential {
        let issued = now()
        return Credential(
            token: session.token, issuedAt: issued, expiresAt: issued.addingTimeInterval(Double(session.idleLifetime.components.seconds)),
            headers: ["Authorization": "Bearer \(session.token)"], attributes: ["database": session.database, "account": session.account])
    }

    public func keepAlive(_ credential: Credential, account: AuthAccount) async throws(AuthError) -> Credential? {
        let session = FileMaker.Session(credential, account: account.account, database: try account.option("database"))
        let client = try client(account)
        let alive: Bool
        do {
            alive = try await client.validateSession(session)
        } catch {
            throw AuthError.from(error, backend: backend, account: account.account)
        }
        guard alive else { throw AuthError(.loginFailed, "filemaker session of account \(account.account) has ended") }
        var renewed = self.credential(session)
        renewed.issuedAt = credential.issuedAt
        return renewed
    }

    public func logOut(_ credential: Credential, account: AuthAccount) async {
        guard let client = try? client(account), let database = account.options["database"] else { return }
        try? await client.logOut(FileMaker.Session(credential, account: account.account, database: database))
    }
}

public struct ETOAuthenticator: BackendAuthenticator {
    public let backend = "eto"
    let http: SwitchboardHTTPClient
    let logger: Logger

    public init(http: SwitchboardHTTPClient, logger: Logger) {
        self.http = http
        self.logger = logger
    }

    /// The whole chain: SSOAuthenticate, the site log-in and the program selection. The site
    /// token's lifetime is the site's recycle interval, which the back end enforces; auth keeps
    /// no expiry of its own and refreshes when a worker reports the token rejected.
    public func logIn(_ account: AuthAccount) async throws(AuthError) -> Credential {
        guard let site = Int(try account.option("site")) else {
            throw AuthError(.configuration, "account eto/\(account.account): options.site must be a number")
        }
        return try await logIn(account, site: site, program: account.options["program"].flatMap { Int($0) })
    }

    /// A site token for another site of the account's enterprise: the scope is the site id.
    /// One account serves every site it may log in to; each site's token is cached apart.
    /// Scope `sso` is the account's SSO token itself (the enterprise level, for the site list).
    public func logIn(_ account: AuthAccount, scope: String) async throws(AuthError) -> Credential {
        if scope == "sso" { return try await ssoLogIn(account) }
        guard let site = Int(scope), site > 0 else {
            throw AuthError(.badRequest, "an eto scope is a site id (a positive number) or 'sso', got '\(scope.prefix(40))'")
        }
        return try await logIn(account, site: site, program: nil)
    }

    func ssoLogIn(_ account: AuthAccount) async throws(AuthError) -> Credential {
        let client = ETOClient(http: http, baseURL: account.baseURL, logger: logger)
        do {
            let sso = try await client.authenticate(email: account.account, password: account.password)
            let enterprise: String
            if let named = account.options["enterprise"] {
                enterprise = named
            } else {
                let all = try await client.enterprises(sso: sso)
                guard all.count == 1, let only = all.first else {
                    throw AuthError(.configuration, "account eto/\(account.account) has \(all.count) enterprises; set options.enterprise")
                }
                enterprise = only.guid
            }
            return Credential(token: sso.token, issuedAt: sso.issuedAt, attributes: ["enterprise": enterprise, "account": sso.email])
        } catch let error as HTTPError {
            throw AuthError.from(error, backend: backend, account: account.account)
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError(.backendUnavailable, "eto log-in for account \(account.account) failed")
        }
    }

    /// The UTC offset sent at site log-in, in minutes east of UTC: `options.utc_offset` when
    /// set, else the offset now of `options.time_zone` (an IANA name), else of this host's zone.
    public static func utcOffset(_ account: AuthAccount, at date: Date = Date()) throws(AuthError) -> Int {
        if let text = account.options["utc_offset"] {
            guard let minutes = Int(text), (-14 * 60...14 * 60).contains(minutes) else {
                throw AuthError(
                    .configuration, "account eto/\(account.account): options.utc_offset must be minutes from UTC (-840…840), got '\(text)'")
            }
            return minutes
        }
        let zone: TimeZone
        if let name = account.options["time_zone"] {
            guard let named = TimeZone(identifier: name) else {
                throw AuthError(
                    .configuration,
                    "account eto/\(account.account): options.time_zone '\(name)' is not a time zone name (e.g. America/Los_Angeles)")
            }
            zone = named
        } else {
            zone = TimeZone.current
        }
        return zone.secondsFromGMT(for: date) / 60
    }

    func logIn(_ account: AuthAccount, site: Int, program: Int?) async throws(AuthError) -> Credential {
        let chain = ETO.Account(
            email: account.account, password: account.password, enterpriseGuid: account.options["enterprise"], siteID: site,
            programID: program, utcOffset: try Self.utcOffset(account))
        do {
            let session = try await ETOClient(http: http, baseURL: account.baseURL, logger: logger).logIn(chain)
            var attributes = ["enterprise": session.enterpriseGuid, "site": String(session.siteID), "account": session.email]
            if let program = session.programID { attributes["program"] = String(program) }
            return Credential(
                token: session.securityToken, issuedAt: session.issuedAt,
                headers: ["enterpriseGuid": session.enterpriseGuid, "securityToken": session.securityToken], attributes: attributes)
        } catch {
            throw AuthError.from(error, backend: backend, account: account.account)
        }
    }
}

public struct DirectoryAuthenticator: BackendAuthenticator {
    public let backend = "directory"
    let http: SwitchboardHTTPClient
    let logger: Logger

    public init(http: SwitchboardHTTPClient, logger: Logger) {
        self.http = http
        self.logger = logger
    }

    /// The API key; it does not expire by itself. It travels in request paths, so it has no header.
    public func logIn(_ account: AuthAccount) async throws(AuthError) -> Credential {
        do {
            let key = try await DirectoryClient(http: http, baseURL: account.baseURL, logger: logger).logIn(
                user: account.account, password: account.password)
            return Credential(token: key.key, issuedAt: Date(), attributes: ["user": key.user])
        } catch {
            throw AuthError.from(error, backend: backend, account: account.account)
        }
    }
}

public struct SAPAuthenticator: BackendAuthenticator {
    public let backend = "sap"
    let http: SwitchboardHTTPClient
    let logger: Logger

    public init(http: SwitchboardHTTPClient, logger: Logger) {
        self.http = http
        self.logger = logger
    }

    public var logInLeavesState: Bool { true }

    /// Whether SAP still knows the registration (`GET {base}/{appId}` with its id, as SAP's
    /// tutorial checks it): true on 200, false on 404.
    public func verify(_ credential: Credential, account: AuthAccount) async throws(AuthError) -> Bool? {
        let application = try account.option("application")
        do {
            let client = SAPMobileServicesClient(
                http: http, baseURL: account.baseURL, applicationID: application,
                credentials: SAP.UserCredentials(user: account.account, password: account.password), logger: logger)
            return try await client.check(SAP.ConnectionID(credential.token)) == .valid
        } catch {
            throw AuthError.from(error, backend: backend, account: account.account)
        }
    }

    /// Registers an application connection; its id goes in `X-SMP-APPCID` on every request.
    /// The registration stays on shutdown: it belongs to the device, and the next start reuses
    /// it from the encrypted cache when one is configured.
    public func logIn(_ account: AuthAccount) async throws(AuthError) -> Credential {
        let application = try account.option("application")
        do {
            let client = SAPMobileServicesClient(http: http, baseURL: account.baseURL, applicationID: application, logger: logger)
            let connection = try await client.register(
                user: account.account, password: account.password,
                device: SAP.Device(deviceType: "Switchboard", deviceModel: "switchboard-auth"))
            return Credential(
                token: connection.id.value, issuedAt: Date(), headers: ["X-SMP-APPCID": connection.id.value],
                attributes: ["application": application])
        } catch {
            throw AuthError.from(error, backend: backend, account: account.account)
        }
    }
}

/// All four, sharing one HTTP client.
public func standardAuthenticators(http: SwitchboardHTTPClient, logger: Logger) -> [any BackendAuthenticator] {
    [
        FileMakerAuthenticator(http: http, logger: logger), ETOAuthenticator(http: http, logger: logger),
        DirectoryAuthenticator(http: http, logger: logger), SAPAuthenticator(http: http, logger: logger),
    ]
}
