// Re-authentication, once. Every back end lets a credential die (FileMaker after 15 idle
// minutes, ETO when someone logs into the web application, SAP when a connection is deleted),
// and every good client answers the same way: fetch a fresh credential, send the call again,
// and if that fails too, report it instead of trying forever.

public import Foundation
public import Logging

/// Sends requests with a credential from a provider, re-authenticating once when the API says
/// the credential was rejected.
///
/// For each request:
/// 1. asks the provider for a credential (`forceRefresh: false, rejected: nil`), applies it
///    with `authorizer` and sends the request through the client (with its retry policy);
/// 2. if the request's ``ExpiryDetector`` (``HTTPRequest/expiry``, else the API's) says the
///    credential was rejected, asks the provider **once** for a fresh one
///    (`forceRefresh: true, rejected: <the rejected credential>`) and sends the request once
///    more — unless the request is not idempotent and the rejection does not prove the server
///    left it alone (``ExpiryDetector/provesNotActedOn``): then it throws
///    ``HTTPError/Code/notResent`` and the caller looks before it writes again;
/// 3. if that response is judged expired too, throws ``HTTPError/Code/credentialRejected``.
///    There is no third attempt and no loop.
///
/// The provider owns the credential's life: it logs in, caches, and makes concurrent callers
/// that all saw the same rejected credential share one refresh (passing `rejected` lets it
/// tell "refresh this one" from "someone already refreshed it"). A provider that throws
/// ``HTTPError`` (a failed log-in call) has that error passed on unchanged; any other error
/// becomes ``HTTPError/Code/credentialUnavailable``.
public struct AuthenticatedExecutor<Credential: Sendable>: Sendable {
    public typealias Provider = @Sendable (_ forceRefresh: Bool, _ rejected: Credential?) async throws -> Credential

    public let client: SwitchboardHTTPClient
    private let provider: Provider
    private let authorizer: @Sendable (Credential) -> any HTTPAuthorizer
    /// Told of each credential a 2xx response showed the back end took (so a cache can tell a
    /// session that ended from a token that never worked; `RefreshLimit.afterUse`).
    private let accepted: (@Sendable (Credential) -> Void)?

    /// - Parameters:
    ///   - client: the process's HTTP client.
    ///   - provider: returns the current credential, or a fresh one when `forceRefresh`.
    ///   - authorizer: how a credential goes onto a request (e.g. `{ BearerAuthorizer(token: $0) }`).
    ///   - accepted: called with the credential of every 2xx response.
    public init(
        client: SwitchboardHTTPClient, provider: @escaping Provider, authorizer: @escaping @Sendable (Credential) -> any HTTPAuthorizer,
        accepted: (@Sendable (Credential) -> Void)? = nil
    ) {
        self.client = client
        self.provider = provider
        self.authorizer = authorizer
        self.accepted = accepted
    }

    /// Sends the request, re-authenticating once if needed, and returns the response whatever
    /// its status (except a rejected credential, which throws).
    public func response(for request: HTTPRequest, logger: Logger? = nil) async throws(HTTPError) -> HTTPResponse {
        let detector = request.expiry ?? request.api.expiry
        let first = try await credential(forceRefresh: false, rejected: nil, for: request)
        var authorized = request
        authorized.authorizer = authorizer(first)
        let response = try await client.response(for: authorized, logger: logger)
        guard detector.isExpired(authorized, response) else {
            if (200..<300).contains(response.status) { accepted?(first) }
            return response
        }

        (logger ?? client.logger).info(
            "credential rejected; re-authenticating once",
            metadata: [
                "http.api": "\(request.api.name)", "http.operation": "\(request.operation)", "http.status": "\(response.status)",
            ])
        let fresh = try await credential(forceRefresh: true, rejected: first, for: request)
        guard request.idempotent || detector.provesNotActedOn(authorized, response) else {
            // The fresh credential is in the provider's cache for the caller's next call; this
            // one is not repeated, because the server may have acted on it already.
            var error = HTTPError(response: response)
            error.code = .notResent
            error.message =
                "credential rejected (HTTP \(response.status)) in a way that does not show whether the server acted; re-authenticated, not sent again: look before writing again"
            throw error
        }
        authorized.authorizer = authorizer(fresh)
        var retried = try await client.response(for: authorized, logger: logger)
        retried.attempts += response.attempts
        guard detector.isExpired(authorized, retried) else {
            if (200..<300).contains(retried.status) { accepted?(fresh) }
            return retried
        }

        var error = HTTPError(response: retried)
        error.code = .credentialRejected
        error.message = "credential rejected again after re-authentication (HTTP \(retried.status))"
        throw error
    }

    /// Sends the request as ``response(for:logger:)`` does and returns its 2xx response.
    public func execute(_ request: HTTPRequest, logger: Logger? = nil) async throws(HTTPError) -> HTTPResponse {
        let response = try await response(for: request, logger: logger)
        try response.requireSuccess()
        return response
    }

    /// Sends the request as ``response(for:logger:)`` does and decodes its 2xx JSON body.
    public func execute<T: Decodable>(
        _ request: HTTPRequest, as type: T.Type, decoder: JSONDecoder = JSONDecoder(), logger: Logger? = nil
    ) async throws(HTTPError) -> T {
        try await execute(request, logger: logger).decode(T.self, decoder: decoder)
    }

    private func credential(forceRefresh: Bool, rejected: Credential?, for request: HTTPRequest) async throws(HTTPError) -> Credential {
        do {
            return try await provider(forceRefresh, rejected)
        } catch let error as HTTPError {
            throw error
        } catch is CancellationError {
            throw HTTPError(.cancelled, context: .init(request, redactor: Redactor(secrets: request.allSecrets)), message: "cancelled")
        } catch let error as any SecretFreeError {
            var failure = HTTPError(
                .credentialUnavailable, context: .init(request, redactor: Redactor(secrets: request.allSecrets)),
                message: "credential provider failed: \(error.secretFreeDescription)")
            failure.retryAfter = (error as? any RetryAfterError)?.retryAfter
            throw failure
        } catch {
            // Only the error's type: its text may hold the very credential that failed.
            throw HTTPError(
                .credentialUnavailable, context: .init(request, redactor: Redactor(secrets: request.allSecrets)),
                message: "credential provider failed: \(type(of: error))")
        }
    }
}

/// A credential provider's failure that knows when asking again can succeed (a refresh limit
/// that frees up at a known time). The executor copies it to ``HTTPError/retryAfter``.
public protocol RetryAfterError: Error {
    var retryAfter: Date? { get }
}

/// An error whose description is written to hold no secret (it names back ends and accounts,
/// never passwords or tokens), so a credential provider's failure can be reported in full.
public protocol SecretFreeError: Error {
    var secretFreeDescription: String { get }
}
