// One client serves every back end, and the back ends disagree about what a failure looks
// like. A profile gathers what differs per API, so the client's retry and re-authentication
// logic stays the same for all of them.

import Foundation

/// What the HTTP layer must know about one back-end API.
public struct APIProfile: Sendable {
    /// The API's name in logs and errors, e.g. `"filemaker"`.
    public var name: String
    /// When a response means the credential was rejected (and one re-authentication is due).
    public var expiry: ExpiryDetector
    /// Whether a response is a logical failure that must never be retried, even with a status
    /// the retry policy would retry.
    public var isLogicalFailure: @Sendable (HTTPResponse) -> Bool
    /// Reads the vendor's error code and message from a response.
    public var vendorError: @Sendable (HTTPResponse) -> VendorError?

    public init(
        name: String, expiry: ExpiryDetector = .unauthorized, isLogicalFailure: @escaping @Sendable (HTTPResponse) -> Bool = { _ in false },
        vendorError: @escaping @Sendable (HTTPResponse) -> VendorError? = { VendorError.parse($0.body) }
    ) {
        self.name = name
        self.expiry = expiry
        self.isLogicalFailure = isLogicalFailure
        self.vendorError = vendorError
    }

    /// An API with the generic rules: 401 means the credential was rejected.
    public static func generic(_ name: String) -> APIProfile { APIProfile(name: name) }

    /// Claris FileMaker Data API: expiry is HTTP 401 or code `"952"`; any response whose body
    /// carries a FileMaker code other than `"0"` (a 500 with code 401 "no records match", 306,
    /// 101…) is a logical error and never retried.
    public static let fileMaker = APIProfile(
        name: "filemaker", expiry: .fileMaker,
        isLogicalFailure: { response in
            guard !response.isSuccess, let error = VendorError.parse(response.body) else { return false }
            return error.code != nil
        })

    /// ETO: expiry is HTTP 401/403 or an HTML page where JSON was expected; errors are WCF faults.
    public static let eto = APIProfile(name: "eto", expiry: .eto)

    /// The Directory service: expiry is HTTP 401; errors are Spring Boot bodies.
    public static let directory = APIProfile(name: "directory", expiry: .unauthorized)

    /// SAP Mobile Services: expiry is HTTP 401 unless the request says otherwise. The SAP client
    /// sets a detector on every call that carries a connection id, because there a 401 is the
    /// user's password (never cured by registering again); its service-root call sets
    /// ``ExpiryDetector/sapConnectionCheck``.
    public static let sapMobileServices = APIProfile(name: "sap", expiry: .unauthorized)
}

/// Decides from a response whether the credential a request carried was rejected.
///
/// A detector must only look at the response (and the request it answers); it must not
/// perform I/O. ``AuthenticatedExecutor`` asks it after every response.
public struct ExpiryDetector: Sendable {
    public var isExpired: @Sendable (HTTPRequest, HTTPResponse) -> Bool
    /// For a response ``isExpired`` accepted: whether it proves the server refused the request
    /// before acting on it (a 401 from the authentication layer). Only then is a request that is
    /// not idempotent sent again after re-authentication; otherwise the caller gets
    /// ``HTTPError/Code/notResent`` and must look before writing again.
    public var provesNotActedOn: @Sendable (HTTPRequest, HTTPResponse) -> Bool

    public init(
        _ isExpired: @escaping @Sendable (HTTPRequest, HTTPResponse) -> Bool,
        provesNotActedOn: @escaping @Sendable (HTTPRequest, HTTPResponse) -> Bool = { _, _ in true }
    ) {
        self.isExpired = isExpired
        self.provesNotActedOn = provesNotActedOn
    }

    /// HTTP 401.
    public static let unauthorized = ExpiryDetector { _, response in response.status == 401 }

    /// FileMaker: HTTP 401 (code 952 invalid token, code 10 header missing) or code `"952"`
    /// whatever the status.
    public static let fileMaker = ExpiryDetector { _, response in
        // The byte search first: this runs on every answer, and only an answer that holds
        // "952" somewhere is worth a JSON parse.
        response.status == 401
            || (response.body.range(of: Data("952".utf8)) != nil && VendorError.parse(response.body)?.code == "952")
    }

    /// ETO: HTTP 401 or 403 (a WCF fault from the authentication layer: the call was not run),
    /// or the web log-in form served where JSON was expected (a 2xx or 3xx HTML page). An HTML
    /// page with a 4xx or 5xx status is a server error page, not an expiry. After the log-in
    /// form, whether a write went through is unknown: it is not sent again blind.
    public static let eto = ExpiryDetector(
        { _, response in
            response.status == 401 || response.status == 403 || (response.status < 400 && !response.body.isEmpty && response.looksLikeHTML)
        },
        provesNotActedOn: { _, response in response.status == 401 || response.status == 403 })

    /// SAP Mobile Services' connection check (`GET {base}/{appId}` or
    /// `GET …/Connections('{id}')`): 404 means the application connection is no longer valid
    /// and a new registration is due. A 401 is not expiry: it refuses the user's credentials,
    /// which a new registration with the same password would not change.
    public static let sapConnectionCheck = ExpiryDetector { _, response in response.status == 404 }

    /// Never: for calls with no credential.
    public static let never = ExpiryDetector { _, _ in false }
}
