import ArgumentParser
import Foundation
import SwitchboardBus
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

/// How the operator commands (`status`, `groups`, `dlq`) find a broker and the keys to reach it.
///
/// Endpoints: the flag, the environment or the configuration file (section "operator", then the
/// shared keys), else what a local broker wrote to `<data-dir>/broker/endpoints.json`, else the
/// broker's default. Keys: `certificate` and `broker_key` from the same sources, else the operator
/// key `switchboard up` made under `<data-dir>/keys`, else none; `--insecure` uses none. Each
/// option but `--data-dir`, `--timeout` and `--insecure` is a key of the "operator" section
/// (`broker_host` is `--broker-host`; `service` is `status`'s and `auth check`'s `--service`),
/// read through its `ConfigReader`, where a flag is the top source.
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
    var dataDirectory = ".switchboard"
    @Option(help: "How long to wait for the broker.") var timeout = "3s"
    @Option(help: "A secret certificate (an admin's for changes), for a broker that runs CURVE (default: the operator key of up).")
    var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's .cert file or public key.") var brokerKey: String?
    @Flag(help: "Connect without CURVE, even where keys are found: for a broker run with --insecure.") var insecure = false

    static let keys = ["broker_host", "groups", "service", "certificate", "broker_key"]

    struct Settings {
        var endpoints: BrokerEndpoints
        var certificate: String?
        var brokerKey: String?
    }

    /// The operator section's settings.
    ///
    /// Keys read: the broker's endpoints (`BrokerEndpoints(reader:dataDirectory:)`),
    /// `certificate`, `broker_key`.
    func settings() throws -> Settings {
        do {
            let configuration = try ProgramConfiguration(
                program: "operator", keys: Self.keys, arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            return try configuration.read { reader in
                Settings(
                    endpoints: try BrokerEndpoints(reader: reader, dataDirectory: dataDirectory),
                    certificate: try reader.nonEmpty("certificate"), brokerKey: try reader.nonEmpty("broker_key"))
            }
        } catch {
            throw ValidationError("\(error)")
        }
    }

    func validate() throws {
        let settings = try settings()
        if insecure {
            guard certificate == nil && brokerKey == nil else {
                throw ValidationError("--insecure connects without keys: give it, or --certificate and --broker-key, not both")
            }
        } else {
            do {
                _ = try ClientCredentials.load(certificate: settings.certificate, brokerKey: settings.brokerKey)
            } catch let failure as Certificate.Failure {
                throw ValidationError(failure.description)
            } catch {
                throw ValidationError("\(error)")
            }
        }
        guard let wait = DurationText.parse(timeout), wait > .zero else {
            throw ValidationError("--timeout: '\(timeout)' is not a duration (3s, 500ms)")
        }
    }

    var wait: Duration { DurationText.parse(timeout) ?? .seconds(3) }

    /// From the settings; else the operator key `switchboard up` made, if any.
    func credentials() throws -> ClientCredentials? {
        if insecure { return nil }
        let settings = try settings()
        if let given = try ClientCredentials.load(certificate: settings.certificate, brokerKey: settings.brokerKey) {
            return given
        }
        let secrets = URL(fileURLWithPath: dataDirectory).appendingPathComponent("keys/secrets")
        let operatorSecret = secrets.appendingPathComponent("operator.secret").path
        let brokerCertificate = secrets.appendingPathComponent("broker.cert").path
        guard FileManager.default.fileExists(atPath: operatorSecret), FileManager.default.fileExists(atPath: brokerCertificate) else {
            return nil
        }
        return try ClientCredentials.load(certificate: operatorSecret, brokerKey: brokerCertificate)
    }

    /// The broker's endpoints by the shared rule `BrokerEndpoints(reader:dataDirectory:)`: the
    /// settings, else `<data-dir>/broker/endpoints.json`'s, else the broker's default.
    /// `validate()` has checked the settings, so a failure here cannot happen and falls back to
    /// the defaults.
    var endpoints: BrokerEndpoints {
        (try? settings().endpoints) ?? BrokerEndpoints()
    }

    var groupsEndpoint: String {
        endpoints.groups
    }

    /// Runs `body` with a client of the groups endpoint. A refusal or a silent broker is
    /// printed to standard error as `<command>: <what went wrong>` and ends the command with
    /// exit status 1.
    func withGroups<T>(_ command: String, _ body: (GroupAdminClient) async throws -> T) async throws -> T {
        let options = try credentials()?.socketOptions ?? []
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
