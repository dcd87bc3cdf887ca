// One configuration reader per program, built once from swift-configuration's providers, in
// falling precedence: command-line flags, environment variables, a JSON file; what none of
// them sets is the reading library's default.
//
// Keys are dotted (`retention.max_age`). Program P's key `a.b_c` is the flag `--a-b-c` on its
// command line, `SWITCHBOARD_P_A_B_C` in the environment and `{"P": {"a": {"b_c": …}}}` in the
// file. The keys a host's client programs share (the broker's address, their keys, the log
// format) may also be set once, unscoped: `SWITCHBOARD_A_B_C`, or at the top of the file. In each
// source the program's own key wins over the shared one. The broker reads only its own section.
//
// Libraries read through the `ConfigReader` (`BrokerConfiguration(reader:)`, …) and list their
// keys in the doc comment of that initialiser. Where a value came from is known only here: an
// access reporter notes, for every key read, which flag, variable or file key answered, so a
// refusal names it ("groups.liveness from flag --groups-liveness: …").

public import Configuration
import Foundation
import Synchronization

/// A setting that cannot be used: the key, where its value came from, and what is wrong.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    /// The key (`groups.liveness`), when the problem is one setting's.
    public var key: String?
    /// Where the value came from (`flag --groups-liveness`), once the program's reader knows it.
    public var source: String?
    public var problem: String

    public init(key: String? = nil, _ problem: String) {
        self.key = key
        self.problem = problem
    }

    public var description: String {
        switch (key, source) {
        case (let key?, let source?): "\(key) from \(source): \(problem)"
        case (let key?, nil): "\(key): \(problem)"
        default: problem
        }
    }
}

/// A program's configuration: the reader its libraries read, and where each value came from.
public struct ProgramConfiguration: Sendable {
    /// The keys every client program on a host may share, set once unscoped.
    public static let sharedKeys = [
        "broker_host", "ingest", "fanout", "replay", "service", "groups", "certificate", "broker_key", "ca_file", "admin",
        "log_format", "log_level",
    ]

    /// Every program that reads its configuration this way; a file may hold a section for each.
    public static let programs = ["broker", "auth", "filemaker", "eto", "directory", "kiosk", "monitor", "emulator", "operator"]

    /// The keys whose flag may be given more than once, each adding to a list (`--ca-file A
    /// --ca-file B`); any other flag given twice counts once, its last, as ArgumentParser reads it.
    static let repeatableKeys: Set<String> = ["ca_file", "api", "tls_host"]

    /// The environment variable that names the configuration file when `--config` is not given.
    public static let fileVariable = "SWITCHBOARD_CONFIG"

    /// Environment variables under a program's prefix that are not configuration keys (auth's
    /// accounts document, which `AuthAccounts` reads as a secret).
    static let notKeys: Set<String> = ["SWITCHBOARD_AUTH_ACCOUNTS"]

    public let program: String
    /// The program's settings: flags over environment over file.
    public let reader: ConfigReader
    private let sources: SourceRecorder

    /// Builds the reader of `program` once, from its command line, its environment and the JSON
    /// file named by `--config` or `SWITCHBOARD_CONFIG`.
    ///
    /// - Parameters:
    ///   - program: the program's section (`broker`, `filemaker`, …).
    ///   - keys: every key the program knows; an unknown key in its section of the file or under
    ///     its environment prefix is refused (a misspelt setting is never silently ignored).
    ///   - arguments: the command line as given (`CommandLine.arguments`); a flag is read by the
    ///     name the key gives it (`--a-b-c`), so the program's options must be spelt that way.
    ///   - environment: the process environment, passed in by the program (no library reads it).
    ///   - shared: the keys the program may take from the shared, unscoped sources; nil: every
    ///     shared key it knows.
    ///   - sectioned: whether the file must have the program's section; false: a file with no
    ///     section is the program's alone (the broker's `{"ingest": …}`).
    public init(
        program: String, keys: [String], arguments: [String], environment: [String: String], shared: [String]? = nil,
        sectioned: Bool = true
    ) throws(ConfigurationError) {
        self.program = program
        let known = Set(keys)
        let sharedHere = Set(shared ?? Self.sharedKeys).intersection(known)

        // A flag `--a-b-c` is key `a.b_c`: the library's command-line encoding joins the
        // components with dashes, so each underscore becomes a dash first.
        // Text with commas (a list of brokers) is given back whole (`FlagTextProvider`).
        let flags = FlagTextProvider(
            upstream: CommandLineArgumentsProvider(arguments: Self.lastOfEach(arguments, except: Self.repeatableKeys)).mapKeys { key in
                AbsoluteConfigKey(key.components.map { $0.replacingOccurrences(of: "_", with: "-") }, context: key.context)
            })
        var providers: [any ConfigProvider] = [flags]
        // How each provider names where a key's value is, for messages.
        var labels: [@Sendable (String) -> String] = [{ "flag \(Self.flagName($0))" }]

        let prefix = "SWITCHBOARD_\(program.uppercased())_"
        let sharedVariables = Set(Self.sharedKeys.map { "SWITCHBOARD_" + Self.environmentName($0) })
        for variable in environment.keys.sorted() where variable.hasPrefix(prefix) && !Self.notKeys.contains(variable) {
            guard known.contains(where: { prefix + Self.environmentName($0) == variable }) || sharedVariables.contains(variable) else {
                throw ConfigurationError(
                    "environment \(variable): \(program) has no such setting (known: \(keys.map { prefix + Self.environmentName($0) }.sorted().joined(separator: ", ")))"
                )
            }
        }
        providers.append(
            EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: ConfigKey(["switchboard", program])))
        labels.append { "environment \(prefix)\(Self.environmentName($0))" }
        if !sharedHere.isEmpty {
            let variables = Set(sharedHere.map { "SWITCHBOARD_" + Self.environmentName($0) })
            let sharedEnvironment = environment.filter { variables.contains($0.key) }
            providers.append(
                EnvironmentVariablesProvider(environmentVariables: sharedEnvironment).prefixKeys(with: ConfigKey(["switchboard"])))
            labels.append { "environment SWITCHBOARD_\(Self.environmentName($0))" }
        }

        let path = ConfigReader(provider: flags).string(forKey: "config") ?? environment[Self.fileVariable]
        if let path, !path.isEmpty {
            let file = try JSONFile(path: path, program: program, known: known, shared: sharedHere, sectioned: sectioned)
            providers += file.providers
            let section = file.sectioned ? "\(program)." : ""
            labels.append { "file \(path) (\(section)\($0))" }
            if file.providers.count > 1 { labels.append { "file \(path) (\($0))" } }
        }
        sources = SourceRecorder(labels: labels)
        reader = ConfigReader(providers: providers, accessReporter: sources)
    }

    /// The command line with only the last of a flag given more than once, as ArgumentParser
    /// reads it (a later `--credit 4` wins over an earlier one); a list's flag (`--ca-file`,
    /// repeatable) keeps every value.
    static func lastOfEach(_ arguments: [String], except lists: Set<String>) -> [String] {
        var kept: [String] = []
        var index = arguments.startIndex
        var groups: [(flag: String?, words: [String])] = []
        while index < arguments.endIndex {
            let word = arguments[index]
            if word.hasPrefix("--") {
                groups.append((String(word.split(separator: "=", maxSplits: 1)[0]), [word]))
            } else if groups.isEmpty {
                groups.append((nil, [word]))
            } else {
                groups[groups.count - 1].words.append(word)
            }
            index += 1
        }
        let repeatable = Set(lists.map(flagName))
        var last: [String: Int] = [:]
        for (position, group) in groups.enumerated() { if let flag = group.flag { last[flag] = position } }
        for (position, group) in groups.enumerated() {
            if let flag = group.flag, !repeatable.contains(flag), last[flag] != position { continue }
            kept += group.words
        }
        return kept
    }

    /// `retention.max_age` → `RETENTION_MAX_AGE`.
    public static func environmentName(_ key: String) -> String {
        key.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    /// `retention.max_age` → `--retention-max-age`.
    public static func flagName(_ key: String) -> String {
        "--" + key.replacingOccurrences(of: ".", with: "-").replacingOccurrences(of: "_", with: "-")
    }

    /// Reads settings with `body`. A value that a source holds but cannot give as asked (`credit`
    /// `many`), and a `ConfigurationError` that `body` throws, come back naming the key and
    /// where its value came from; any other error `body` throws comes back as its description.
    public func read<T>(_ body: (ConfigReader) throws -> T) throws(ConfigurationError) -> T {
        sources.clearFailures()
        let result: Result<T, any Error>
        do {
            result = .success(try body(reader))
        } catch {
            result = .failure(error)
        }
        if let failure = sources.firstFailure() { throw failure }
        switch result {
        case .success(let value):
            return value
        case .failure(var error as ConfigurationError):
            if let key = error.key, error.source == nil { error.source = sources.source(of: key) }
            throw error
        case .failure(let error):
            throw ConfigurationError("\(error)")
        }
    }

    /// Where `key`'s value came from (`flag --credit`, `environment SWITCHBOARD_ETO_CREDIT`,
    /// `file /etc/switchboard.json (eto.credit)`), once it has been read; nil: its default.
    public func source(of key: String) -> String? {
        sources.source(of: key)
    }

    /// The help every program's `--config` shows, naming its section and variables.
    public static func help(program: String) -> String {
        """
        Settings come from, in rising order: defaults, a JSON file (--config FILE or \(fileVariable)), \
        the environment, flags. Key a.b_c is the flag --a-b-c, in the file {"\(program)": {"a": {"b_c": …}}} \
        and in the environment SWITCHBOARD_\(program.uppercased())_A_B_C.
        """
    }
}

/// Notes, for each key read, which source answered, and the values a source held but could not
/// give as asked (the reader falls back to the default for those: the program refuses them).
private final class SourceRecorder: AccessReporter {
    private struct State {
        var sources: [String: String] = [:]
        var failures: [ConfigurationError] = []
    }

    /// How each provider, in the reader's order, names where a key is.
    private let labels: [@Sendable (String) -> String]
    private let state = Mutex(State())

    init(labels: [@Sendable (String) -> String]) { self.labels = labels }

    func report(_ event: AccessEvent) {
        let key = event.metadata.key.components.joined(separator: ".")
        // The reader asks its providers in order and stops at the first that answers or fails.
        guard let index = event.providerResults.indices.last, index < labels.count else { return }
        var failure: ConfigurationError?
        var source: String?
        switch event.providerResults[index].result {
        case .success(let lookup):
            guard let value = lookup.value else { break }
            source = labels[index](key)
            if event.conversionError != nil {
                let shown = value.isSecret ? "the value" : "'\(value.content)'"
                failure = ConfigurationError(key: key, "\(shown) is not \(Self.expected(event.metadata.valueType))")
            }
        case .failure:
            source = labels[index](key)
            failure = ConfigurationError(key: key, "the value is not \(Self.expected(event.metadata.valueType))")
        }
        failure?.source = source
        state.withLock { state in
            state.sources[key] = source
            if let failure { state.failures.append(failure) }
        }
    }

    private static func expected(_ type: ConfigType) -> String {
        switch type {
        case .int: "an integer"
        case .double: "a number"
        case .bool: "true or false"
        case .string: "text"
        case .stringArray: "a list of texts"
        case .intArray: "a list of integers"
        default: "a \(type)"
        }
    }

    func source(of key: String) -> String? { state.withLock { $0.sources[key] } }
    func firstFailure() -> ConfigurationError? { state.withLock { $0.failures.first } }
    func clearFailures() { state.withLock { $0.failures.removeAll() } }
}

/// The configuration file, read once: its keys checked against the program's, its values served
/// by swift-configuration's `JSONSnapshot`.
private struct JSONFile {
    var providers: [any ConfigProvider]
    /// Whether the program's keys are in its section (else the whole file is its own).
    var sectioned: Bool

    init(
        path: String, program: String, known: Set<String>, shared: Set<String>, sectioned mustBeSectioned: Bool
    )
        throws(ConfigurationError)
    {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigurationError("cannot read configuration file \(path): \(error.localizedDescription)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ConfigurationError("configuration file \(path) is not a JSON object")
        }
        let snapshot: JSONSnapshot
        do {
            snapshot = try JSONSnapshot(data: data.bytes, providerName: "file", parsingOptions: .default)
        } catch {
            throw ConfigurationError("configuration file \(path): \(error)")
        }
        // A file for one program alone may leave out the section: `{"ingest": …}` for the broker.
        let sectioned = mustBeSectioned || object.keys.contains { ProgramConfiguration.programs.contains($0) }
        self.sectioned = sectioned
        if sectioned {
            for (key, value) in object {
                if ProgramConfiguration.programs.contains(key) {
                    guard value is [String: Any] else { throw ConfigurationError("configuration file \(path): '\(key)' must be an object") }
                    continue
                }
                guard ProgramConfiguration.sharedKeys.contains(key) else {
                    throw ConfigurationError(
                        "configuration file \(path): unknown key '\(key)' at the top (there: \(ProgramConfiguration.sharedKeys.joined(separator: ", ")) and a section per program: \(ProgramConfiguration.programs.joined(separator: ", ")))"
                    )
                }
            }
        }
        var flat: [String] = []
        Self.flatten(sectioned ? (object[program] as? [String: Any] ?? [:]) : object, prefix: "", into: &flat)
        for key in flat.sorted() where !known.contains(key) {
            let spelt = sectioned ? "\(program).\(key)" : key
            throw ConfigurationError(
                "configuration file \(path): unknown key '\(spelt)' (\(program) knows: \(known.sorted().joined(separator: ", ")))")
        }
        let whole = SnapshotProvider(parsed: snapshot, only: nil)
        if sectioned {
            providers = [whole.prefixKeys(with: ConfigKey([program]))]
            if !shared.isEmpty { providers.append(SnapshotProvider(parsed: snapshot, only: shared)) }
        } else {
            providers = [whole]
        }
    }

    private static func flatten(_ object: [String: Any], prefix: String, into flat: inout [String]) {
        for (key, value) in object {
            let full = prefix.isEmpty ? key : "\(prefix).\(key)"
            if let nested = value as? [String: Any] {
                flatten(nested, prefix: full, into: &flat)
            } else {
                flat.append(full)
            }
        }
    }
}

/// A parsed file as a provider, answering every key (`only` nil) or only the keys in `only`.
private struct SnapshotProvider: ConfigProvider {
    var parsed: JSONSnapshot
    var only: Set<String>?

    var providerName: String { parsed.providerName }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        if let only, !only.contains(key.components.joined(separator: ".")) {
            return LookupResult(encodedKey: key.description, value: nil)
        }
        do {
            return try parsed.value(forKey: key, type: type)
        } catch {
            // A file may write a value as a flag or a variable would, or the other way round:
            // `"credit": "8"` or `8`, `"max_frame_bytes": 1048576` or `"1MB"`, and a list as an
            // array or one comma-separated text (`"ca_file": "/etc/ca.pem"`).
            guard let converted = try? converting(forKey: key, to: type) else { throw error }
            return converted
        }
    }

    private func converting(forKey key: AbsoluteConfigKey, to type: ConfigType) throws -> LookupResult? {
        func text() throws -> (LookupResult, String)? {
            let result = try parsed.value(forKey: key, type: .string)
            guard case .string(let text)? = result.value?.content else { return nil }
            return (result, text)
        }
        func with(_ result: LookupResult, _ content: ConfigContent) -> LookupResult {
            var result = result
            result.value?.content = content
            return result
        }
        switch type {
        case .string:
            for other in [ConfigType.int, .double, .bool] {
                guard let result = try? parsed.value(forKey: key, type: other), let content = result.value?.content else { continue }
                switch content {
                case .int(let number): return with(result, .string(String(number)))
                case .double(let number): return with(result, .string(String(number)))
                case .bool(let flag): return with(result, .string(String(flag)))
                default: continue
                }
            }
            return nil
        case .int:
            guard let (result, text) = try text(), let number = Int(text) else { return nil }
            return with(result, .int(number))
        case .double:
            guard let (result, text) = try text(), let number = Double(text) else { return nil }
            return with(result, .double(number))
        case .bool:
            guard let (result, text) = try text(), let flag = Bool(text) else { return nil }
            return with(result, .bool(flag))
        case .stringArray:
            guard let (result, text) = try text() else { return nil }
            return with(result, .stringArray(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }))
        default:
            return nil
        }
    }

    func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    nonisolated(nonsending) func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws
            -> Return
    ) async throws -> Return {
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    func snapshot() -> any ConfigSnapshot { parsed }

    nonisolated(nonsending) func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchSnapshotFromSnapshot(updatesHandler: updatesHandler)
    }
}
