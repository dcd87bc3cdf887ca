public import Foundation
public import SwitchboardCredentials
public import SwitchboardHTTP

/// An auth failure, worded for operators and safe to log: it names the back end and account,
/// never a password or token.
public struct AuthError: Error, Sendable, CustomStringConvertible, SecretFreeError, RefusedCredentialsError, RetryAfterError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public static let configuration = Code(rawValue: "configuration")
        public static let unknownAccount = Code(rawValue: "unknown-account")
        public static let loginFailed = Code(rawValue: "login-failed")
        public static let backendUnavailable = Code(rawValue: "backend-unavailable")
        public static let badRequest = Code(rawValue: "bad-request")
        public static let authUnavailable = Code(rawValue: "auth-unavailable")
        public static let refreshLimit = Code(rawValue: "refresh-limit")
        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String
    /// For `refresh-limit`: when asking again can succeed (protocol 14.2: after the interval).
    public var retryAfter: Date?

    public init(_ code: Code, _ message: String, retryAfter: Date? = nil) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code): \(message)" }
    public var secretFreeDescription: String { description }
    /// The back end refused the account's credentials (`login-failed`): the credential cache's
    /// storm guard counts the next log-in as an ordinary one (`RefreshLimit`).
    public var refusedCredentials: Bool { code == .loginFailed }
}

/// The cache's refusals name the key and the limit, never a token; a refresh limit's says
/// when the next refresh is allowed, which a worker waits for before it tries the event again.
extension CredentialError: SecretFreeError, RetryAfterError {
    public var secretFreeDescription: String { description }
}
