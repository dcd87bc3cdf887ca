// The Directory client follows directory.md and avoids the seed client's three hazards: the
// log-in password travels in the query string, so it is percent-encoded by the HTTP layer
// (RFC 3986, so `&`, `#`, `+`, spaces and non-ASCII survive) and registered as a secret; a log-in
// answer is a key only when the status is 200 and the body is a non-empty token (an error page
// is not a key); and a malformed people list is a decoding error, not a crash.

import Foundation
public import Logging
public import SwitchboardHTTP

/// Types of the Directory service; the client is ``DirectoryClient``.
public enum Directory {
    /// A person on a user's list.
    public struct Person: Codable, Hashable, Sendable {
        public var id: Int
        public var name: String
        public var office: String
        /// The owning user's id.
        public var user: Int?

        public init(id: Int, name: String, office: String, user: Int? = nil) {
            self.id = id
            self.name = name
            self.office = office
            self.user = user
        }
    }

    /// A user's API key: the credential of every people call. It does not expire by itself;
    /// an unknown key is HTTP 404 (or 401).
    public struct APIKey: Sendable, Hashable, CustomStringConvertible {
        public var key: String
        public var user: String

        public init(key: String, user: String) {
            self.key = key
            self.user = user
        }

        public var description: String { "Directory.APIKey(user: \(user), key: \(redactedText))" }
    }
}

/// A client of the Directory service (`…/directory`).
public struct DirectoryClient: Sendable {
    public let baseURL: String
    private let transport: BackendTransport

    /// - Parameter baseURL: the service root, e.g. `https://directory.example.org/directory`.
    public init(http: SwitchboardHTTPClient, baseURL: String, logger: Logger) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.transport = BackendTransport(http: http, logger: logger)
    }

    private func make(
        _ method: HTTPRequest.Method, _ path: [HTTPRequest.PathSegment], _ operation: String, query: [(name: String, value: String?)] = [],
        body: HTTPRequest.Body = .none, secrets: [String] = []
    ) -> HTTPRequest {
        HTTPRequest(method, baseURL, path: path, query: query, body: body, api: .directory, operation: operation, secrets: secrets)
    }

    /// A key is one line of visible characters; anything else (an HTML or JSON error page, an
    /// empty body) is not.
    static func key(from response: HTTPResponse) -> String? {
        guard let text = response.text?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty, text.count <= 512 else {
            return nil
        }
        guard !response.looksLikeHTML, !text.hasPrefix("{"), !text.hasPrefix("["), !text.hasPrefix("\"") else { return nil }
        guard text.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F }) else { return nil }
        return text
    }

    private func requireKey(_ response: HTTPResponse, user: String, call: String) throws(HTTPError) -> Directory.APIKey {
        try response.requireSuccess()
        guard let key = Self.key(from: response) else {
            throw .unusable(response, "\(call) for user \(user) answered HTTP \(response.status) without a usable key")
        }
        return Directory.APIKey(key: key, user: user)
    }

    /// `POST /users`: creates a user; returns its key.
    ///
    /// - Throws: ``HTTPError`` with status 409 when the name is taken.
    public func createUser(name: String, password: String) async throws(HTTPError) -> Directory.APIKey {
        let body: HTTPRequest.Body
        do { body = try .json(["name": name, "password": password]) } catch {
            throw .invalid(make(.post, ["users"], "users.create"), "cannot encode the user")
        }
        let response = try await transport.send(make(.post, ["users"], "users.create", body: body, secrets: [password]))
        let key = try requireKey(response, user: name, call: "creating the user")
        transport.logger.info("directory user created", metadata: ["directory.user": "\(name)"])
        return key
    }

    /// `GET /users?user=&password=`: logs in; returns the user's key.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` naming the user
    ///   on HTTP 401 (never retried); ``HTTPError/Code/decoding`` when a 200 carries no key.
    public func logIn(user: String, password: String) async throws(HTTPError) -> Directory.APIKey {
        let request = make(.get, ["users"], "users.logIn", query: [("user", user), ("password", password)], secrets: [password])
        let response = try await transport.send(request)
        if response.status == 401 { throw .loginRefused(response, account: user, detail: "wrong user name or password (HTTP 401)") }
        return try requireKey(response, user: user, call: "the log-in")
    }

    /// A 401, or a 404 that says the key is unknown, means the key was rejected. A 404 on
    /// a person id does not (`DELETE /people/{key}/{id}` can answer either).
    static let keyRejected = ExpiryDetector { _, response in
        if response.status == 401 { return true }
        guard response.status == 404 else { return false }
        let message = (response.vendorError?.message ?? "").lowercased()
        return message.contains("key") || message.isEmpty
    }

    private func send<T: Decodable>(
        _ request: HTTPRequest, _ auth: CredentialSource<Directory.APIKey>, as type: T.Type
    ) async throws(HTTPError) -> T {
        var request = request
        request.expiry = Self.keyRejected
        let response = try await transport.send(request, auth) { PathTokenAuthorizer(token: $0.key) }
        try response.requireSuccess()
        return try response.decode(T.self)
    }

    /// `GET /people/{key}`.
    public func people(auth: CredentialSource<Directory.APIKey>) async throws(HTTPError) -> [Directory.Person] {
        try await send(make(.get, ["people", .credential], "people.list"), auth, as: [Directory.Person].self)
    }

    /// `POST /people/{key}`: adds a person; returns it as stored.
    public func addPerson(
        name: String, office: String, auth: CredentialSource<Directory.APIKey>
    ) async throws(HTTPError) -> Directory.Person {
        let body: HTTPRequest.Body
        do { body = try .json(["name": name, "office": office]) } catch {
            throw .invalid(make(.post, ["people", .credential], "people.add"), "cannot encode the person")
        }
        return try await send(make(.post, ["people", .credential], "people.add", body: body), auth, as: Directory.Person.self)
    }

    /// `DELETE /people/{key}/{id}`.
    public func deletePerson(id: Int, auth: CredentialSource<Directory.APIKey>) async throws(HTTPError) {
        var request = make(.delete, ["people", .credential, .plain(String(id))], "people.delete")
        request.expiry = Self.keyRejected
        let response = try await transport.send(request, auth) { PathTokenAuthorizer(token: $0.key) }
        try response.requireSuccess()
    }
}
