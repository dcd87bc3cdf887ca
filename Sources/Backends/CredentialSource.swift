// The two layers of every back-end client meet here. A data call needs a credential (a
// FileMaker token, an ETO site session, a Directory key, an SAP connection id). The token
// manager and the tests hand one over as is (`.fixed`); workers hand over a provider backed by
// the credential cache (`.provider`), so that a credential the back end rejects is refreshed
// once and the call sent once more, through `AuthenticatedExecutor`, with the back end's own
// idea of "rejected".

import Logging
public import SwitchboardHTTP

/// Returns the current credential, or a fresh one when `forceRefresh` is true. `rejected` is
/// the credential the back end just refused, so that a cache shared by concurrent callers can
/// tell "refresh this one" from "someone already replaced it". See ``AuthenticatedExecutor``.
public typealias CredentialProvider<Credential: Sendable> = AuthenticatedExecutor<Credential>.Provider

/// Where a data call gets its credential.
public enum CredentialSource<Credential: Sendable>: Sendable {
    /// Use this credential. When the back end rejects it, the call throws ``HTTPError`` with
    /// code ``HTTPError/Code/credentialRejected`` and nothing is retried: the caller owns the
    /// credential's life.
    case fixed(Credential)
    /// Ask the provider (`forceRefresh: false`); when the back end rejects the credential, ask
    /// once more (`forceRefresh: true, rejected: <it>`) and send the call once more. A second
    /// rejection throws ``HTTPError/Code/credentialRejected``; there is never a third attempt.
    /// `accepted` is told of each credential a 2xx response showed the back end took
    /// (``AuthenticatedExecutor``).
    case provider(CredentialProvider<Credential>, accepted: (@Sendable (Credential) -> Void)? = nil)
}

/// What every client shares: the process's HTTP client and the logger its calls log through.
struct BackendTransport: Sendable {
    let http: SwitchboardHTTPClient
    let logger: Logger

    /// Sends a request that carries no credential of a ``CredentialSource`` (a log-in, a
    /// log-out, product info).
    func send(_ request: HTTPRequest) async throws(HTTPError) -> HTTPResponse {
        try await http.response(for: request, logger: logger)
    }

    /// Sends a request with the credential from `source`, put on by `authorizer`. Returns the
    /// response whatever its status, except a rejected credential, which throws.
    func send<Credential: Sendable>(
        _ request: HTTPRequest, _ source: CredentialSource<Credential>,
        authorizer: @escaping @Sendable (Credential) -> any HTTPAuthorizer
    ) async throws(HTTPError) -> HTTPResponse {
        switch source {
        case .fixed(let credential):
            var authorized = request
            authorized.authorizer = authorizer(credential)
            let response = try await http.response(for: authorized, logger: logger)
            let detector = request.expiry ?? request.api.expiry
            guard !detector.isExpired(authorized, response) else {
                var error = HTTPError(response: response)
                error.code = .credentialRejected
                error.message = "credential rejected (HTTP \(response.status)); no provider was given to refresh it"
                throw error
            }
            return response
        case .provider(let provider, let accepted):
            let executor = AuthenticatedExecutor(client: http, provider: provider, authorizer: authorizer, accepted: accepted)
            return try await executor.response(for: request, logger: logger)
        }
    }
}

extension HTTPError {
    /// Whether a log-in refused the account's own credentials; see ``HTTPError/Code/invalidCredentials``.
    public var isInvalidCredentials: Bool { code == .invalidCredentials }

    /// The error for a log-in the back end refused. The body is dropped (ETO's echoes the
    /// password); the message names the back end and the account, never the password.
    static func loginRefused(_ response: HTTPResponse, account: String, detail: String) -> HTTPError {
        var error = HTTPError(response: response)
        error.code = .invalidCredentials
        error.bodyExcerpt = nil
        error.message = "\(response.context.api.name) refused the log-in of account \(account): \(detail); not retried"
        return error
    }

    /// An error for a request that cannot be sent as asked (before anything is sent).
    static func invalid(_ request: HTTPRequest, _ message: String) -> HTTPError {
        HTTPError(
            .invalidRequest,
            context: .init(
                api: request.api, operation: request.operation, method: request.method.rawValue, redactedURL: request.redactedURL),
            message: message)
    }

    /// The error for a 2xx response whose content is unusable.
    static func unusable(_ response: HTTPResponse, _ message: String) -> HTTPError {
        HTTPError(.decoding, context: response.context, status: response.status, attempts: response.attempts, message: message)
    }
}

/// What a credential's `description` shows instead of its secret.
let redactedText = Redactor.placeholder
