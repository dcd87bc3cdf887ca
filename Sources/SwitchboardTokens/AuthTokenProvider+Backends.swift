// The conversions between `auth`'s credentials and the back-end clients' own credential types,
// and the worker-side providers of those types. `switchboard-auth` uses the conversions too
// (it keeps FileMaker sessions alive and logs them out), which is why they live here rather
// than in either program's module.

import Foundation
public import SwitchboardBackends
public import SwitchboardCredentials

extension FileMaker.Session {
    /// The session behind a FileMaker credential from `auth`.
    public init(_ credential: Credential, account: String, database: String) {
        self.init(token: credential.token, account: account, database: database, issuedAt: credential.issuedAt)
    }
}

extension Credential {
    /// The credential a FileMaker session stands for (tokens compare equal, which is what a
    /// rejection is matched by).
    public init(_ session: FileMaker.Session) {
        self.init(token: session.token, issuedAt: session.issuedAt, headers: ["Authorization": "Bearer \(session.token)"])
    }
}

extension AuthTokenProvider {
    /// A provider of FileMaker sessions for the back-end clients, backed by this worker's cache
    /// and the auth service.
    public func fileMaker(account: String, database: String) -> CredentialProvider<FileMaker.Session> {
        let provider = self.provider(backend: "filemaker", account: account)
        return { forceRefresh, rejected in
            let credential = try await provider(forceRefresh, rejected.map(Credential.init))
            return FileMaker.Session(credential, account: account, database: database)
        }
    }

    /// `fileMaker(account:database:)` as a client's credential source that also tells the
    /// cache which sessions worked (`accepted`).
    public func fileMakerSource(account: String, database: String) -> CredentialSource<FileMaker.Session> {
        .provider(fileMaker(account: account, database: database)) { [self] session in
            accepted(Credential(session), backend: "filemaker", account: account)
        }
    }
}

extension ETO.SiteSession {
    /// The site session behind an ETO credential from `auth` (its attributes name the
    /// enterprise, site and program).
    public init(_ credential: Credential, account: String, site: Int) {
        self.init(
            enterpriseGuid: credential.headers["enterpriseGuid"] ?? credential.attributes["enterprise"] ?? "",
            securityToken: credential.token, siteID: Int(credential.attributes["site"] ?? "") ?? site,
            programID: credential.attributes["program"].flatMap { Int($0) }, email: account, issuedAt: credential.issuedAt)
    }
}

extension Credential {
    /// The credential an ETO site session stands for (matched by token on a rejection).
    public init(_ session: ETO.SiteSession) {
        self.init(
            token: session.securityToken, issuedAt: session.issuedAt,
            headers: ["enterpriseGuid": session.enterpriseGuid, "securityToken": session.securityToken])
    }
}

extension AuthTokenProvider {
    /// A provider of ETO site sessions for `site`, one token per site (`token.get` with the site
    /// as its scope), backed by this worker's cache and the auth service.
    public func eto(account: String, site: Int) -> CredentialProvider<ETO.SiteSession> {
        let provider = self.provider(backend: "eto", account: account, scope: String(site))
        return { forceRefresh, rejected in
            let credential = try await provider(forceRefresh, rejected.map(Credential.init))
            return ETO.SiteSession(credential, account: account, site: site)
        }
    }

    /// `eto(account:site:)` as a client's credential source that also tells the cache which
    /// site sessions worked (`accepted`).
    public func etoSource(account: String, site: Int) -> CredentialSource<ETO.SiteSession> {
        .provider(eto(account: account, site: site)) { [self] session in
            accepted(Credential(session), backend: "eto", account: account, scope: String(site))
        }
    }
}

extension AuthTokenProvider {
    /// The account's ETO SSO token and enterprise (`token.get` scope `sso`), for calls above the
    /// site level (the site list). `rejected`: the token ETO refused, reported first (it leaves
    /// the cache only if it is still the current one: a fresher one fetched meanwhile stays).
    public func etoSSO(account: String, rejected refused: ETO.SSOToken? = nil) async throws -> (token: ETO.SSOToken, enterprise: String) {
        if let refused, let current = cache.cached(CredentialKey(backend: "eto", account: account, scope: "sso")),
            current.token == refused.token
        {
            rejected(current, backend: "eto", account: account, scope: "sso")
        }
        let credential = try await credential(backend: "eto", account: account, scope: "sso")
        return (
            ETO.SSOToken(token: credential.token, email: account, issuedAt: credential.issuedAt), credential.attributes["enterprise"] ?? ""
        )
    }
}

extension AuthTokenProvider {
    /// A provider of the Directory API key of `account` for the Directory client, backed by this
    /// worker's cache and the auth service (`token.get` for backend `directory`).
    public func directory(account: String) -> CredentialProvider<Directory.APIKey> {
        let provider = self.provider(backend: "directory", account: account)
        return { forceRefresh, rejected in
            let credential = try await provider(
                forceRefresh, rejected.map { Credential(token: $0.key, issuedAt: Date(), attributes: ["user": $0.user]) })
            return Directory.APIKey(key: credential.token, user: credential.attributes["user"] ?? account)
        }
    }
}
