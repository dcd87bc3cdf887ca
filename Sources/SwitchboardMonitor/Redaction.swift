public import Foundation
import SwitchboardProtocol

/// Keeps secrets, and unless asked personal data, out of what the monitor prints, whatever a
/// producer put in an event.
///
/// Secrets never belong on the event plane, but a display tool must not be the place where a
/// mistake becomes a leak: any object key that names a secret (``SensitiveData/secretWords``,
/// the list the HTTP layer's redactor uses) has its value replaced, always. Personal data
/// (``SensitiveData/personalKeys``: names, date of birth, location, notes) is replaced unless
/// the caller shows it on purpose (`switchboard-monitor --show-personal-data`).
public enum Redaction {
    public static let secretPlaceholder = "[redacted]"
    public static let personalPlaceholder = "[personal]"

    public static func isSecretKey(_ key: String) -> Bool { SensitiveData.isSecretKey(key) }

    /// The JSON value with every secret-named key's value replaced by `"[redacted]"`, and every
    /// personal key's by `"[personal]"` unless `showingPersonalData`.
    public static func redact(_ value: Any, showingPersonalData: Bool = false) -> Any {
        switch value {
        case let object as [String: Any]:
            var copy: [String: Any] = [:]
            for (key, inner) in object {
                if isSecretKey(key) {
                    copy[key] = secretPlaceholder
                } else if !showingPersonalData && SensitiveData.isPersonalKey(key) {
                    copy[key] = personalPlaceholder
                } else {
                    copy[key] = redact(inner, showingPersonalData: showingPersonalData)
                }
            }
            return copy
        case let list as [Any]:
            return list.map { redact($0, showingPersonalData: showingPersonalData) }
        default:
            return value
        }
    }

    /// A JSON document, redacted (see `redact`); non-JSON input becomes a placeholder.
    public static func redactedJSON(_ data: Data, showingPersonalData: Bool = false) -> Any {
        guard let value = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
            return "[not JSON]"
        }
        return redact(value, showingPersonalData: showingPersonalData)
    }
}
