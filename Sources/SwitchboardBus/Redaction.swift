public import Foundation

/// Keeps secrets out of what the monitor prints, whatever a producer put in an event.
///
/// Secrets never belong on the event plane, but a display tool must not be the place where a
/// mistake becomes a leak: any object key that names a secret has its value replaced.
public enum Redaction {
    static let secretWords = [
        "password", "passwd", "secret", "token", "api_key", "apikey", "authorization", "connection_id", "connectionid", "cookie",
        "credential", "private_key",
    ]

    public static func isSecretKey(_ key: String) -> Bool {
        let lowered = key.lowercased()
        return secretWords.contains { lowered.contains($0) }
    }

    /// The JSON value with every secret-named key's value replaced by `"[redacted]"`.
    public static func redact(_ value: Any) -> Any {
        switch value {
        case let object as [String: Any]:
            var copy: [String: Any] = [:]
            for (key, inner) in object { copy[key] = isSecretKey(key) ? "[redacted]" : redact(inner) }
            return copy
        case let list as [Any]:
            return list.map(redact)
        default:
            return value
        }
    }

    /// Redacted JSON bytes of a JSON document; non-JSON input becomes a placeholder.
    public static func redactedJSON(_ data: Data) -> Any {
        guard let value = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
            return "[not JSON]"
        }
        return redact(value)
    }
}
