public import Foundation

/// Layered configuration: built-in defaults, then a JSON file, then environment variables,
/// then command-line flags; each layer overrides the one before it.
///
/// This type reads the middle two layers into a flat `[key: string]` view so every program
/// handles them the same way. Keys are dotted (`retention.max_age`); the file may nest objects
/// (`{"retention": {"max_age": "7d"}}`) or write the dotted key directly. The environment
/// variable for a key is the prefix plus the key upper-cased with dots as underscores
/// (`SWITCHBOARD_BROKER_RETENTION_MAX_AGE`).
public struct ConfigurationLayers: Sendable {
    public private(set) var values: [String: String] = [:]
    /// Where each value came from, for error messages.
    public private(set) var sources: [String: String] = [:]

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// - Parameters:
    ///   - file: a JSON file, or nil.
    ///   - environmentPrefix: e.g. `SWITCHBOARD_BROKER_`.
    ///   - keys: every key the program knows; unknown keys in the file are an error.
    public init(
        file: String?, environmentPrefix: String, keys: [String], environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let known = Set(keys)
        if let file {
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw Failure("cannot read configuration file \(file): \(error.localizedDescription)")
            }
            guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw Failure("configuration file \(file) is not a JSON object")
            }
            var flat: [String: String] = [:]
            Self.flatten(object, prefix: "", into: &flat)
            for (key, value) in flat {
                guard known.contains(key) else {
                    throw Failure("configuration file \(file): unknown key '\(key)' (known: \(keys.sorted().joined(separator: ", ")))")
                }
                values[key] = value
                sources[key] = "file \(file)"
            }
        }
        for key in keys {
            let variable = environmentPrefix + key.uppercased().replacingOccurrences(of: ".", with: "_")
            if let value = environment[variable] {
                values[key] = value
                sources[key] = "environment \(variable)"
            }
        }
    }

    private static func flatten(_ object: [String: Any], prefix: String, into flat: inout [String: String]) {
        for (key, value) in object {
            let full = prefix.isEmpty ? key : "\(prefix).\(key)"
            switch value {
            case let nested as [String: Any]: flatten(nested, prefix: full, into: &flat)
            case let text as String: flat[full] = text
            case let flag as Bool where type(of: value) == Bool.self: flat[full] = flag ? "true" : "false"
            case let number as NSNumber: flat[full] = number.stringValue
            case let list as [Any]: flat[full] = list.map { "\($0)" }.joined(separator: ",")
            default: flat[full] = "\(value)"
            }
        }
    }

    public func string(_ key: String) -> String? { values[key] }

    public func integer(_ key: String) throws -> Int? {
        guard let text = values[key] else { return nil }
        guard let value = Int(text) else { throw Failure("\(key) from \(sources[key] ?? "?") must be an integer, got '\(text)'") }
        return value
    }

    public func duration(_ key: String) throws -> Duration? {
        guard let text = values[key] else { return nil }
        guard let value = DurationText.parse(text) else {
            throw Failure("\(key) from \(sources[key] ?? "?") must be a duration like 500ms, 30s, 15m, 12h or 7d, got '\(text)'")
        }
        return value
    }

    /// A comma-separated list of durations (`1s,5s,30s`); an empty string is an empty list.
    public func durations(_ key: String) throws -> [Duration]? {
        guard let text = values[key] else { return nil }
        let parts = text.split(separator: ",", omittingEmptySubsequences: true).map(String.init)
        return try parts.map { part in
            guard let value = DurationText.parse(part) else {
                throw Failure("\(key) from \(sources[key] ?? "?") must be durations like 1s,5s,30s, got '\(part)' in '\(text)'")
            }
            return value
        }
    }

    public func byteCount(_ key: String) throws -> Int64? {
        guard let text = values[key] else { return nil }
        guard let value = ByteCountText.parse(text) else {
            throw Failure("\(key) from \(sources[key] ?? "?") must be a size like 512MB or 2GB, got '\(text)'")
        }
        return value
    }
}

/// Durations written as `500ms`, `30s`, `15m`, `12h`, `7d`, or a bare number of seconds.
public enum DurationText {
    public static func parse(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            let number = trimmed.dropLast(suffix.count)
            // "ms" also ends with "s": only accept a clean number before the suffix.
            guard let value = Double(number), value >= 0 else { continue }
            return .milliseconds(Int64((value * factor * 1000).rounded()))
        }
        if let seconds = Double(trimmed), seconds >= 0 { return .milliseconds(Int64(seconds * 1000)) }
        return nil
    }

    /// Writes a duration the way `parse` reads it: `250ms`, `5s`, `2m`.
    public static func format(_ duration: Duration) -> String {
        let ms = duration.wholeMilliseconds
        if ms % 60_000 == 0 && ms >= 60_000 { return "\(ms / 60_000)m" }
        if ms % 1000 == 0 { return "\(ms / 1000)s" }
        return "\(ms)ms"
    }
}

/// Sizes written as `1048576`, `512KB`, `512MB`, `2GB` (powers of 1024).
public enum ByteCountText {
    public static func parse(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).uppercased()
        let units: [(String, Int64)] = [("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1)]
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            guard let value = Double(trimmed.dropLast(suffix.count)), value >= 0 else { return nil }
            return Int64(value * Double(factor))
        }
        return Int64(trimmed).flatMap { $0 >= 0 ? $0 : nil }
    }
}

extension Duration {
    /// The duration in whole milliseconds (rounded toward zero).
    public var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
