// One configuration mechanism for every program, on apple/swift-configuration: built-in
// defaults < a JSON file < environment variables < command-line flags.
//
// Keys are dotted (`retention.max_age`). Program P's key `k` is `P.k` in a file
// (`{"P": {"k": …}}`), `SWITCHBOARD_P_K` in the environment and `--k` on its command line. The
// keys a host's client programs share (the broker's address, their keys, the log format) may
// also be set once, unscoped: at the top of the file, or as `SWITCHBOARD_K`. In each layer the
// program's own key wins over the shared one. The broker reads only its own section.

internal import Configuration
public import Foundation

/// A program's settings, read through the layers in order.
public struct ConfigurationLayers: Sendable {
    /// A setting that cannot be read: the message names the setting and where it came from.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// The keys every client program on a host may share, set once unscoped.
    public static let sharedKeys = [
        "broker_host", "ingest", "fanout", "replay", "service", "groups", "certificate", "broker_key", "ca_file", "admin",
        "log_format", "log_level",
    ]

    /// Every program that reads these layers; a file may hold a section for each.
    public static let programs = ["broker", "auth", "filemaker", "eto", "directory", "kiosk", "monitor", "emulator", "operator"]

    /// The environment variable that names the configuration file when `--config` is not given.
    public static let fileVariable = "SWITCHBOARD_CONFIG"

    /// Environment variables under a program's prefix that are not configuration keys.
    static let notKeys: Set<String> = ["SWITCHBOARD_AUTH_ACCOUNTS"]

    /// One source of values: the flags, the environment, the file; scoped or shared.
    private struct Layer: Sendable {
        var name: String
        var lookup: @Sendable (AbsoluteConfigKey, ConfigType) throws -> LookupResult
    }

    public let program: String
    /// Keys this program knows, without its section name.
    public let keys: [String]
    private let layers: [Layer]
    private let flagNames: [String: String]

    /// - Parameters:
    ///   - program: the program's section (`broker`, `filemaker`, …).
    ///   - file: a JSON file (`--config`); nil: `SWITCHBOARD_CONFIG`, else none.
    ///   - keys: every key the program knows; an unknown key in its section of the file or under
    ///     its environment prefix is an error (a misspelt setting is never silently ignored).
    ///   - flags: the values given on the command line, by key.
    ///   - flagNames: how a key is spelt on the command line, for messages (`--data-dir`).
    ///   - shared: the keys the program may take from the shared, unscoped layer; nil: every
    ///     shared key it knows.
    ///   - sectioned: whether the file must have the program's section; false: a file with no
    ///     section is the program's alone (the broker's `{"ingest": …}`).
    public init(
        program: String, file: String? = nil, keys: [String], flags: [String: String] = [:], flagNames: [String: String] = [:],
        shared: [String]? = nil, sectioned: Bool = true, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(Failure) {
        self.program = program
        self.keys = keys
        self.flagNames = flagNames
        let known = Set(keys)
        let sharedHere = Set(shared ?? Self.sharedKeys).intersection(known)

        var layers: [Layer] = []
        var flagValues: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, value) in flags {
            guard known.contains(key) else { throw Failure("\(program): no setting '\(key)' for a flag") }
            flagValues[Self.configKey(key)] = ConfigValue(.string(value), isSecret: false)
        }
        let flagProvider = InMemoryProvider(name: "flags", values: flagValues)
        layers.append(Layer(name: "flags") { key, type in try flagProvider.value(forKey: key, type: type) })

        let programPrefix = "SWITCHBOARD_" + program.uppercased() + "_"
        for (variable, _) in environment where variable.hasPrefix(programPrefix) && !Self.notKeys.contains(variable) {
            let isKey = keys.contains { programPrefix + Self.environmentName($0) == variable }
            let isShared = Self.sharedKeys.contains { "SWITCHBOARD_" + Self.environmentName($0) == variable }
            guard isKey || isShared else {
                throw Failure(
                    "environment \(variable): \(program) has no such setting (known: \(keys.map { programPrefix + Self.environmentName($0) }.sorted().joined(separator: ", ")))"
                )
            }
        }
        let environmentProvider = EnvironmentVariablesProvider(environmentVariables: environment)
        let scopedEnvironment = environmentProvider.prefixKeys(with: ConfigKey(["switchboard", program]))
        layers.append(Layer(name: "environment") { key, type in try scopedEnvironment.value(forKey: key, type: type) })
        if !sharedHere.isEmpty {
            let sharedEnvironment = environmentProvider.prefixKeys(with: ConfigKey(["switchboard"]))
            layers.append(
                Layer(name: "environment") { key, type in
                    guard sharedHere.contains(key.components.joined(separator: ".")) else {
                        return LookupResult(encodedKey: "", value: nil)
                    }
                    return try sharedEnvironment.value(forKey: key, type: type)
                })
        }

        if let path = file ?? environment[Self.fileVariable], !path.isEmpty {
            layers += try Self.fileLayers(path: path, program: program, known: known, shared: sharedHere, sectioned: sectioned)
        }
        self.layers = layers
    }

    /// The file's layers: the program's section, then (for a client program) the shared top level.
    private static func fileLayers(
        path: String, program: String, known: Set<String>, shared: Set<String>, sectioned mustBeSectioned: Bool
    ) throws(Failure) -> [Layer] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw Failure("cannot read configuration file \(path): \(error.localizedDescription)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw Failure("configuration file \(path) is not a JSON object")
        }
        let snapshot: JSONSnapshot
        do {
            snapshot = try JSONSnapshot(data: data.bytes, providerName: "file", parsingOptions: .default)
        } catch {
            throw Failure("configuration file \(path): \(error)")
        }
        let source = "file \(path)"
        // A file for one program alone may leave out the section: `{"ingest": …}` for the broker.
        let sectioned = mustBeSectioned || object.keys.contains { Self.programs.contains($0) }
        if sectioned {
            for (key, value) in object {
                if Self.programs.contains(key) {
                    guard value is [String: Any] else { throw Failure("configuration file \(path): '\(key)' must be an object") }
                    continue
                }
                guard Self.sharedKeys.contains(key) else {
                    throw Failure(
                        "configuration file \(path): unknown key '\(key)' at the top (there: \(Self.sharedKeys.joined(separator: ", ")) and a section per program: \(Self.programs.joined(separator: ", ")))"
                    )
                }
            }
        }
        let own = sectioned ? (object[program] as? [String: Any] ?? [:]) : object
        var flat: [String: Any] = [:]
        flatten(own, prefix: "", into: &flat)
        for key in flat.keys where !known.contains(key) {
            let spelt = sectioned ? "\(program).\(key)" : key
            throw Failure(
                "configuration file \(path): unknown key '\(spelt)' (\(program) knows: \(known.sorted().joined(separator: ", ")))")
        }
        var layers = [
            Layer(name: source) { key, type in
                try snapshot.value(forKey: sectioned ? key.prepending(ConfigKey([program])) : key, type: type)
            }
        ]
        if sectioned, !shared.isEmpty {
            layers.append(
                Layer(name: source) { key, type in
                    guard shared.contains(key.components.joined(separator: ".")) else { return LookupResult(encodedKey: "", value: nil) }
                    return try snapshot.value(forKey: key, type: type)
                })
        }
        return layers
    }

    private static func flatten(_ object: [String: Any], prefix: String, into flat: inout [String: Any]) {
        for (key, value) in object {
            let full = prefix.isEmpty ? key : "\(prefix).\(key)"
            if let nested = value as? [String: Any] {
                flatten(nested, prefix: full, into: &flat)
            } else {
                flat[full] = value
            }
        }
    }

    static func configKey(_ key: String) -> AbsoluteConfigKey {
        AbsoluteConfigKey(key.split(separator: ".").map(String.init))
    }

    /// `retention.max_age` → `RETENTION_MAX_AGE`.
    public static func environmentName(_ key: String) -> String {
        key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    /// The program's environment variable for `key`.
    public func variable(_ key: String) -> String {
        "SWITCHBOARD_\(program.uppercased())_\(Self.environmentName(key))"
    }

    /// The value of `key` as text and where it came from, from the highest layer that has it.
    public func lookup(_ key: String) throws(Failure) -> (value: String, source: String)? {
        let configKey = Self.configKey(key)
        for layer in layers {
            let found: (String, String)?
            do {
                found = try Self.text(in: layer, key: configKey)
            } catch {
                throw Failure("\(key) from \(layer.name): \(error)")
            }
            if let (value, encoded) = found {
                let source: String
                switch layer.name {
                case "flags": source = "flag " + (flagNames[key] ?? "--" + key.replacingOccurrences(of: "_", with: "-"))
                case "environment": source = "environment " + encoded
                default: source = "\(layer.name) (\(encoded))"
                }
                return (value, source)
            }
        }
        return nil
    }

    /// A value as text whatever its JSON type: `8`, `true` and `["a","b"]` read as `8`, `true`, `a,b`.
    private static func text(in layer: Layer, key: AbsoluteConfigKey) throws -> (String, String)? {
        var lastError: (any Error)?
        for type in [ConfigType.string, .int, .double, .bool, .stringArray, .intArray] {
            do {
                let result = try layer.lookup(key, type)
                guard let value = result.value else { return nil }
                let text: String
                switch value.content {
                case .string(let string): text = string
                case .int(let number): text = String(number)
                case .double(let number): text = String(number)
                case .bool(let flag): text = flag ? "true" : "false"
                case .stringArray(let list): text = list.joined(separator: ",")
                case .intArray(let list): text = list.map(String.init).joined(separator: ",")
                default: continue
                }
                return (text, result.encodedKey)
            } catch {
                lastError = error
            }
        }
        if let lastError { throw lastError }
        return nil
    }

    /// The text of `key`, or nil where no layer has it. An unreadable value is reported as missing
    /// here; the typed readers below report it.
    public func string(_ key: String) -> String? {
        (try? lookup(key))??.value
    }

    public func string(_ key: String, default fallback: String) -> String {
        string(key) ?? fallback
    }

    /// A value that must not be empty when given.
    public func nonEmpty(_ key: String) throws(Failure) -> String? {
        guard let (value, source) = try lookup(key) else { return nil }
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty else { throw Failure("\(key) from \(source) must not be empty") }
        return value
    }

    public func integer(_ key: String) throws(Failure) -> Int? {
        guard let (text, source) = try lookup(key) else { return nil }
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else {
            throw Failure("\(key) from \(source) must be an integer, got '\(text)'")
        }
        return value
    }

    public func integer(_ key: String, default fallback: Int, in range: ClosedRange<Int>) throws(Failure) -> Int {
        guard let value = try integer(key) else { return fallback }
        guard range.contains(value) else {
            throw Failure("\(key) from \(try lookup(key)?.source ?? "?") must be \(range.lowerBound)–\(range.upperBound), got \(value)")
        }
        return value
    }

    public func bool(_ key: String) throws(Failure) -> Bool? {
        guard let (text, source) = try lookup(key) else { return nil }
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw Failure("\(key) from \(source) must be true or false, got '\(text)'")
        }
    }

    /// A comma-separated list; an empty text is an empty list.
    public func list(_ key: String) throws(Failure) -> [String]? {
        guard let (text, _) = try lookup(key) else { return nil }
        return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    public func duration(_ key: String) throws(Failure) -> Duration? {
        guard let (text, source) = try lookup(key) else { return nil }
        guard let value = DurationText.parse(text) else {
            throw Failure("\(key) from \(source) must be a duration like 500ms, 30s, 15m, 12h or 7d, got '\(text)'")
        }
        return value
    }

    /// A comma-separated list of durations (`1s,5s,30s`); an empty string is an empty list.
    public func durations(_ key: String) throws(Failure) -> [Duration]? {
        guard let (text, source) = try lookup(key) else { return nil }
        let parts = text.split(separator: ",", omittingEmptySubsequences: true).map(String.init)
        var values: [Duration] = []
        for part in parts {
            guard let value = DurationText.parse(part) else {
                throw Failure("\(key) from \(source) must be durations like 1s,5s,30s, got '\(part)' in '\(text)'")
            }
            values.append(value)
        }
        return values
    }

    public func byteCount(_ key: String) throws(Failure) -> Int64? {
        guard let (text, source) = try lookup(key) else { return nil }
        guard let value = ByteCountText.parse(text) else {
            throw Failure("\(key) from \(source) must be a size like 512MB or 2GB, got '\(text)'")
        }
        return value
    }

    /// A ZeroMQ endpoint (`tcp://host:port`, `ipc://path`, `inproc://name`).
    public func endpoint(_ key: String) throws(Failure) -> String? {
        guard let (text, source) = try lookup(key) else { return nil }
        guard text.hasPrefix("tcp://") || text.hasPrefix("ipc://") || text.hasPrefix("inproc://") else {
            throw Failure("\(key) from \(source) must be a ZeroMQ endpoint (tcp://host:port, ipc://path), got '\(text)'")
        }
        return text
    }

    /// An http(s) URL.
    public func url(_ key: String) throws(Failure) -> String? {
        guard let (text, source) = try lookup(key) else { return nil }
        guard text.hasPrefix("https://") || text.hasPrefix("http://") else {
            throw Failure("\(key) from \(source) must be an http(s) URL, got '\(text)'")
        }
        return text
    }

    /// The help text every program's `--config` shows, naming its section and variables.
    public static func help(program: String) -> String {
        """
        Settings come from, in rising order: defaults, a JSON file (--config FILE or \(fileVariable)), \
        the environment, flags. A flag --foo-bar is key foo_bar: in the file under "\(program)" \
        ({"\(program)": {"foo_bar": …}}), in the environment SWITCHBOARD_\(program.uppercased())_FOO_BAR.
        """
    }
}
