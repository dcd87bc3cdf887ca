import Crypto
public import Foundation

/// Which back end and which account a credential is for: `filemaker` / `switchboard-worker`.
/// Neither part is a secret, so the key may appear in logs, errors and status reports.
public struct CredentialKey: Hashable, Codable, Sendable, CustomStringConvertible {
    /// The back end's short name (`eto`, `filemaker`, `directory`, `sap`).
    public var backend: String
    /// The account the credential was issued to.
    public var account: String
    /// Which part of the back end the credential opens, when one account opens several with
    /// different tokens (ETO: a site id). nil: the account's default.
    public var scope: String?

    public init(backend: String, account: String, scope: String? = nil) {
        self.backend = backend
        self.account = account
        self.scope = scope
    }

    public var description: String { scope.map { "\(backend)/\(account)[\($0)]" } ?? "\(backend)/\(account)" }
}

/// A back-end token with what a client needs to use it: the headers to send and when it expires.
///
/// `token` and the values of `headers` are secrets. `description`, `debugDescription` and the
/// reflection `dump()` uses show only a fingerprint (the first 8 hex digits of the token's
/// SHA-256), the header names, the times and the non-secret `attributes`, so a credential
/// interpolated into a log line or a failed `#expect` gives nothing away. `Codable` does
/// encode the secrets: it exists for the encrypted cache file and the bus's encrypted reply,
/// never for logging.
public struct Credential: Hashable, Sendable, Codable {
    /// The secret value (a bearer token, a session id, a connection id).
    public var token: String
    /// When the back end issued it, as the issuer saw it.
    public var issuedAt: Date
    /// When it stops working; `nil` for a token that lasts until it is rejected.
    public var expiresAt: Date?
    /// Headers to send with each request (`Authorization: Bearer …`). Values may be secrets.
    public var headers: [String: String]
    /// Non-secret facts about the credential (`"database": "Intake"`), safe to log.
    public var attributes: [String: String]

    public init(
        token: String, issuedAt: Date, expiresAt: Date? = nil, headers: [String: String] = [:], attributes: [String: String] = [:]
    ) {
        self.token = token
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.headers = headers
        self.attributes = attributes
    }

    /// The first 8 hex digits of the token's SHA-256: enough to tell two tokens apart in a
    /// log, too little to recover or guess the token from.
    public var fingerprint: String { Self.fingerprint(of: token) }

    /// The fingerprint of `token` (protocol/README.md, section 14.1).
    public static func fingerprint(of token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).prefix(4).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 0x10 ? "0" + hex : hex
        }.joined()
    }

    /// Whether the credential can still be used at `date` with `margin` seconds to spare.
    public func isUsable(at date: Date, margin: TimeInterval = 0) -> Bool {
        guard let expiresAt else { return true }
        return expiresAt.timeIntervalSince(date) > margin
    }

    enum CodingKeys: String, CodingKey {
        case token
        case issuedAt = "issued_at"
        case expiresAt = "expires_at"
        case headers
        case attributes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        token = try container.decode(String.self, forKey: .token)
        issuedAt = try container.decode(Date.self, forKey: .issuedAt)
        expiresAt = try container.decodeIfPresent(Date.self, forKey: .expiresAt)
        headers = try container.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        attributes = try container.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:]
    }
}

extension Credential: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        var parts = ["fingerprint: \(fingerprint)", "issued: \(Self.format(issuedAt))"]
        parts.append("expires: \(expiresAt.map(Self.format) ?? "never")")
        if !headers.isEmpty { parts.append("headers: [\(headers.keys.sorted().joined(separator: ", "))]") }
        if !attributes.isEmpty {
            parts.append("attributes: [\(attributes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))]")
        }
        return "Credential(\(parts.joined(separator: ", ")))"
    }

    public var debugDescription: String { description }

    /// `dump()` and debuggers read this instead of the stored properties.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "fingerprint": fingerprint, "issuedAt": issuedAt, "expiresAt": expiresAt as Any,
                "headerNames": headers.keys.sorted(), "attributes": attributes,
            ],
            displayStyle: .struct)
    }

    static func format(_ date: Date) -> String {
        date.ISO8601Format()
    }
}
