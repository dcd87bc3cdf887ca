public import Foundation
import SwitchboardCredentials
public import SwitchboardProtocol

/// The rules of `protocol/schemas/auth.token.v1.json` (the `token.get` reply) and
/// `auth.event.v1.json` (the content of `auth.*` events), and the one rule beyond them: a
/// fingerprint is the first 8 hexadecimal digits of its token's SHA-256 (section 14.1).
///
/// A worker checks every `token.get` reply with these before it caches the token. Errors name
/// the field, never its value: the content holds a secret.
public enum AuthContent {
    /// The back ends `auth` holds accounts for and hands out tokens of.
    public static let backends: Set<String> = ["eto", "filemaker", "directory", "sap"]

    /// Checks a `token.get` reply's content.
    public static func validateToken(_ data: Data) throws(ProtocolError) {
        let object = try parseObject(data)
        try allowOnly(["backend", "account", "token", "fingerprint", "issued_at", "expires_at", "headers", "attributes"], in: object)
        try checkBackendAndAccount(object)
        guard case .string(let token)? = object["token"] else { throw missing("token", "a string") }
        guard !token.isEmpty else { throw fail("token", "must not be empty") }
        try checkFingerprint(object["fingerprint"], required: true)
        guard case .string(let fingerprint)? = object["fingerprint"], fingerprint == Credential.fingerprint(of: token) else {
            throw fail("fingerprint", "is not the first 8 hexadecimal digits of the token's SHA-256")
        }
        try checkTime(object["issued_at"], "issued_at", required: true)
        try checkTime(object["expires_at"], "expires_at", required: false)
        for field in ["headers", "attributes"] {
            guard case .object(let members)? = object[field] else { throw missing(field, "an object") }
            for (name, value) in members {
                guard case .string = value else { throw fail("\(field).\(name)", "must be a string") }
            }
        }
    }

    /// Checks the content of an `auth.token.issued`, `auth.token.refreshed` or
    /// `auth.login.failed` event.
    public static func validateEvent(_ data: Data) throws(ProtocolError) {
        let object = try parseObject(data)
        try allowOnly(["backend", "account", "fingerprint", "expires_at", "reason", "at"], in: object)
        try checkBackendAndAccount(object)
        try checkFingerprint(object["fingerprint"], required: false)
        try checkTime(object["expires_at"], "expires_at", required: false)
        if let reason = object["reason"] {
            guard case .string(let text) = reason else { throw fail("reason", "must be a string") }
            guard text.unicodeScalars.count <= 1000 else { throw fail("reason", "must be at most 1000 characters") }
        }
        try checkTime(object["at"], "at", required: true)
    }

    private static func fail(_ field: String, _ rule: String) -> ProtocolError {
        ProtocolError(.schemaViolation, "content: field '\(field)' \(rule)")
    }

    private static func missing(_ field: String, _ kind: String) -> ProtocolError {
        fail(field, "is required and must be \(kind)")
    }

    private static func parseObject(_ data: Data) throws(ProtocolError) -> [String: JSONValue] {
        guard let object = JSONValue.parse(data)?.object else { throw ProtocolError(.invalidJSON, "content is not a JSON object") }
        return object
    }

    /// No field beyond the schema's: an event that grew a `token` field is refused, not ignored.
    private static func allowOnly(_ fields: Set<String>, in object: [String: JSONValue]) throws(ProtocolError) {
        if let extra = object.keys.sorted().first(where: { !fields.contains($0) }) {
            throw fail(extra, "is not part of the schema")
        }
    }

    private static func checkBackendAndAccount(_ object: [String: JSONValue]) throws(ProtocolError) {
        guard case .string(let backend)? = object["backend"] else { throw missing("backend", "a string") }
        guard backends.contains(backend) else {
            throw fail("backend", "must be one of \(backends.sorted().joined(separator: ", "))")
        }
        guard case .string(let account)? = object["account"] else { throw missing("account", "a string") }
        guard !account.isEmpty else { throw fail("account", "must not be empty") }
    }

    private static func checkFingerprint(_ value: JSONValue?, required: Bool) throws(ProtocolError) {
        guard let value else {
            if required { throw missing("fingerprint", "a string") }
            return
        }
        guard case .string(let text) = value, text.utf8.count == 8,
            text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw fail("fingerprint", "must be 8 lower-case hexadecimal digits") }
    }

    private static func checkTime(_ value: JSONValue?, _ field: String, required: Bool) throws(ProtocolError) {
        guard let value else {
            if required { throw missing(field, "an RFC 3339 date-time") }
            return
        }
        guard case .string(let text) = value, Timestamp.parse(text) != nil else { throw fail(field, "must be an RFC 3339 date-time") }
    }
}
