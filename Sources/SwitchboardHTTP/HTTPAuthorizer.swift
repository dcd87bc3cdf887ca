import Foundation

/// Applies one credential to a request.
///
/// Contract:
/// - ``authorize(_:)`` is called once per request, before its first attempt, on a copy of the
///   request that the caller never sees. It adds the credential (a header, a path segment) and
///   **must** append every secret value it adds, in every form it adds it (a Basic header's
///   base64 included), to ``HTTPRequest/secrets``, so that the value is redacted from logs and
///   errors.
/// - ``answerChallenge(_:request:)`` is called at most once per request, when a response has
///   status 401; returning `true` sends the (changed) request again immediately, outside the
///   retry policy. The default returns `false`.
/// - Neither may perform I/O or block; fetching or refreshing a credential is the job of the
///   provider of an ``AuthenticatedExecutor``.
public protocol HTTPAuthorizer: Sendable {
    func authorize(_ request: inout HTTPRequest)
    func answerChallenge(_ response: HTTPResponse, request: inout HTTPRequest) -> Bool
}

extension HTTPAuthorizer {
    public func answerChallenge(_ response: HTTPResponse, request: inout HTTPRequest) -> Bool { false }
}

/// HTTP Basic authentication (FileMaker's log-in, SAP's registration).
public struct BasicAuthorizer: HTTPAuthorizer {
    public enum Mode: Sendable {
        /// Send the credentials with the first attempt.
        case preemptive
        /// Send without; answer a `401` carrying `WWW-Authenticate: Basic …` once with them (what
        /// URLSession does, and what SAP's anonymous applications need).
        case onChallenge
    }

    public var username: String
    public var password: String
    public var mode: Mode

    public init(username: String, password: String, mode: Mode = .preemptive) {
        self.username = username
        self.password = password
        self.mode = mode
    }

    var headerValue: String { "Basic " + encodedCredentials }
    var encodedCredentials: String { Data("\(username):\(password)".utf8).base64EncodedString() }

    public func authorize(_ request: inout HTTPRequest) {
        request.secrets += [password, encodedCredentials, "\(username):\(password)"]
        if mode == .preemptive { request.headers["Authorization"] = headerValue }
    }

    public func answerChallenge(_ response: HTTPResponse, request: inout HTTPRequest) -> Bool {
        guard mode == .onChallenge, request.headers["Authorization"] == nil else { return false }
        let challenges = response.headers.values("WWW-Authenticate")
        guard challenges.contains(where: { $0.lowercased().hasPrefix("basic") }) else { return false }
        request.headers["Authorization"] = headerValue
        return true
    }
}

/// `Authorization: Bearer <token>` (FileMaker's session token).
public struct BearerAuthorizer: HTTPAuthorizer {
    public var token: String
    public init(token: String) { self.token = token }

    public func authorize(_ request: inout HTTPRequest) {
        request.secrets.append(token)
        request.headers["Authorization"] = "Bearer \(token)"
    }
}

/// Headers of the API's own naming, each marked secret or not.
public struct HeaderAuthorizer: HTTPAuthorizer {
    public var headers: [(name: String, value: String, secret: Bool)]
    public init(headers: [(name: String, value: String, secret: Bool)]) { self.headers = headers }

    public func authorize(_ request: inout HTTPRequest) {
        for header in headers {
            if header.secret { request.secrets.append(header.value) }
            request.headers[header.name] = header.value
        }
    }

    /// ETO: `enterpriseGuid` (an identifier, not redacted — see ``Redactor``) and
    /// `securityToken` (secret).
    public static func eto(enterpriseGuid: String, securityToken: String) -> HeaderAuthorizer {
        HeaderAuthorizer(headers: [("enterpriseGuid", enterpriseGuid, false), ("securityToken", securityToken, true)])
    }

    /// SAP Mobile Services: `X-SMP-APPCID: <application connection id>` (secret).
    public static func sapMobileServices(applicationConnectionID: String) -> HeaderAuthorizer {
        HeaderAuthorizer(headers: [("X-SMP-APPCID", applicationConnectionID, true)])
    }
}

/// Puts a token into the request's ``HTTPRequest/PathSegment/credential`` segments (Directory's
/// `/people/{key}`, ETO's `GetSSOSites/{SSOAuthToken}/…`), as a secret segment.
public struct PathTokenAuthorizer: HTTPAuthorizer {
    public var token: String
    public init(token: String) { self.token = token }

    public func authorize(_ request: inout HTTPRequest) {
        request.secrets.append(token)
        request.path = request.path.map { $0 == .credential ? .secret(token) : $0 }
    }
}
