// A request is a plain value that a back-end client builds and `SwitchboardHTTPClient` sends.
// It keeps the parts of the URL apart (base, path segments, query items) so that each part is
// percent-encoded exactly once, and so that a token placed in a path is known to be a secret
// before anything is logged.

public import Foundation

/// One outgoing HTTP request, described as values.
///
/// The URL is built from ``baseURL`` (already encoded, without a trailing slash), the
/// ``path`` segments (each percent-encoded on its own, so a `/` inside a segment stays part of
/// it) and the ``query`` items (names and values percent-encoded, so `&`, `#`, `+`, spaces and
/// non-ASCII characters survive).
///
/// Every secret the request carries — secret path segments, the values in ``secrets``, and the
/// credential an ``authorizer`` applies — is redacted from logs and errors.
public struct HTTPRequest: Sendable {
    /// The HTTP method. Only the methods the back ends use are listed; ``init(rawValue:)``
    /// admits others.
    public struct Method: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue.uppercased() }
        public static let get = Method(rawValue: "GET")
        public static let head = Method(rawValue: "HEAD")
        public static let post = Method(rawValue: "POST")
        public static let put = Method(rawValue: "PUT")
        public static let patch = Method(rawValue: "PATCH")
        public static let delete = Method(rawValue: "DELETE")
        public var description: String { rawValue }

        /// Methods that RFC 9110 defines as idempotent; the default of ``HTTPRequest/idempotent``.
        public var isIdempotent: Bool { [.get, .head, .put, .delete].contains(self) || rawValue == "OPTIONS" }
    }

    /// One segment of the path, percent-encoded on its own.
    public enum PathSegment: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
        /// An ordinary segment (a layout name, a record id).
        case plain(String)
        /// A segment that is a credential (ETO's SSO token, Directory's API key), or personal
        /// data no log may show (ETO's search text, a last name): sent as is, redacted
        /// everywhere else.
        case secret(String)
        /// A place for the credential of a ``PathTokenAuthorizer``; a request that still has one
        /// when it is sent fails with ``HTTPError/Code/invalidRequest``.
        case credential

        public init(stringLiteral value: String) { self = .plain(value) }
        public init(integerLiteral value: Int) { self = .plain(String(value)) }
    }

    /// The body and the `Content-Type` it implies.
    public enum Body: Sendable {
        case none
        /// JSON bytes, sent with `Content-Type: application/json`. Build from a value with
        /// ``json(_:encoder:)``.
        case json(Data)
        /// `application/x-www-form-urlencoded` pairs, in order, percent-encoded.
        case form([(String, String)])
        /// Bytes with a content type of the caller's choosing.
        case raw(Data, contentType: String)
        /// `multipart/form-data` (FileMaker's container upload uses one part named `upload`).
        case multipart([MultipartPart])

        /// The value encoded as JSON.
        /// - Throws: `EncodingError` when the value cannot be encoded.
        public static func json(_ value: some Encodable, encoder: JSONEncoder = JSONEncoder()) throws -> Body {
            .json(try encoder.encode(value))
        }
    }

    /// One part of a `multipart/form-data` body.
    public struct MultipartPart: Sendable {
        public var name: String
        public var filename: String?
        public var contentType: String?
        public var data: Data

        public init(name: String, filename: String? = nil, contentType: String? = nil, data: Data) {
            self.name = name
            self.filename = filename
            self.contentType = contentType
            self.data = data
        }
    }

    /// The API this request belongs to: its name for logs and errors, how to read its errors,
    /// when a credential counts as rejected and which failures are never retried.
    public var api: APIProfile
    /// A short name of the call for logs and errors, e.g. `"records.find"`.
    public var operation: String
    public var method: Method
    /// Scheme, host, port and any fixed base path, already encoded, e.g.
    /// `https://fm.example.org/fmi/data/vLatest/databases/Shelter`.
    public var baseURL: String
    public var path: [PathSegment]
    /// Whether the path ends with `/` (ETO's WCF routes such as `Security.svc/SSOAuthenticate/`).
    public var trailingSlash: Bool
    /// Query items in order; a `nil` value sends the name alone.
    public var query: [(name: String, value: String?)]
    /// Headers for this request; they override the client's global headers of the same name.
    public var headers: HTTPHeaderFields
    public var body: Body
    /// Whether sending the request twice has the effect of sending it once. Only idempotent
    /// requests are retried. Defaults to the method's idempotency.
    public var idempotent: Bool
    /// The deadline of one attempt (connect, send, receive the whole body); `nil` uses the
    /// client's ``SwitchboardHTTPClient/Configuration/timeout``.
    public var timeout: Duration?
    /// Values to redact wherever this request or its response is logged or reported: a password
    /// in a query or a body, for instance.
    public var secrets: [String]
    /// Applies a credential before each send; see ``HTTPAuthorizer``.
    public var authorizer: (any HTTPAuthorizer)?
    /// Decides whether a response means the credential was rejected, instead of
    /// ``APIProfile/expiry``; SAP's connection check sets ``ExpiryDetector/sapConnectionCheck``.
    public var expiry: ExpiryDetector?

    public init(
        _ method: Method, _ baseURL: String, path: [PathSegment] = [], trailingSlash: Bool = false,
        query: [(name: String, value: String?)] = [], headers: HTTPHeaderFields = [:], body: Body = .none,
        api: APIProfile, operation: String, idempotent: Bool? = nil, timeout: Duration? = nil, secrets: [String] = [],
        authorizer: (any HTTPAuthorizer)? = nil
    ) {
        self.method = method
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.path = path
        self.trailingSlash = trailingSlash
        self.query = query
        self.headers = headers
        self.body = body
        self.api = api
        self.operation = operation
        self.idempotent = idempotent ?? method.isIdempotent
        self.timeout = timeout
        self.secrets = secrets
        self.authorizer = authorizer
    }

    /// The URL as it goes on the wire, secrets included. Never log this; use ``redactedURL``.
    public var url: String {
        var url = baseURL
        for segment in path {
            url += "/"
            switch segment {
            case .plain(let value), .secret(let value): url += PercentEncoding.pathSegment(value)
            case .credential: url += "%7Bcredential%7D"
            }
        }
        if trailingSlash { url += "/" }
        if !query.isEmpty {
            url += "?"
            url += query.map { item in
                let name = PercentEncoding.queryComponent(item.name)
                return item.value.map { "\(name)=\(PercentEncoding.queryComponent($0))" } ?? name
            }.joined(separator: "&")
        }
        return url
    }

    /// Every secret this request knows of: ``secrets`` and secret path segments. The
    /// authorizer's secrets are added when it is applied.
    public var allSecrets: [String] {
        var all = secrets
        for case .secret(let value) in path { all.append(value) }
        return all
    }

    /// The URL with every secret and every secret-named query value replaced.
    public var redactedURL: String { Redactor(secrets: allSecrets).redactURL(url) }
}

/// Header fields in order, with case-insensitive names.
public struct HTTPHeaderFields: Sendable, ExpressibleByDictionaryLiteral, Sequence, CustomStringConvertible {
    public private(set) var fields: [(name: String, value: String)] = []

    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of the header, or `nil`; setting replaces every field of that name.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.caseInsensitiveEquals(name) }?.value }
        set {
            fields.removeAll { $0.name.caseInsensitiveEquals(name) }
            if let newValue { fields.append((name: name, value: newValue)) }
        }
    }

    /// Every value of the header, in order (`Set-Cookie` comes several times).
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name: name, value: value)) }

    /// These fields, with every field of `other` replacing the fields of the same name.
    public func merging(_ other: HTTPHeaderFields) -> HTTPHeaderFields {
        var merged = self
        for name in Set(other.fields.map { $0.name.lowercased() }) {
            merged.fields.removeAll { $0.name.lowercased() == name }
        }
        merged.fields.append(contentsOf: other.fields)
        return merged
    }

    public func makeIterator() -> some IteratorProtocol<(name: String, value: String)> { fields.makeIterator() }

    /// The headers with secret values redacted; safe for logs.
    public var description: String { Redactor().redactHeaders(self).map { "\($0.name): \($0.value)" }.joined(separator: ", ") }
}

extension String {
    func caseInsensitiveEquals(_ other: String) -> Bool {
        count == other.count && lowercased() == other.lowercased()
    }
}

/// Percent-encoding by RFC 3986, stricter than Foundation's defaults: `URLComponents` leaves
/// `+`, `&` and `=` alone in query items, which breaks a password such as `a+b&c`.
enum PercentEncoding {
    private static let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
    // A path segment may also carry these sub-delimiters literally (OData's `Connections('id')`);
    // `+`, `&`, `=` and `;` are encoded because servlet containers and some proxies read them.
    private static let pathExtras = Set("!$'()*,:@".utf8)

    static func pathSegment(_ value: String) -> String { encode(value) { unreserved.contains($0) || pathExtras.contains($0) } }
    static func queryComponent(_ value: String) -> String { encode(value) { unreserved.contains($0) } }

    private static func encode(_ value: String, keeping: (UInt8) -> Bool) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            if keeping(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%"
                out += String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

extension HTTPRequest.Body {
    /// The bytes and content type that go on the wire.
    func encoded() -> (data: Data, contentType: String?) {
        switch self {
        case .none:
            return (Data(), nil)
        case .json(let data):
            return (data, "application/json")
        case .form(let pairs):
            let text = pairs.map { "\(PercentEncoding.queryComponent($0.0))=\(PercentEncoding.queryComponent($0.1))" }
                .joined(separator: "&")
            return (Data(text.utf8), "application/x-www-form-urlencoded")
        case .raw(let data, let contentType):
            return (data, contentType)
        case .multipart(let parts):
            let boundary = "switchboard-\(UUID().uuidString)"
            var data = Data()
            for part in parts {
                data.append(Data("--\(boundary)\r\n".utf8))
                var disposition = "Content-Disposition: form-data; name=\"\(Self.quoted(part.name))\""
                if let filename = part.filename { disposition += "; filename=\"\(Self.quoted(filename))\"" }
                data.append(Data("\(disposition)\r\n".utf8))
                if let contentType = part.contentType { data.append(Data("Content-Type: \(contentType)\r\n".utf8)) }
                data.append(Data("\r\n".utf8))
                data.append(part.data)
                data.append(Data("\r\n".utf8))
            }
            data.append(Data("--\(boundary)--\r\n".utf8))
            return (data, "multipart/form-data; boundary=\(boundary)")
        }
    }

    /// A name or filename inside a quoted header parameter: quotes and line breaks escaped as
    /// HTML forms do, so a filename cannot inject headers into the part. Per Unicode scalar: a
    /// quote followed by a combining mark is one Character that is not `"`, and "\r\n" is one
    /// Character that is neither "\r" nor "\n".
    static func quoted(_ value: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out.append(contentsOf: "%22".unicodeScalars)
            case "\r": out.append(contentsOf: "%0D".unicodeScalars)
            case "\n": out.append(contentsOf: "%0A".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
