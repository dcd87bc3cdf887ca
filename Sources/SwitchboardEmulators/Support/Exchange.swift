import Foundation
import HTTPTypes

/// One request as an emulated API sees it: the method, the path split into percent-decoded
/// segments, the decoded query, the headers and the whole body (collected up to a limit before
/// dispatch, so handlers are plain synchronous functions over in-memory state).
struct Exchange: Sendable {
    var method: HTTPRequest.Method
    /// The path as sent, before decoding.
    var rawPath: String
    /// `http(s)://` and the `Host` the client sent, or `fallback` (the listening address) when
    /// it sent none or one that is not a plain `host[:port]` (nothing a client sends ends up
    /// in an answer unchecked).
    static func origin(secure: Bool, host: String?, fallback: String) -> String {
        let allowed: Set<Character> = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]")
        let authority = host.flatMap { !$0.isEmpty && $0.count <= 255 && $0.allSatisfy(allowed.contains) ? $0 : nil } ?? fallback
        return (secure ? "https://" : "http://") + authority
    }

    /// Path segments, percent-decoded, empty ones (from `//` or a trailing `/`) dropped.
    var segments: [String]
    /// Query parameters, decoded (`+` is a space, as servlet containers and WCF read it); the
    /// first occurrence of a name wins.
    var query: [String: String]
    var headers: HTTPFields
    var body: Data
    /// `scheme://host[:port]` as the client reached the server: the scheme from whether TLS is
    /// on, the authority from the request's `Host`. Absolute URLs in answers (FileMaker's
    /// container streaming URLs) start with it.
    var origin: String

    /// - Parameters:
    ///   - segments: `path` already split by `segments(of:)`, when the caller has it.
    ///   - origin: see ``origin``; `Exchange.origin(secure:host:fallback:)` builds it.
    init(
        method: HTTPRequest.Method, path: String, segments: [String]? = nil, query: String?, headers: HTTPFields, body: Data,
        origin: String = "http://127.0.0.1"
    ) {
        self.origin = origin
        self.method = method
        self.rawPath = path
        self.segments = segments ?? Exchange.segments(of: path)
        var parameters: [String: String] = [:]
        for pair in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = Exchange.decodeQueryComponent(parts[0])
            let value = parts.count > 1 ? Exchange.decodeQueryComponent(parts[1]) : ""
            if parameters[name] == nil { parameters[name] = value }
        }
        self.query = parameters
        self.headers = headers
        self.body = body
    }

    /// Path segments, percent-decoded (only those that need it: decoding is not free).
    static func segments(of path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map {
            $0.contains("%") ? (String($0).removingPercentEncoding ?? String($0)) : String($0)
        }
    }

    /// Percent-encodes all but RFC 3986's unreserved characters, for a segment of a path the
    /// emulator writes into an answer (the inverse of `segments(of:)`).
    static func encodePathSegment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func decodeQueryComponent(_ part: Substring) -> String {
        let spaced = part.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }

    func header(_ name: String) -> String? {
        guard let field = HTTPField.Name(name) else { return nil }
        return headers[field]
    }

    /// The media type of the body without parameters, lower-cased.
    var mediaType: String? {
        header("Content-Type").map {
            $0.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        }
    }

    var isJSONBody: Bool { mediaType == "application/json" }

    enum Authorization: Sendable, Equatable {
        case none
        case basic(user: String, password: String)
        case bearer(String)
        /// A header that is there but is neither a well-formed Basic nor a Bearer credential.
        case malformed
    }

    var authorization: Authorization {
        guard let value = header("Authorization")?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return .none }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2 else { return .malformed }
        switch parts[0].lowercased() {
        case "basic":
            guard let data = Data(base64Encoded: String(parts[1])), let text = String(data: data, encoding: .utf8),
                let colon = text.firstIndex(of: ":")
            else { return .malformed }
            return .basic(user: String(text[..<colon]), password: String(text[text.index(after: colon)...]))
        case "bearer":
            let token = parts[1].trimmingCharacters(in: .whitespaces)
            return token.isEmpty ? .malformed : .bearer(token)
        default:
            return .malformed
        }
    }

    /// A cookie's value from the `Cookie` header(s).
    func cookie(_ name: String) -> String? {
        for value in headers[values: .cookie] {
            for pair in value.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                    return parts[1].trimmingCharacters(in: .whitespaces)
                }
            }
        }
        return nil
    }
}

/// What an emulated API answers. `close` asks the server to drop the connection without a
/// response (a fault the control API can inject).
struct Reply: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: Data = Data()
    var close = false

    static func json(_ status: Int, _ value: JSON, headers: [(String, String)] = []) -> Reply {
        Reply(status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers, body: value.data)
    }

    static func text(_ status: Int, _ text: String, contentType: String = "text/plain; charset=utf-8") -> Reply {
        Reply(status: status, headers: [("Content-Type", contentType)], body: Data(text.utf8))
    }

    static func empty(_ status: Int) -> Reply { Reply(status: status) }

    static let closeConnection = Reply(status: 500, close: true)
}

/// The standard reason phrase for the statuses the emulators use.
func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 200: "OK"
    case 201: "Created"
    case 204: "No Content"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 413: "Payload Too Large"
    case 415: "Unsupported Media Type"
    case 429: "Too Many Requests"
    case 500: "Internal Server Error"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    default: "Status \(status)"
    }
}

/// A refusal computed part-way through a handler travels as the failure of a `Result`.
extension Reply: Error {}
