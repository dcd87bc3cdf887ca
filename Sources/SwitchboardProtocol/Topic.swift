/// Topic names. An event's type is its topic on the fan-out; see `protocol/README.md`, "Topics".
public enum Topic {
    public static let maximumLength = 128
    /// Broker-generated messages on the fan-out start with this; no event type may.
    public static let systemPrefix = "$sys."
    public static let head = "$sys.head"
    /// Domains only the broker publishes in (section 5): a peer's EVENT in one is refused with
    /// `forbidden` in every mode, secured or not.
    public static let brokerDomains = ["security.", "dlq.", "groups."]

    /// The broker-only domain `type` falls in, if any.
    public static func brokerDomain(of type: String) -> String? {
        brokerDomains.first { type.hasPrefix($0) }
    }

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
        withUTF8Bytes(type) { isValidEventType(bytes: $0) }
    }

    static func isValidEventType(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maximumLength else { return false }
        var segments = 1
        var atSegmentStart = true
        for c in bytes {
            if atSegmentStart {
                guard (97...122).contains(c) else { return false }
                atSegmentStart = false
            } else if c == UInt8(ascii: ".") {
                segments += 1
                atSegmentStart = true
            } else {
                guard (97...122).contains(c) || (48...57).contains(c) || c == 95 || c == 45 else { return false }
            }
        }
        return !atSegmentStart && (2...8).contains(segments)
    }

    /// Whether `type` matches any of the prefixes (an empty list matches everything).
    public static func matches(_ type: String, prefixes: [String]) -> Bool {
        prefixes.isEmpty || prefixes.contains { type.hasPrefix($0) }
    }
}

/// Schema references: `type/major`, e.g. `checkin.recorded/1`.
public enum Schema {
    public static func isValidReference(_ reference: String) -> Bool {
        withUTF8Bytes(reference) { b in
            guard let slash = b.lastIndex(of: UInt8(ascii: "/")), slash > 0, slash < b.count - 1, b.count - slash - 1 <= 3 else {
                return false
            }
            let digits = UnsafeBufferPointer(rebasing: b[(slash + 1)...])
            guard digits.allSatisfy({ (48...57).contains($0) }), digits[0] != UInt8(ascii: "0") else { return false }
            return Topic.isValidEventType(bytes: UnsafeBufferPointer(rebasing: b[..<slash]))
        }
    }
}
