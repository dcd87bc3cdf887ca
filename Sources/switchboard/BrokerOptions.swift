import ArgumentParser
import Foundation
import SwitchboardBus
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

/// How the operator commands (`status`, `groups`, `dlq`, `auth check`) find a broker and the
/// keys to reach it: `OperatorConfiguration(reader:dataDirectory:insecure:)` lists the keys and
/// where each comes from when not given. Each option but `--data-dir`, `--timeout` and
/// `--insecure` is a key of the "operator" section (`broker_host` is `--broker-host`; `service` is
/// `status`'s and `auth check`'s `--service`), read through its `ConfigReader`, where a flag is the
/// top source; they are declared here for `--help` and so that a misspelt flag is refused.
///
/// The reader is built once per run, in `load()`, not in `validate()`: ArgumentParser's
/// `validate()` cannot hand what it read to `run()` (a command's stored properties are its
/// parsed arguments), so `validate()` checks only the flags that are no keys.
struct BrokerOptions: ParsableArguments {
    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"operator\" section, and the shared keys at its top.")
    var config: String?
    @Option(
        name: .customLong("broker-host"), help: "The broker's host name or address: its endpoints at the default ports (default 127.0.0.1)."
    )
    var brokerHost: String?
    @Option(
        help: ArgumentHelp(
            "The broker's consumer-group endpoint (default: <data-dir>/broker/endpoints.json's, else tcp://<broker-host>:5564).",
            valueName: "endpoint"))
    var groups: String?
    @Option(name: .customLong("data-dir"), help: "Where `switchboard up` keeps its state: its endpoints file and operator key.")
    var dataDirectory = OperatorConfiguration.defaultDataDirectory
    @Option(help: "How long to wait for the broker.") var timeout = "3s"
    @Option(help: "A secret certificate (an admin's for changes), for a broker that runs CURVE (default: the operator key of up).")
    var certificate: String?
    @Option(
        name: .customLong("broker-key"), help: "The broker's .cert file or public key (default: up's broker.cert with its operator key).")
    var brokerKey: String?
    @Flag(help: "Connect without CURVE, even where keys are found: for a broker run with --insecure.") var insecure = false

    func validate() throws {
        if insecure {
            guard certificate == nil && brokerKey == nil else {
                throw ValidationError("--insecure connects without keys: give it, or --certificate and --broker-key, not both")
            }
        }
        guard let wait = DurationText.parse(timeout), wait > .zero else {
            throw ValidationError("--timeout: '\(timeout)' is not a duration (3s, 500ms)")
        }
    }

    var wait: Duration { DurationText.parse(timeout) ?? .seconds(3) }

    /// Reads the operator's configuration: once per run.
    func load() throws -> OperatorConfiguration {
        do {
            let configuration = try OperatorConfiguration.programConfiguration(
                arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            return try configuration.read { reader in
                try OperatorConfiguration(reader: reader, dataDirectory: dataDirectory, insecure: insecure)
            }
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// Runs `body` with a client of the groups endpoint. A refusal or a silent broker is
    /// printed to standard error as `<command>: <what went wrong>` and ends the command with
    /// exit status 1.
    func withGroups<T>(_ command: String, _ body: (GroupAdminClient) async throws -> T) async throws -> T {
        let connection = try load().connection
        let (options, groupsEndpoint) = (connection.socketOptions, connection.endpoints.groups)
        let result: Result<T, any Error>
        do {
            result = .success(
                try await IOThread.withIOThread { io in
                    try await body(
                        GroupAdminClient(io: io, endpoint: groupsEndpoint, settings: .init(timeout: wait, socketOptions: options)))
                })
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let value):
            return value
        case .failure(let error as GroupAdminError):
            FileHandle.standardError.write(Data("\(command): \(Self.explain(error, usedKeys: !options.isEmpty))\n".utf8))
            throw ExitCode(1)
        case .failure(let error):
            throw error
        }
    }

    /// The error, with what an operator can do about it where that is clear.
    static func explain(_ error: GroupAdminError, usedKeys: Bool) -> String {
        switch (error.kind, error.status) {
        case (.timeout, _):
            let keys =
                usedKeys
                ? "if it is, check that its key is the one given and that this certificate is on its allow-list"
                : "if it runs CURVE, give --certificate and --broker-key"
            return "\(error). Is a broker running there? \(keys.prefix(1).uppercased() + keys.dropFirst())."
        case (.refused, 403?):
            return "\(error); this needs an admin certificate (--certificate)"
        default:
            return error.description
        }
    }
}

/// Columns padded to their widest cell, two spaces apart, trailing spaces trimmed.
enum TextTable {
    static func render(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        var text = ""
        for row in all {
            let cells = row.enumerated().map { column, cell in cell.padding(toLength: widths[column], withPad: " ", startingAt: 0) }
            text += cells.joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        }
        return text
    }
}

/// JSON for people and scripts alike: pretty, keys sorted, slashes as they are.
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}
