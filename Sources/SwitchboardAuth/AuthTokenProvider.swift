import Foundation
public import Logging
public import SwitchboardBus
public import SwitchboardCredentials
import SwitchboardProtocol

/// The worker side of the auth service: a worker's own credential cache, filled by asking
/// `auth` over the bus. A worker never logs in itself and never per request: it reuses a token
/// until it expires or the back end rejects it, then asks `auth` again, one request at a time
/// however many of its requests are waiting.
///
/// On a rejection, `provider` drops the token locally, tells `auth` (`token.invalidate`, by
/// fingerprint) so it logs in again rather than handing back the same dead token, and fetches
/// the new one: one log-in per rejection, not one per waiting request.
public final class AuthTokenProvider: Sendable {
    public let cache: CredentialCache
    private let client: ServiceClient
    private let timeout: Duration
    private let logger: Logger

    public init(client: ServiceClient, cache: CredentialCache, timeout: Duration = .seconds(30), logger: Logger) {
        self.client = client
        self.cache = cache
        self.timeout = timeout
        self.logger = logger
    }

    /// A usable credential for the account, from the cache or from `auth`.
    public func credential(backend: String, account: String) async throws -> Credential {
        try await cache.credential(for: CredentialKey(backend: backend, account: account)) { [client, timeout] key in
            let body = try JSONEncoder().encode(KeyRequest(backend: key.backend, account: key.account))
            let reply: ServiceReply
            do {
                reply = try await client.request(service: "auth", operation: "token.get", content: body, timeout: timeout, idempotent: true)
            } catch {
                throw AuthError(.authUnavailable, "the auth service did not answer for \(key): \(error)")
            }
            guard reply.status == ServiceStatus.ok else {
                let failure = reply.header.error
                throw AuthError(
                    AuthError.Code(rawValue: failure?.code ?? "auth-error"), failure?.message ?? "auth answered \(reply.status) for \(key)")
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

    /// Reports a credential the back end rejected. Returns whether it was still the current one
    /// (only then is `auth` told).
    @discardableResult
    public func rejected(_ credential: Credential, backend: String, account: String) async -> Bool {
        let key = CredentialKey(backend: backend, account: account)
        guard cache.invalidate(key, rejected: credential) else { return false }
        do {
            let body = try JSONEncoder().encode(InvalidateRequest(backend: backend, account: account, fingerprint: credential.fingerprint))
            _ = try await client.request(service: "auth", operation: "token.invalidate", content: body, timeout: timeout, idempotent: true)
        } catch {
            logger.warning("could not report a rejected credential to auth", metadata: ["key": "\(key)", "error": "\(error)"])
        }
        return true
    }

    /// A credential provider in the shape `SwitchboardHTTP.AuthenticatedExecutor` and the
    /// back-end clients take: `forceRefresh` with the rejected credential asks for a new one.
    public func provider(backend: String, account: String) -> @Sendable (Bool, Credential?) async throws -> Credential {
        { [self] forceRefresh, rejected in
            if forceRefresh, let rejected {
                await self.rejected(rejected, backend: backend, account: account)
            }
            return try await self.credential(backend: backend, account: account)
        }
    }
}
