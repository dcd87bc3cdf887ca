public import Foundation

/// The one error type of this module: what failed, on which call, with the HTTP status and the
/// vendor's code and message when there was a response.
///
/// Every string in it has been redacted: the URL, the message, the vendor message and the body
/// excerpt never contain a secret the request knew of, and its ``description`` is safe to log.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure. A struct rather than an enum so that kinds can be added later.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The connection failed: refused, reset, closed before the whole response arrived.
        public static let connectionFailed = Code("connectionFailed")
        /// Connecting, or the whole attempt, took longer than allowed.
        public static let timeout = Code("timeout")
        /// The TLS handshake failed: an untrusted or mismatched certificate, an old protocol.
        public static let tls = Code("tls")
        /// A non-2xx response without a vendor code or message.
        public static let httpStatus = Code("httpStatus")
        /// A non-2xx response whose body carries the vendor's code or message.
        public static let vendor = Code("vendor")
        /// The body could not be decoded as the expected type.
        public static let decoding = Code("decoding")
        /// The body was longer than the client's `maxResponseBytes`.
        public static let responseTooLarge = Code("responseTooLarge")
        /// The credential was rejected, a fresh one was fetched, and it was rejected too.
        public static let credentialRejected = Code("credentialRejected")
        /// A request that is not idempotent met a rejection that does not show whether the server
        /// acted on it (ETO's log-in page): a fresh credential was fetched but the request was not
        /// sent again. Look (list, find) before writing again.
        public static let notResent = Code("notResent")
        /// A log-in call refused the account's own credentials (a wrong password, an unknown
        /// account): neither retrying nor refreshing can help until someone fixes the
        /// configuration. The message names the account, never the password.
        public static let invalidCredentials = Code("invalidCredentials")
        /// The credential provider failed to produce a credential.
        public static let credentialUnavailable = Code("credentialUnavailable")
        /// The request cannot be sent as built (an unfilled credential segment, a bad URL).
        public static let invalidRequest = Code("invalidRequest")
        /// The client's configuration is unusable (an unreadable CA file).
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// The calling task was cancelled.
        public static let cancelled = Code("cancelled")
        /// The client has been shut down.
        public static let shutDown = Code("shutDown")
    }

    /// The call an error is about. Its URL is only shown redacted.
    public struct Context: Sendable {
        public var api: APIProfile
        public var operation: String
        public var method: String
        /// The URL as sent (secrets included) or, from the public initialiser, as given.
        private var url: String
        /// Knows the request's secrets, for text derived from its response.
        var redactor: Redactor

        /// The URL with its secrets replaced, worked out when asked for: every request makes a
        /// context, and only an error or a logged attempt reads it.
        public var redactedURL: String { redactor.redactURL(url) }

        public init(api: APIProfile, operation: String, method: String, redactedURL: String) {
            self.api = api
            self.operation = operation
            self.method = method
            self.url = redactedURL
            self.redactor = Redactor()
        }

        init(_ request: HTTPRequest, redactor: Redactor) {
            self.api = request.api
            self.operation = request.operation
            self.method = request.method.rawValue
            self.url = request.url
            self.redactor = redactor
        }
    }

    public var code: Code
    public var context: Context
    /// The HTTP status of the last response, if there was one.
    public var status: Int?
    /// The vendor's code (FileMaker's `messages[0].code`, Spring's `error`), if any.
    public var vendorCode: String?
    /// The vendor's message (FileMaker's `messages[0].message`, a WCF fault's `Detail`), redacted.
    public var vendorMessage: String?
    /// How many times the request was sent.
    public var attempts: Int
    /// What went wrong, redacted.
    public var message: String
    /// The start of the error body, redacted, for diagnosis.
    public var bodyExcerpt: String?
    /// For ``Code/credentialUnavailable``: when the provider said asking again can succeed
    /// (a refresh limit's next allowed refresh); nil when it did not say.
    public var retryAfter: Date?

    public var api: String { context.api.name }
    public var operation: String { context.operation }

    public init(
        _ code: Code, context: Context, status: Int? = nil, vendorCode: String? = nil, vendorMessage: String? = nil, attempts: Int = 0,
        message: String = "", bodyExcerpt: String? = nil
    ) {
        self.code = code
        self.context = context
        self.status = status
        self.vendorCode = vendorCode
        self.vendorMessage = vendorMessage
        self.attempts = attempts
        self.message = message
        self.bodyExcerpt = bodyExcerpt
    }

    /// The error a non-2xx response stands for: ``Code/vendor`` when the body carries the
    /// vendor's code or message, ``Code/httpStatus`` otherwise.
    public init(response: HTTPResponse) {
        let redactor = response.context.redactor
        let vendor = response.vendorError
        self.init(
            vendor == nil ? .httpStatus : .vendor, context: response.context, status: response.status, vendorCode: vendor?.code,
            vendorMessage: vendor?.message.map { redactor.redact(Redactor.redactJSONSecretKeys($0)) }, attempts: response.attempts,
            message: "HTTP \(response.status)",
            bodyExcerpt: response.body.isEmpty ? nil : redactor.redactBody(response.body, limit: 300))
    }

    public var description: String {
        var text = "\(context.api.name) \(context.operation) failed (\(code)): \(context.method) \(context.redactedURL)"
        if let status { text += " → HTTP \(status)" }
        if vendorCode != nil || vendorMessage != nil {
            text += "; vendor code \(vendorCode ?? "-"): \(vendorMessage ?? "-")"
        }
        if !message.isEmpty && message != "HTTP \(status ?? 0)" { text += "; \(message)" }
        text += "; attempts \(attempts)"
        return text
    }
}
