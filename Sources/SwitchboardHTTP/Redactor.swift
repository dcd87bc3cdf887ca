// Everything this module writes to a log or puts into an error passes through a `Redactor`
// first. The back ends put credentials in every place HTTP allows: headers (Authorization,
// securityToken, X-SMP-APPCID), paths (ETO's SSO token, Directory's key), queries (Directory's
// password) and bodies (ETO echoes the password back). A redactor knows the request's secrets
// and also recognises secret-named headers, query items and JSON keys it was not told about.

public import Foundation
import SwitchboardProtocol

/// Replaces secrets in URLs, headers and bodies with ``Redactor/placeholder``.
///
/// Redacted:
/// - every registered secret, verbatim and in its percent-encoded, `+`-for-space,
///   JSON-escaped and base64 forms;
/// - the whole value of the headers in ``secretHeaders``;
/// - the value of query items and form fields whose name contains one of ``secretWords``;
/// - the string value of JSON keys whose name contains one of ``secretWords``.
///
/// Not redacted, by decision: ETO's `enterpriseGuid`. It names an enterprise, is the same for
/// every user of it, is useless without a `securityToken`, and operators need it to tell which
/// enterprise a failing call was for. `securityToken` is redacted.
public struct Redactor: Sendable {
    /// What a secret is replaced with.
    public static let placeholder = "‹redacted›"

    /// Headers whose values are always redacted (compared case-insensitively).
    public static let secretHeaders: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "securitytoken", "x-smp-appcid",
        "x-fm-data-access-token",
    ]

    /// Parts of query-item, form-field and JSON key names that mark their value as secret: the
    /// one list the monitor uses too (``SensitiveData/secretWords``).
    public static let secretWords = SensitiveData.secretWords
    /// Query and form names that are secret though they contain none of ``secretWords``
    /// (Directory's API key).
    public static let secretNames: Set<String> = ["key", "appcid", "x-smp-appcid"]

    private let secrets: [String]

    /// A redactor for these secrets. Empty strings are ignored; every other secret is
    /// redacted however short, because a leaked three-letter password is still a leak.
    ///
    /// Cheap: every request makes one, and nearly all of them never redact anything (a 2xx
    /// answer logs nothing at the default level). The forms of each secret are worked out when
    /// text is redacted.
    public init(secrets: [String] = []) {
        self.secrets = secrets.filter { !$0.isEmpty }
    }

    /// Every form of every secret, longest first, so a secret that contains another is
    /// replaced whole.
    private func needles() -> [String] {
        guard !secrets.isEmpty else { return [] }
        var needles: Set<String> = []
        for secret in secrets {
            needles.insert(secret)
            needles.insert(PercentEncoding.queryComponent(secret))
            needles.insert(PercentEncoding.pathSegment(secret))
            needles.insert(PercentEncoding.queryComponent(secret).replacingOccurrences(of: "%20", with: "+"))
            needles.insert(Data(secret.utf8).base64EncodedString())
            if let json = try? JSONEncoder().encode(secret), let text = String(data: json, encoding: .utf8) {
                needles.insert(String(text.dropFirst().dropLast()))
            }
            needles.insert(secret.replacingOccurrences(of: "/", with: "\\/"))
        }
        return needles.sorted { $0.count > $1.count }
    }

    /// This redactor with more secrets.
    public func adding(_ secrets: [String]) -> Redactor { Redactor(secrets: self.secrets + secrets) }

    /// The text with every registered secret replaced.
    public func redact(_ text: String) -> String { redact(text, needles: needles()) }

    private func redact(_ text: String, needles: [String]) -> String {
        var text = text
        for needle in needles where text.contains(needle) {
            text = text.replacingOccurrences(of: needle, with: Self.placeholder)
        }
        return text
    }

    /// The URL with secrets replaced and the values of secret-named query items replaced.
    public func redactURL(_ url: String) -> String {
        let needles = needles()
        guard let mark = url.firstIndex(of: "?") else { return redact(url, needles: needles) }
        let head = url[..<mark]
        let query = url[url.index(after: mark)...]
        return redact(String(head), needles: needles) + "?" + redactPairs(String(query), needles: needles)
    }

    /// `name=value&…` text (a query or a form body) with secret-named values replaced.
    public func redactPairs(_ text: String) -> String { redactPairs(text, needles: needles()) }

    private func redactPairs(_ text: String, needles: [String]) -> String {
        let pairs = text.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            guard let equals = pair.firstIndex(of: "=") else { return redact(String(pair), needles: needles) }
            let name = String(pair[..<equals])
            let decodedName = name.removingPercentEncoding ?? name
            if Self.isSecretName(decodedName) { return "\(redact(name, needles: needles))=\(Self.placeholder)" }
            return redact(String(pair), needles: needles)
        }
        return pairs.joined(separator: "&")
    }

    /// The headers with secret headers' values and registered secrets replaced.
    public func redactHeaders(_ headers: HTTPHeaderFields) -> [(name: String, value: String)] {
        headers.fields.map { field in
            Self.secretHeaders.contains(field.name.lowercased())
                ? (field.name, Self.placeholder) : (field.name, redact(field.value))
        }
    }

    /// A body as text for a log or an error: JSON string values under secret-named keys
    /// replaced, registered secrets replaced, cut to `limit` characters. Bytes that are not
    /// UTF-8 are summarised, not shown.
    public func redactBody(_ data: Data, limit: Int = 512) -> String {
        guard var text = String(data: data, encoding: .utf8) else { return "<\(data.count) bytes, not UTF-8>" }
        text = Self.redactJSONSecretKeys(text)
        if text.contains("=") && !text.contains("{") && !text.contains("<") { text = redactPairs(text) }
        text = redact(text)
        if text.count > limit { text = String(text.prefix(limit)) + "…" }
        return text
    }

    static func isSecretName(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return secretNames.contains(lowered) || secretWords.contains { lowered.contains($0) }
    }

    // `"SomeTokenKey" : "value"` → `"SomeTokenKey" : "‹redacted›"`. A scan rather than a JSON
    // round trip, so it also works on a truncated or malformed body.
    private static let secretKeyPattern: NSRegularExpression = {
        let words = secretWords.map(NSRegularExpression.escapedPattern(for:)).joined(separator: "|")
        // The key: any quoted name containing a secret word; the value: a JSON string.
        return try! NSRegularExpression(
            pattern: #"("[^"\\]*(?:"# + words + #")[^"\\]*"\s*:\s*)"(?:[^"\\]|\\.)*""#,
            options: [.caseInsensitive]
        )
    }()

    static func redactJSONSecretKeys(_ text: String) -> String {
        let range = NSRange(text.startIndex..., in: text)
        return secretKeyPattern.stringByReplacingMatches(
            in: text, range: range, withTemplate: "$1\"\(NSRegularExpression.escapedTemplate(for: placeholder))\"")
    }
}
