// The SAP Mobile Services client follows scpms.md: register an application connection with
// Basic credentials, then send its id (`X-SMP-APPCID`) on every request. The server
// authenticates the user on every call, not only at registration, so check, service-root and
// delete calls carry the user's credentials too (at once, or in answer to the server's Basic
// challenge). A 401 anywhere is a wrong password and is reported as invalid credentials, never
// retried and never a reason to register again; a 404 from the check means the connection is
// gone and the caller registers again. Errors come as OData bodies, which this client's profile
// reads.

import Foundation
public import Logging
public import SwitchboardHTTP

/// Types of SAP Mobile Services; the client is ``SAPMobileServicesClient``.
public enum SAP {
    /// An application connection id: the credential of every request after registration.
    public struct ConnectionID: Codable, Sendable, Hashable, CustomStringConvertible {
        public var value: String
        public init(_ value: String) { self.value = value }

        public init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(String.self) }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(value)
        }

        public var description: String { "SAP.ConnectionID(\(redactedText))" }
    }

    /// A registered application connection.
    public struct Connection: Codable, Sendable, Hashable {
        public var id: ConnectionID
        public var userName: String?
        public var deviceType: String?
        public var deviceModel: String?
        public var applicationVersion: String?
        public var createdAt: WCFDate?

        enum CodingKeys: String, CodingKey {
            case id = "ApplicationConnectionId"
            case userName = "UserName"
            case deviceType = "DeviceType"
            case deviceModel = "DeviceModel"
            case applicationVersion = "ApplicationVersion"
            case createdAt = "CreatedAt"
        }
    }

    /// What a registration says about the device (all optional).
    public struct Device: Encodable, Sendable, Hashable {
        public var deviceType: String?
        public var deviceModel: String?
        public var userName: String?

        public init(deviceType: String? = nil, deviceModel: String? = nil, userName: String? = nil) {
            self.deviceType = deviceType
            self.deviceModel = deviceModel
            self.userName = userName
        }

        enum CodingKeys: String, CodingKey {
            case deviceType = "DeviceType"
            case deviceModel = "DeviceModel"
            case userName = "UserName"
        }
    }

    /// A user's credentials for calls that carry a connection id: SAP authenticates the user on
    /// every call; the connection id only says which device registration the call belongs to.
    public struct UserCredentials: Sendable, CustomStringConvertible {
        public var user: String
        public var password: String
        /// ``BasicAuthorizer/Mode/preemptive`` (the default) sends them on the first attempt;
        /// ``BasicAuthorizer/Mode/onChallenge`` only in answer to the server's `401` with
        /// `WWW-Authenticate: Basic`, once.
        public var mode: BasicAuthorizer.Mode

        public init(user: String, password: String, mode: BasicAuthorizer.Mode = .preemptive) {
            self.user = user
            self.password = password
            self.mode = mode
        }

        public var description: String { "SAP.UserCredentials(\(user), \(redactedText))" }
    }

    /// The answer of a connection check.
    public enum ConnectionStatus: Sendable, Hashable {
        case valid
        /// HTTP 404: "the application connection is no longer valid"; register again.
        case gone
    }

    /// Reads OData's `{"error":{"code":"…","message":{"lang":"…","value":"…"}}}`, then the
    /// generic shapes.
    static func vendorError(_ response: HTTPResponse) -> VendorError? {
        if let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
            let error = object["error"] as? [String: Any]
        {
            let message = (error["message"] as? [String: Any])?["value"] as? String ?? error["message"] as? String
            return VendorError(code: error["code"] as? String, message: message)
        }
        return VendorError.parse(response.body)
    }

    static let profile: APIProfile = {
        var profile = APIProfile.sapMobileServices
        profile.vendorError = { vendorError($0) }
        return profile
    }()
}

/// A client of one application on SAP Mobile Services.
public struct SAPMobileServicesClient: Sendable {
    public let baseURL: String
    public let applicationID: String
    /// `v1` or `latest` in the registration path.
    public let apiVersion: String
    /// Sent with every call that carries a connection id; `nil` for an anonymous application.
    public let credentials: SAP.UserCredentials?
    private let transport: BackendTransport

    /// - Parameters:
    ///   - baseURL: the service's root, e.g. `https://mobile.example.hana.ondemand.com`.
    ///   - applicationID: e.g. `org.riverside.outreach`.
    ///   - credentials: the user's, for check, service-root and delete calls (registration takes
    ///     its own); `nil` only for an application configured for anonymous access.
    public init(
        http: SwitchboardHTTPClient, baseURL: String, applicationID: String, apiVersion: String = "v1",
        credentials: SAP.UserCredentials? = nil, logger: Logger
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.applicationID = applicationID
        self.apiVersion = apiVersion
        self.credentials = credentials
        self.transport = BackendTransport(http: http, logger: logger)
    }

    private var connections: [HTTPRequest.PathSegment] { ["odata", "applications", .plain(apiVersion), .plain(applicationID)] }

    private func make(
        _ method: HTTPRequest.Method, _ path: [HTTPRequest.PathSegment], _ operation: String, body: HTTPRequest.Body = .none,
        secrets: [String] = []
    ) -> HTTPRequest {
        HTTPRequest(
            method, baseURL, path: path, headers: ["Accept": "application/json"], body: body, api: SAP.profile, operation: operation,
            secrets: secrets)
    }

    /// Sends a call that carries a connection id, with the user's credentials. The request's
    /// expiry detector decides what counts as a dead connection; a 401 never does: it is the
    /// user's password, reported as ``HTTPError/Code/invalidCredentials`` after at most one
    /// answered challenge.
    private func send(_ request: HTTPRequest, _ source: CredentialSource<SAP.ConnectionID>) async throws(HTTPError) -> HTTPResponse {
        let credentials = credentials
        let response = try await transport.send(request, source) { id in
            ConnectionAuthorizer(
                connection: .sapMobileServices(applicationConnectionID: id.value),
                user: credentials.map { BasicAuthorizer(username: $0.user, password: $0.password, mode: $0.mode) })
        }
        guard response.status == 401 else { return response }
        guard let credentials else {
            throw .loginRefused(
                response, account: "(none)",
                detail: "\(applicationID) asks for user credentials on \(request.operation) and this client has none (HTTP 401)")
        }
        throw .loginRefused(
            response, account: credentials.user, detail: "wrong user name or password on \(request.operation) (HTTP 401)")
    }

    /// `POST …/Connections` with Basic credentials (sent at once). Not retried.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` naming the user
    ///   on 401; with status 403 when the user may not register.
    public func register(user: String, password: String, device: SAP.Device = SAP.Device()) async throws(HTTPError) -> SAP.Connection {
        struct Answer: Decodable { var d: SAP.Connection }
        let body: HTTPRequest.Body
        do { body = try .json(device) } catch {
            throw .invalid(make(.post, connections + ["Connections"], "connections.register"), "cannot encode the device")
        }
        var request = make(.post, connections + ["Connections"], "connections.register", body: body)
        request.authorizer = BasicAuthorizer(username: user, password: password)
        let response = try await transport.send(request)
        if response.status == 401 { throw .loginRefused(response, account: user, detail: "wrong user name or password (HTTP 401)") }
        if response.status == 403 {
            var error = HTTPError(response: response)
            error.message = "sap refused to register a connection for user \(user) (HTTP 403)"
            throw error
        }
        try response.requireSuccess()
        var connection = try response.decode(Answer.self).d
        if connection.id.value.isEmpty, let cookie = Self.cookieConnectionID(response) { connection.id = SAP.ConnectionID(cookie) }
        guard !connection.id.value.isEmpty else { throw .unusable(response, "the registration answered without a connection id") }
        transport.logger.info("sap connection registered", metadata: ["sap.user": "\(user)", "sap.application": "\(applicationID)"])
        return connection
    }

    static func cookieConnectionID(_ response: HTTPResponse) -> String? {
        for cookie in response.headers.values("Set-Cookie") {
            let pair = cookie.split(separator: ";").first.map(String.init) ?? ""
            if pair.hasPrefix("X-SMP-APPCID=") { return String(pair.dropFirst("X-SMP-APPCID=".count)) }
        }
        return nil
    }

    private func connectionPath(_ id: SAP.ConnectionID) -> [HTTPRequest.PathSegment] {
        connections + [.secret("Connections('\(id.value)')")]
    }

    /// `GET {base}/{appId}` with the id, as SAP's tutorial checks a connection: `.valid` on
    /// 200, `.gone` on 404 (register again).
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` on 401.
    public func check(_ id: SAP.ConnectionID) async throws(HTTPError) -> SAP.ConnectionStatus {
        var request = make(.get, [.plain(applicationID)], "connections.check")
        request.expiry = .never
        return try Self.status(try await send(request, .fixed(id)))
    }

    private static func status(_ response: HTTPResponse) throws(HTTPError) -> SAP.ConnectionStatus {
        if response.status == 404 { return .gone }
        try response.requireSuccess()
        return .valid
    }

    /// `GET …/Connections('{id}')`: the connection's settings, or `nil` when it is gone (404).
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` on 401.
    public func connection(_ id: SAP.ConnectionID) async throws(HTTPError) -> SAP.Connection? {
        struct Answer: Decodable { var d: SAP.Connection }
        var request = make(.get, connectionPath(id), "connections.get")
        request.expiry = .never
        let response = try await send(request, .fixed(id))
        if response.status == 404 { return nil }
        try response.requireSuccess()
        return try response.decode(Answer.self).d
    }

    /// `DELETE …/Connections('{id}')`. Returns `false` when the connection was already gone.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` on 401.
    @discardableResult
    public func delete(_ id: SAP.ConnectionID) async throws(HTTPError) -> Bool {
        var request = make(.delete, connectionPath(id), "connections.delete")
        request.expiry = .never
        let response = try await send(request, .fixed(id))
        if response.status == 404 { return false }
        try response.requireSuccess()
        transport.logger.info("sap connection deleted", metadata: ["sap.application": "\(applicationID)"])
        return true
    }

    /// `GET {base}/{appId}`: the proxied service root, with the connection id. Through a
    /// provider, a 404 (connection gone) makes the provider register again, once. Returns the
    /// entity sets the service document lists.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` on 401 (a new
    ///   registration with the same password would not help, so none is made).
    public func serviceRoot(auth: CredentialSource<SAP.ConnectionID>) async throws(HTTPError) -> [String] {
        struct Answer: Decodable {
            struct D: Decodable { var EntitySets: [String] }
            var d: D
        }
        var request = make(.get, [.plain(applicationID)], "service.root")
        request.expiry = .sapConnectionCheck
        let response = try await send(request, auth)
        try response.requireSuccess()
        return try response.decode(Answer.self).d.EntitySets
    }
}

/// The connection id and, when the client has them, the user's Basic credentials on one
/// request; a challenge is answered by the Basic part (at most once, see ``HTTPAuthorizer``).
private struct ConnectionAuthorizer: HTTPAuthorizer {
    var connection: HeaderAuthorizer
    var user: BasicAuthorizer?

    func authorize(_ request: inout HTTPRequest) {
        connection.authorize(&request)
        user?.authorize(&request)
    }

    func answerChallenge(_ response: HTTPResponse, request: inout HTTPRequest) -> Bool {
        user?.answerChallenge(response, request: &request) ?? false
    }
}
