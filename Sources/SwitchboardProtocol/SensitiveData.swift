// What Switchboard never shows (secrets) and what it shows only when asked (personal data).
// One list each, so the HTTP layer's redactor and the monitor cannot drift apart again.

/// Names that mark a value as a secret or as personal data.
public enum SensitiveData {
    /// Parts of a key name (compared lower-cased) that mark its value as secret wherever it
    /// appears: HTTP header, query item, form field or JSON key names (`SwitchboardHTTP.Redactor`)
    /// and the keys of event contents the monitor prints (`SwitchboardMonitor.Redaction`).
    public static let secretWords = [
        "password", "passwd", "pwd", "secret", "token", "apikey", "api_key", "accesskey", "access_key", "authorization",
        "connectionid", "connection_id", "cookie", "credential", "private_key",
    ]

    /// Whether a key's name marks its value as secret.
    public static func isSecretKey(_ key: String) -> Bool {
        let lowered = key.lowercased()
        return secretWords.contains { lowered.contains($0) }
    }

    /// Keys of event contents (any depth, compared lower-cased) whose values are personal data:
    /// a person's names, date of birth, where they were, and free-text notes about them
    /// (`checkin.recorded/1`'s `participant.first_name`, `last_name`, `date_of_birth`,
    /// `location`, `notes`; `person.created/1`'s `name`). Identifiers (`eto_participant_id`,
    /// `person_id`), sites, programs and kiosks are not: operators need them to follow a record.
    public static let personalKeys: Set<String> = [
        "first_name", "last_name", "name", "date_of_birth", "dob", "birth_date", "location", "latitude", "longitude",
        "accuracy_m", "notes", "email", "phone", "address",
    ]

    /// Whether a key's value is personal data.
    public static func isPersonalKey(_ key: String) -> Bool { personalKeys.contains(key.lowercased()) }
}
