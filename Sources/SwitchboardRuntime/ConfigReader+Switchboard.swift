// The kinds of value our settings have that swift-configuration does not know: durations,
// sizes, endpoints, URLs, text that must not be blank, integers within bounds. Each throws a
// `ConfigurationError` naming the key; `ProgramConfiguration.read` adds where the value came from.

public import Configuration
import Foundation

extension ConfigReader {
    /// Text that must not be blank when given.
    public func nonEmpty(_ key: String) throws(ConfigurationError) -> String? {
        guard let value = string(forKey: ConfigKey(key)) else { return nil }
        guard !value.allSatisfy(\.isWhitespace) else { throw ConfigurationError(key: key, "must not be empty") }
        return value
    }

    /// An integer within `range`, else `fallback`.
    public func int(_ key: String, default fallback: Int, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let value = int(forKey: ConfigKey(key)) else { return fallback }
        guard range.contains(value) else {
            throw ConfigurationError(key: key, "must be \(range.lowerBound)–\(range.upperBound), got \(value)")
        }
        return value
    }

    /// A duration written `500ms`, `30s`, `2m`, `12h` or `7d`.
    public func duration(_ key: String) throws(ConfigurationError) -> Duration? {
        guard let text = string(forKey: ConfigKey(key)) else { return nil }
        guard let value = DurationText.parse(text) else {
            throw ConfigurationError(key: key, "must be a duration like 500ms, 30s or 2m, got '\(text)'")
        }
        return value
    }

    /// A duration within `range`, else `fallback`.
    public func duration(
        _ key: String, default fallback: Duration, in range: ClosedRange<Duration>
    ) throws(ConfigurationError)
        -> Duration
    {
        guard let value = try duration(key) else { return fallback }
        guard range.contains(value) else {
            throw ConfigurationError(
                key: key,
                "must be from \(DurationText.format(range.lowerBound)) to \(DurationText.format(range.upperBound)), got \(DurationText.format(value))"
            )
        }
        return value
    }

    /// A list of durations (`1s,5s,30s` on a flag or in a variable, a JSON array in the file).
    public func durations(_ key: String) throws(ConfigurationError) -> [Duration]? {
        guard let texts = stringArray(forKey: ConfigKey(key)) else { return nil }
        var values: [Duration] = []
        for text in texts where !text.isEmpty {
            guard let value = DurationText.parse(text) else {
                throw ConfigurationError(key: key, "must be durations like 1s,5s,30s, got '\(text)'")
            }
            values.append(value)
        }
        return values
    }

    /// A size written `1048576`, `512KB`, `512MB` or `2GB`.
    public func byteCount(_ key: String) throws(ConfigurationError) -> Int64? {
        guard let text = string(forKey: ConfigKey(key)) else { return nil }
        guard let value = ByteCountText.parse(text) else {
            throw ConfigurationError(key: key, "must be a size like 512MB or 2GB, got '\(text)'")
        }
        return value
    }

    /// A ZeroMQ endpoint (`tcp://host:port`, `ipc://path`, `inproc://name`).
    public func endpoint(_ key: String) throws(ConfigurationError) -> String? {
        guard let text = string(forKey: ConfigKey(key)) else { return nil }
        guard text.hasPrefix("tcp://") || text.hasPrefix("ipc://") || text.hasPrefix("inproc://") else {
            throw ConfigurationError(key: key, "must be a ZeroMQ endpoint (tcp://host:port, ipc://path), got '\(text)'")
        }
        return text
    }

    /// One ZeroMQ endpoint or several separated by commas (the brokers a client may use, one at a
    /// time: `tcp://a:5563,tcp://b:5563`), each checked as `endpoint(_:)` does.
    public func endpoints(_ key: String) throws(ConfigurationError) -> String? {
        guard let text = string(forKey: ConfigKey(key)) else { return nil }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        for part in parts where !(part.hasPrefix("tcp://") || part.hasPrefix("ipc://") || part.hasPrefix("inproc://")) {
            throw ConfigurationError(
                key: key, "must be a ZeroMQ endpoint (tcp://host:port, ipc://path) or several separated by commas, got '\(part)'")
        }
        return parts.joined(separator: ",")
    }

    /// An http(s) URL.
    public func url(_ key: String) throws(ConfigurationError) -> String? {
        guard let text = string(forKey: ConfigKey(key)) else { return nil }
        guard text.hasPrefix("https://") || text.hasPrefix("http://") else {
            throw ConfigurationError(key: key, "must be an http(s) URL, got '\(text)'")
        }
        return text
    }
}
