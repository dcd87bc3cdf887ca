/// Topic names. An event's type is its topic on the fan-out; see `protocol/README.md`, "Topics".
public enum Topic {
    public static let maximumLength = 128
    /// Broker-generated messages on the fan-out start with this; no event type may.
    public static let systemPrefix = "$sys."
    public static let head = "$sys.head"

    /// Checks an event type: 2–8 dot-separated segments, each a lowercase letter followed by
    /// lowercase letters, digits, `_` or `-`; at most 128 bytes.
    public static func validateEventType(_ type: String) throws(ProtocolError) {
        if type.hasPrefix("$") {
            throw ProtocolError(.invalidTopic, "event type '\(type.prefix(Self.maximumLength))' uses the reserved '$' prefix")
        }
        guard isValidEventType(type) else {
            throw ProtocolError(
                .invalidTopic,
                "event type '\(type.prefix(Self.maximumLength))' must be 2–8 dot-separated lowercase segments like 'checkin.recorded'")
        }
    }

    public static func isValidEventType(_ type: String) -> Bool {
        guard !type.isEmpty, type.utf8.count <= maximumLength else { return false }
        let segments = type.split(separator: ".", omittingEmptySubsequences: false)
        guard (2...8).contains(segments.count) else { return false }
        return segments.allSatisfy { segment in
            guard let first = segment.utf8.first, (97...122).contains(first) else { return false }
            return segment.utf8.allSatisfy { c in (97...122).contains(c) || (48...57).contains(c) || c == 95 || c == 45 }
        }
    }

    /// Whether `type` matches any of the prefixes (an empty list matches everything).
    public static func matches(_ type: String, prefixes: [String]) -> Bool {
        prefixes.isEmpty || prefixes.contains { type.hasPrefix($0) }
    }
}

/// Schema references: `type/major`, e.g. `checkin.recorded/1`.
public enum Schema {
    public static func isValidReference(_ reference: String) -> Bool {
        let parts = reference.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let major = Int(parts[1]), major >= 1, major < 1000 else { return false }
        return Topic.isValidEventType(String(parts[0]))
    }
}
