import Foundation
public import SwitchboardBus
public import SwitchboardCredentials
import SwitchboardProtocol
import Synchronization

/// The worker side of the auth service: a worker's own credential cache, filled by asking
/// `auth` over the bus. A worker never logs in itself and never per request: it reuses a token
/// until it expires or the back end rejects it, then asks `auth` again, one request at a time
/// however many of its requests are waiting.
///
/// On a rejection, `provider` drops the token locally and fetches a new one with a token.get
/// that names the rejected token's fingerprint, so `auth` logs in again rather than handing back
/// the same dead token: one log-in per rejection, not one per waiting request.
public final class AuthTokenProvider: Sendable {
    public let cache: CredentialCache
    private let client: ServiceClient
    private let timeout: Duration
    /// Per account, the fingerprint of the last token a back end rejected, and whether it had
    /// worked before: the next token.get names it, so auth drops it (if still current) before
    /// answering, and counts the log-in against the right budget (`RefreshLimit.afterUse`).
    private let rejections = Mutex<[CredentialKey: (fingerprint: String, worked: Bool)]>([:])

    public init(client: ServiceClient, cache: CredentialCache, timeout: Duration = .seconds(30)) {
        self.client = client
        self.cache = cache
        self.timeout = timeout
    }

    /// A usable credential for the account, from the cache or from `auth`.
    /// - Parameter scope: which part of the back end (ETO: a site id); nil for the account's default.
    public func credential(backend: String, account: String, scope: String? = nil) async throws -> Credential {
        try await cache.credential(for: CredentialKey(backend: backend, account: account, scope: scope)) { [client, timeout, self] key in
            let rejected = self.rejections.withLock { $0[key] }
            let body = try JSONEncoder().encode(
                KeyRequest(
                    backend: key.backend, account: key.account, scope: key.scope, rejected: rejected?.fingerprint,
                    worked: rejected?.worked == true ? true : nil))
            let reply: ServiceReply
            do {
                reply = try await client.request(service: "auth", operation: "token.get", content: body, timeout: timeout, idempotent: true)
            } catch ServiceClientError.serviceError(let status, let failure) {
                // Auth answered, with one of 14.2's errors: the worker's cache acts on its code
                // (`login-failed` ends the after-use budget; `refresh-limit` says when to come back).
                throw Self.error(status: status, failure, key: key)
            } catch {
                throw AuthError(.authUnavailable, "the auth service did not answer for \(key): \(error)")
            }
            guard reply.status == ServiceStatus.ok else {
                throw Self.error(status: reply.status, reply.header.error, key: key)
            }
            // Checked against the schema first, so a reply whose fingerprint is not its token's
            // never enters the cache (its messages name fields, never the token).
            do throws(ProtocolError) {
                try AuthContent.validateToken(reply.content)
            } catch {
                throw AuthError(.authUnavailable, "auth's token.get reply for \(key) is malformed: \(error.message)")
            }
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            do {
                return try decoder.decode(TokenReply.self, from: reply.content).credential
            } catch {
                throw AuthError(.authUnavailable, "auth's token.get reply for \(key) is malformed")
            }
        }
    }

    /// Auth's error reply as an ``AuthError`` with its code; `refresh-limit` comes back after the
    /// interval (protocol 14.2: 60 s at most).
    static func error(status: Int, _ failure: ServiceFailure?, key: CredentialKey) -> AuthError {
        let code = AuthError.Code(rawValue: failure?.code ?? "auth-error")
        return AuthError(
            code, failure?.message ?? "auth answered \(status) for \(key)",
            retryAfter: code == .refreshLimit ? Date().addingTimeInterval(RefreshLimit.default.interval) : nil)
    }

    /// Reports a credential the back end rejected: it leaves this worker's cache (if still the
    /// current one) and the next token.get names it to `auth`, saying whether it had worked.
    /// Returns whether it was current.
    @discardableResult
    public func rejected(_ credential: Credential, backend: String, account: String, scope: String? = nil) -> Bool {
        let key = CredentialKey(backend: backend, account: account, scope: scope)
        let worked = cache.hasWorked(credential, for: key)
        rejections.withLock { $0[key] = (credential.fingerprint, worked) }
        return cache.invalidate(key, rejected: credential)
    }

    /// Tells this worker's cache that a back end took `credential` (a 2xx answer), so that its
    /// rejection later is a session that ended, not a token that never worked.
    public func accepted(_ credential: Credential, backend: String, account: String, scope: String? = nil) {
        cache.accepted(credential, for: CredentialKey(backend: backend, account: account, scope: scope))
    }

    /// A credential provider in the shape `SwitchboardHTTP.AuthenticatedExecutor` and the
    /// back-end clients take: `forceRefresh` with the rejected credential asks for a new one.
    public func provider(backend: String, account: String, scope: String? = nil) -> @Sendable (Bool, Credential?) async throws -> Credential
    {
        { [self] forceRefresh, rejected in
            if forceRefresh, let rejected {
                self.rejected(rejected, backend: backend, account: account, scope: scope)
            }
            return try await self.credential(backend: backend, account: account, scope: scope)
        }
    }
}
