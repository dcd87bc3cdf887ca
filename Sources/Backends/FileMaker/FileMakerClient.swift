// The FileMaker client follows filemaker.md. Two things are easy to get wrong and are handled
// here once: success is HTTP 200 *and* `messages[0].code == "0"`, and code 401 ("No records
// match") is an empty found set, not an error. A 500 that carries a code is a logical error and
// is never retried (the `.fileMaker` profile says so); 502/503/504 and connection failures are
// retried for calls that are safe to repeat.

public import Foundation
public import Logging
public import SwitchboardHTTP
import SwitchboardProtocol

/// A client of one database on a FileMaker Server's Data API.
///
/// Log-in calls: ``logIn(account:password:)``, ``logOut(_:)``, ``validateSession(_:)``. Data
/// calls take a ``CredentialSource`` of ``FileMaker/Session``; a rejected token is HTTP 401 or
/// code 952, and through a provider it is refreshed once.
public struct FileMakerClient: Sendable {
    /// The API version in the path; servers accept all three.
    public enum Version: String, Sendable {
        case v1, v2, vLatest
    }

    public let serverURL: String
    public let database: String
    public let version: Version
    private let transport: BackendTransport

    /// - Parameters:
    ///   - serverURL: the server's root, e.g. `https://fm.example.org` (the client adds `/fmi/data/…`).
    ///   - database: the hosted file, e.g. `Shelter`.
    public init(http: SwitchboardHTTPClient, serverURL: String, database: String, version: Version = .vLatest, logger: Logger) {
        self.serverURL = serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL
        self.database = database
        self.version = version
        self.transport = BackendTransport(http: http, logger: logger)
    }

    private var apiRoot: [HTTPRequest.PathSegment] { ["fmi", "data", .plain(version.rawValue)] }
    private var databaseRoot: [HTTPRequest.PathSegment] { apiRoot + ["databases", .plain(database)] }
    private func layoutRoot(_ layout: String) -> [HTTPRequest.PathSegment] { databaseRoot + ["layouts", .plain(layout)] }

    private func make(
        _ method: HTTPRequest.Method, _ path: [HTTPRequest.PathSegment], _ operation: String, query: [(name: String, value: String?)] = [],
        body: HTTPRequest.Body = .none, idempotent: Bool? = nil, secrets: [String] = []
    ) -> HTTPRequest {
        HTTPRequest(
            method, serverURL, path: path, query: query, headers: ["Accept": "application/json"], body: body, api: .fileMaker,
            operation: operation, idempotent: idempotent, secrets: secrets)
    }

    private static func json(_ value: some Encodable, for request: @autoclosure () -> HTTPRequest) throws(HTTPError) -> HTTPRequest.Body {
        do { return try .json(value) } catch { throw .invalid(request(), "cannot encode the body: \(type(of: error))") }
    }

    private struct Envelope<Response: Decodable>: Decodable {
        var response: Response
        var messages: [Message]?
    }
    /// A FileMaker message's code: a string on the wire (`"0"`), taken as a number too.
    private struct Message: Decodable {
        var code: String?
        enum CodingKeys: String, CodingKey { case code }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let text = try? container.decodeIfPresent(String.self, forKey: .code) {
                code = text
            } else {
                code = (try? container.decodeIfPresent(Int.self, forKey: .code)).flatMap { $0.map(String.init) }
            }
        }
    }
    private struct Nothing: Codable {}

    /// The `response` of a 2xx answer whose first message has code "0". The body is parsed
    /// once: a body that is not an envelope, or whose first code is not "0", is read again
    /// only to report the error.
    private static func unwrap<Response: Decodable>(_ response: HTTPResponse, as type: Response.Type) throws(HTTPError) -> Response {
        try response.requireSuccess()
        let envelope: Envelope<Response>
        do {
            envelope = try response.decode(Envelope<Response>.self)
        } catch {
            if response.vendorError != nil { throw HTTPError(response: response) }
            throw error
        }
        if let first = envelope.messages?.first, first.code != "0" { throw HTTPError(response: response) }
        return envelope.response
    }

    /// - Parameter plain: reads the common answer without a JSONDecoder, if it can; nil leaves
    ///   the answer to `unwrap`.
    private func send<Response: Decodable>(
        _ request: HTTPRequest, _ auth: CredentialSource<FileMaker.Session>, as type: Response.Type,
        plain: (HTTPResponse) -> Response? = { _ in nil }
    ) async throws(HTTPError) -> Response {
        let response = try await transport.send(request, auth) { BearerAuthorizer(token: $0.token) }
        if let read = plain(response) { return read }
        return try Self.unwrap(response, as: Response.self)
    }

    // MARK: Sessions

    /// `POST …/sessions` with Basic credentials: a new session token. Never retried (each
    /// attempt would take one of the server's session slots).
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` naming the
    ///   account on 212 (or any 401); other ``HTTPError``s (812: the server's session limit).
    public func logIn(account: String, password: String) async throws(HTTPError) -> FileMaker.Session {
        var request = make(.post, databaseRoot + ["sessions"], "sessions.logIn", body: .json(Data("{}".utf8)))
        request.authorizer = BasicAuthorizer(username: account, password: password)
        let response = try await transport.send(request)
        if response.status == 401 || response.vendorError?.code == "212" {
            throw .loginRefused(
                response, account: account,
                detail: "code \(response.vendorError?.code ?? "-") (\(response.vendorError?.message ?? "HTTP 401")) on database \(database)"
            )
        }
        struct Token: Decodable { var token: String? }
        let body = try Self.unwrap(response, as: Token.self)
        guard let token = response.headers["X-FM-Data-Access-Token"] ?? body.token, !token.isEmpty else {
            throw .unusable(response, "the log-in of account \(account) answered without a token")
        }
        transport.logger.debug(
            "filemaker session opened", metadata: ["filemaker.account": "\(account)", "filemaker.database": "\(database)"])
        return FileMaker.Session(token: token, account: account, database: database)
    }

    /// `DELETE …/sessions/{token}` without an Authorization header, freeing the server's
    /// session slot. A token the server no longer knows (952) counts as logged out.
    public func logOut(_ session: FileMaker.Session) async throws(HTTPError) {
        let request = make(.delete, databaseRoot + ["sessions", .secret(session.token)], "sessions.logOut")
        let response = try await transport.send(request)
        if response.status == 401 || response.vendorError?.code == "952" { return }
        _ = try Self.unwrap(response, as: Nothing.self)
        transport.logger.debug("filemaker session closed", metadata: ["filemaker.account": "\(session.account)"])
    }

    /// `GET /fmi/data/{version}/validateSession`: whether the token is alive (it also resets
    /// its idle clock). `false` for 952 or HTTP 401.
    public func validateSession(_ session: FileMaker.Session) async throws(HTTPError) -> Bool {
        var request = make(.get, apiRoot + ["validateSession"], "sessions.validate")
        request.authorizer = BearerAuthorizer(token: session.token)
        let response = try await transport.send(request)
        if response.status == 401 || response.vendorError?.code == "952" { return false }
        _ = try Self.unwrap(response, as: Nothing.self)
        return true
    }

    // MARK: Records

    /// The query items of a read's portals: `portal` (a JSON list of names) and each portal's
    /// `_offset.<name>` and `_limit.<name>`. None for `nil` (the server shows every portal).
    private static func portalQuery(_ portals: [FileMaker.Portal]?) -> [(name: String, value: String?)] {
        guard let portals else { return [] }
        // Encoding a list of strings cannot fail.
        let names = (try? JSONEncoder().encode(portals.map(\.name))).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        var query: [(name: String, value: String?)] = [("portal", names)]
        for portal in portals {
            if let offset = portal.offset { query.append(("_offset.\(portal.name)", String(offset))) }
            if let limit = portal.limit { query.append(("_limit.\(portal.name)", String(limit))) }
        }
        return query
    }

    /// `GET …/records?_offset=&_limit=&_sort=`: a range of records (offset 1-based).
    ///
    /// - Parameter portals: the portals to return and their windows; `nil` returns every
    ///   portal of the layout with the server's default window, `[]` none.
    public func records(
        layout: String, offset: Int = 1, limit: Int = 100, sort: [FileMaker.SortField] = [], portals: [FileMaker.Portal]? = nil,
        auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> FileMaker.FoundSet {
        var query: [(name: String, value: String?)] = [("_offset", String(offset)), ("_limit", String(limit))]
        if !sort.isEmpty {
            let text: String
            do { text = String(decoding: try JSONEncoder().encode(sort), as: UTF8.self) } catch {
                throw .invalid(make(.get, layoutRoot(layout) + ["records"], "records.range"), "cannot encode the sort")
            }
            query.append(("_sort", text))
        }
        query += Self.portalQuery(portals)
        return try await send(
            make(.get, layoutRoot(layout) + ["records"], "records.range", query: query), auth, as: FileMaker.FoundSet.self)
    }

    /// `GET …/records/{recordId}`.
    ///
    /// - Parameter portals: as in ``records(layout:offset:limit:sort:portals:auth:)``.
    public func record(
        layout: String, id: String, portals: [FileMaker.Portal]? = nil, auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> FileMaker.Record {
        let request = make(.get, layoutRoot(layout) + ["records", .plain(id)], "records.get", query: Self.portalQuery(portals))
        let found = try await send(request, auth, as: FileMaker.FoundSet.self)
        guard let record = found.data.first else { throw .invalid(request, "the server answered without the record") }
        return record
    }

    /// `POST …/records`: a new record; `[:]` creates one with the fields' defaults. Not retried.
    public func create(
        layout: String, fieldData: [String: FileMaker.FieldValue], auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> FileMaker.RecordReference {
        struct Body: Encodable { var fieldData: [String: FileMaker.FieldValue] }
        let path = layoutRoot(layout) + ["records"]
        let body: HTTPRequest.Body
        if let written = Self.fieldDataBody(fieldData) {
            body = .json(written)
        } else {
            body = try Self.json(Body(fieldData: fieldData), for: make(.post, path, "records.create"))
        }
        return try await send(
            make(.post, path, "records.create", body: body), auth, as: FileMaker.RecordReference.self, plain: Self.createdReference)
    }

    /// `{"fieldData":{…}}` written without a JSONEncoder (a writer sends one with every
    /// check-in): whole numbers as integers, others as Swift prints them, as the Codable
    /// encoding does. `nil` for a number JSON cannot hold (NaN, ±infinity), which the Codable
    /// encoding then refuses with its error.
    static func fieldDataBody(_ fieldData: [String: FileMaker.FieldValue]) -> Data? {
        var writer = JSONWriter(capacity: 64 + fieldData.count * 48)
        writer.raw("{\"fieldData\":{")
        var first = true
        for (name, value) in fieldData {
            if !first { writer.raw(",") }
            first = false
            writer.string(name)
            writer.raw(":")
            switch value {
            case .text(let text):
                writer.string(text)
            case .number(let number):
                guard number.isFinite else { return nil }
                if let whole = Int64(exactly: number) { writer.integer(whole) } else { writer.value(.double(number)) }
            }
        }
        writer.raw("}}")
        return writer.data
    }

    /// A create's answer read without a JSONDecoder (a writer reads one with every check-in):
    /// a 2xx whose body is `{"response":{"recordId":…,"modId":…},"messages":[{"code":"0",…}]}`,
    /// ids as strings or integers. `nil` for anything else, which `unwrap` then reads and
    /// reports as it reads every answer.
    static func createdReference(_ response: HTTPResponse) -> FileMaker.RecordReference? {
        func id(_ value: JSONValue?) -> String? {
            switch value {
            case .string(let text)?: return text
            case .integer(let number)?: return String(number)
            default: return nil
            }
        }
        guard response.isSuccess, case .object(let root)? = JSONValue.parse(response.body), case .object(let answer)? = root["response"],
            let recordId = id(answer["recordId"]), let modId = id(answer["modId"])
        else { return nil }
        switch root["messages"] {
        case nil, .null?:
            break
        case .array(let messages)?:
            guard let first = messages.first else { break }
            guard case .object(let message) = first else { return nil }
            switch message["code"] {
            case .string("0")?, .integer(0)?: break
            default: return nil
            }
        default:
            return nil
        }
        return FileMaker.RecordReference(recordId: recordId, modId: modId)
    }

    /// `PATCH …/records/{recordId}`: changes the listed fields only; returns the new `modId`.
    /// With `modId`, a record changed since it was read is left alone and the call throws
    /// ``HTTPError`` with vendor code `"306"`.
    public func edit(
        layout: String, id: String, fieldData: [String: FileMaker.FieldValue], modId: String? = nil,
        auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> String {
        struct Body: Encodable {
            var fieldData: [String: FileMaker.FieldValue]
            var modId: String?
        }
        struct Answer: Decodable { var modId: FileMakerID }
        let path = layoutRoot(layout) + ["records", .plain(id)]
        let body = try Self.json(Body(fieldData: fieldData, modId: modId), for: make(.patch, path, "records.edit"))
        return try await send(make(.patch, path, "records.edit", body: body), auth, as: Answer.self).modId.value
    }

    /// `DELETE …/records/{recordId}`. Retried when safe; a "record is missing" (101) after a
    /// retry means an earlier attempt deleted it, and counts as success.
    public func delete(layout: String, id: String, auth: CredentialSource<FileMaker.Session>) async throws(HTTPError) {
        let request = make(.delete, layoutRoot(layout) + ["records", .plain(id)], "records.delete")
        let response = try await transport.send(request, auth) { BearerAuthorizer(token: $0.token) }
        if response.attempts > 1, response.vendorError?.code == "101" { return }
        _ = try Self.unwrap(response, as: Nothing.self)
    }

    /// `POST …/records/{recordId}` with an empty body: a copy of the record. Not retried.
    public func duplicate(
        layout: String, id: String, auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError)
        -> FileMaker.RecordReference
    {
        let request = make(
            .post, layoutRoot(layout) + ["records", .plain(id)], "records.duplicate", body: .raw(Data(), contentType: "application/json"))
        return try await send(request, auth, as: FileMaker.RecordReference.self)
    }

    /// `POST …/_find`. Requests are OR'd, criteria within one AND'd, omit requests remove their
    /// matches. No match is an **empty** found set, not an error. A find only reads, so it is
    /// retried like a GET.
    ///
    /// - Parameter portals: as in ``records(layout:offset:limit:sort:portals:auth:)``; in a find
    ///   they are body members (`portal`, `offset.<name>`, `limit.<name>`).
    public func find(
        layout: String, _ requests: [FileMaker.FindRequest], sort: [FileMaker.SortField] = [], offset: Int? = nil, limit: Int? = nil,
        portals: [FileMaker.Portal]? = nil, auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> FileMaker.FoundSet {
        struct Body: Encodable {
            var query: [FileMaker.FindRequest]
            var sort: [FileMaker.SortField]?
            var offset: String?
            var limit: String?
            var portals: [FileMaker.Portal]?

            struct Key: CodingKey {
                var stringValue: String
                var intValue: Int? { nil }
                init(_ name: String) { stringValue = name }
                init(stringValue: String) { self.stringValue = stringValue }
                init?(intValue: Int) { nil }
            }

            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Key.self)
                try c.encode(query, forKey: Key("query"))
                try c.encodeIfPresent(sort, forKey: Key("sort"))
                try c.encodeIfPresent(offset, forKey: Key("offset"))
                try c.encodeIfPresent(limit, forKey: Key("limit"))
                guard let portals else { return }
                try c.encode(portals.map(\.name), forKey: Key("portal"))
                for portal in portals {
                    try c.encodeIfPresent(portal.offset.map(String.init), forKey: Key("offset.\(portal.name)"))
                    try c.encodeIfPresent(portal.limit.map(String.init), forKey: Key("limit.\(portal.name)"))
                }
            }
        }
        let path = layoutRoot(layout) + ["_find"]
        guard !requests.isEmpty else { throw .invalid(make(.post, path, "records.find"), "a find needs at least one request") }
        let body = try Self.json(
            Body(
                query: requests, sort: sort.isEmpty ? nil : sort, offset: offset.map(String.init), limit: limit.map(String.init),
                portals: portals),
            for: make(.post, path, "records.find"))
        let request = make(.post, path, "records.find", body: body, idempotent: true)
        let response = try await transport.send(request, auth) { BearerAuthorizer(token: $0.token) }
        if response.vendorError?.code == "401" { return .empty(database: database, layout: layout) }
        return try Self.unwrap(response, as: FileMaker.FoundSet.self)
    }

    /// Creates a record unless one whose `uniqueField` equals `value` exists; returns the
    /// record's reference and whether this call created it. For idempotent writes: `value` is
    /// the bus event id.
    ///
    /// Two ways, one request each in the common case:
    /// - `uniqueValidated: false` (the default): find (`==value`), and create only if nothing was
    ///   found. Find and create are two calls, so two writers can both find nothing and both
    ///   create; the field's "unique value" validation is the backstop (the second create fails
    ///   with code 504, and this helper then finds the other writer's record). Without that
    ///   validation the race can leave duplicates.
    /// - `uniqueValidated: true`, for a field with "unique value" validation ("always", as the
    ///   emulator's `CheckIns::EventID`): create at once; a 504 means the record is there, and
    ///   one find returns it. A redelivery costs two calls, a first delivery one. Used on a
    ///   field without that validation, it writes duplicates.
    ///
    /// Nothing is read back after a create: its answer carries the record id and mod id.
    ///
    /// - Throws: ``HTTPError/Code/invalidRequest`` when `value` is empty or contains a find
    ///   operator (it must match literally).
    public func createIfAbsent(
        layout: String, uniqueField: String, value: String, fieldData: [String: FileMaker.FieldValue], uniqueValidated: Bool = false,
        auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> (reference: FileMaker.RecordReference, created: Bool) {
        guard !value.isEmpty, !value.contains(where: { FileMaker.Find.operatorCharacters.contains($0) }), !value.contains("...") else {
            throw .invalid(
                make(.post, layoutRoot(layout) + ["_find"], "records.createIfAbsent"), "the unique value is empty or holds a find operator")
        }
        if !uniqueValidated, let existing = try await findExact(layout: layout, field: uniqueField, value: value, auth: auth) {
            return (existing, false)
        }
        var data = fieldData
        data[uniqueField] = .text(value)
        do throws(HTTPError) {
            return (try await create(layout: layout, fieldData: data, auth: auth), true)
        } catch  where error.vendorCode == "504" {
            if let existing = try await findExact(layout: layout, field: uniqueField, value: value, auth: auth) {
                if !uniqueValidated {
                    transport.logger.info(
                        "filemaker record already there (unique field refused the create)",
                        metadata: ["filemaker.layout": "\(layout)", "filemaker.field": "\(uniqueField)"])
                }
                return (existing, false)
            }
            throw error
        }
    }

    private func findExact(
        layout: String, field: String, value: String, auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError)
        -> FileMaker.RecordReference?
    {
        let found = try await find(layout: layout, [.matching((field, FileMaker.Find.equals(value)))], limit: 2, auth: auth)
        return found.data.first { $0.fieldData[field]?.description == value }.map {
            FileMaker.RecordReference(recordId: $0.recordId, modId: $0.modId)
        }
    }

    // MARK: Scripts, globals, containers

    /// `GET …/layouts/{layout}/script/{name}?script.param=`. Not retried: a script may change data.
    public func runScript(
        layout: String, name: String, parameter: String? = nil, auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> FileMaker.ScriptResult {
        let request = make(
            .get, layoutRoot(layout) + ["script", .plain(name)], "scripts.run", query: parameter.map { [("script.param", $0)] } ?? [],
            idempotent: false)
        return try await send(request, auth, as: FileMaker.ScriptResult.self)
    }

    /// `PATCH …/globals`: sets global fields (`Table::Field`) for the session.
    public func setGlobals(_ values: [String: FileMaker.FieldValue], auth: CredentialSource<FileMaker.Session>) async throws(HTTPError) {
        struct Body: Encodable { var globalFields: [String: FileMaker.FieldValue] }
        let path = databaseRoot + ["globals"]
        let body = try Self.json(Body(globalFields: values), for: make(.patch, path, "globals.set"))
        _ = try await send(make(.patch, path, "globals.set", body: body, idempotent: true), auth, as: Nothing.self)
    }

    /// `POST …/records/{id}/containers/{field}/{repetition}` with a multipart part named
    /// `upload`; returns the record's new `modId`.
    public func uploadContainer(
        layout: String, id: String, field: String, repetition: Int = 1, data: Data, filename: String, contentType: String,
        auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> String {
        struct Answer: Decodable { var modId: FileMakerID }
        let request = make(
            .post, layoutRoot(layout) + ["records", .plain(id), "containers", .plain(field), .plain(String(repetition))], "records.upload",
            body: .multipart([.init(name: "upload", filename: filename, contentType: contentType, data: data)]))
        return try await send(request, auth, as: Answer.self).modId.value
    }

    // MARK: Metadata

    /// `GET /fmi/data/{version}/productInfo` (no credential).
    public func productInfo() async throws(HTTPError) -> FileMaker.ProductInfo {
        struct Answer: Decodable { var productInfo: FileMaker.ProductInfo }
        return try Self.unwrap(try await transport.send(make(.get, apiRoot + ["productInfo"], "metadata.productInfo")), as: Answer.self)
            .productInfo
    }

    /// `GET /fmi/data/{version}/databases` with Basic credentials: the databases the account sees.
    public func databases(account: String, password: String) async throws(HTTPError) -> [String] {
        struct Answer: Decodable {
            struct Database: Decodable { var name: String }
            var databases: [Database]
        }
        var request = make(.get, apiRoot + ["databases"], "metadata.databases")
        request.authorizer = BasicAuthorizer(username: account, password: password)
        let response = try await transport.send(request)
        if response.status == 401 { throw .loginRefused(response, account: account, detail: "code \(response.vendorError?.code ?? "-")") }
        return try Self.unwrap(response, as: Answer.self).databases.map(\.name)
    }

    /// `GET …/layouts`.
    public func layouts(auth: CredentialSource<FileMaker.Session>) async throws(HTTPError) -> [FileMaker.LayoutInfo] {
        struct Answer: Decodable { var layouts: [FileMaker.LayoutInfo] }
        return try await send(make(.get, databaseRoot + ["layouts"], "metadata.layouts"), auth, as: Answer.self).layouts
    }

    /// `GET …/layouts/{layout}`: the layout's fields.
    public func layoutMetadata(
        layout: String, auth: CredentialSource<FileMaker.Session>
    ) async throws(HTTPError) -> FileMaker.LayoutMetadata {
        try await send(make(.get, layoutRoot(layout), "metadata.layout"), auth, as: FileMaker.LayoutMetadata.self)
    }

    /// `GET …/scripts`.
    public func scripts(auth: CredentialSource<FileMaker.Session>) async throws(HTTPError) -> [FileMaker.ScriptInfo] {
        struct Answer: Decodable { var scripts: [FileMaker.ScriptInfo] }
        return try await send(make(.get, databaseRoot + ["scripts"], "metadata.scripts"), auth, as: Answer.self).scripts
    }
}
