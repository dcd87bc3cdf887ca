// How every monitor command finds the broker and who it is there: the same sources as every
// program (defaults < file < environment < flags), in the file's "monitor" section and the
// shared keys at its top; an endpoint none of them sets (nor broker_host) comes from what a
// local broker wrote to <data-dir>/broker/endpoints.json, as for the operator commands and the
// kiosk, so the monitor finds `switchboard up --port N`'s broker from up's directory.

import ArgumentParser
import Configuration
import Foundation
import Logging
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

struct MonitorConnection: ParsableArguments {
    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"monitor\" section, and the shared keys at its top.")
    var config: String?
    @Option(
        name: .customLong("broker-host"), help: "The broker's host name or address: its endpoints at the default ports (default 127.0.0.1)."
    )
    var brokerHost: String?
    @Option(help: "The broker's fan-out endpoint (default tcp://<broker-host>:5561).") var fanout: String?
    @Option(help: "The broker's replay endpoint (default tcp://<broker-host>:5562).") var replay: String?
    @Option(help: "The broker's consumer-group endpoint (default tcp://<broker-host>:5564).") var groups: String?
    @Option(help: "The broker's service endpoint, for services and workers (default tcp://<broker-host>:5563).") var service: String?
    @Option(
        name: .customLong("data-dir"),
        help:
            "Where `switchboard up` keeps its state: an endpoint not given by flag, environment, file or --broker-host comes from its broker/endpoints.json."
    )
    var dataDirectory = ".switchboard"
    @Option(help: "This monitor's (or an admin's) secret certificate, for a broker that runs CURVE.") var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's .cert file or public key.") var brokerKey: String?

    @Option(name: .customLong("log-format"), help: "text or json, for diagnostics on standard error (default text).")
    var logFormat: String?
    @Option(name: .customLong("log-level"), help: "Log level for diagnostics on standard error (default warning).") var logLevel: String?

    /// Every key of the monitor's configuration (`listen` is `web`'s). Each option here is one of
    /// them (`broker_host` is `--broker-host`), read through the monitor's `ConfigReader`, where a
    /// flag is the top source; `--data-dir` is not a key.
    static let keys = [
        "broker_host", "fanout", "replay", "groups", "service", "certificate", "broker_key", "listen", "log_format", "log_level",
    ]

    struct Settings {
        var configuration: ProgramConfiguration
        var endpoints: BrokerEndpoints
        var credentials: ClientCredentials?
        var socketOptions: [SocketOption] { credentials?.socketOptions ?? [] }
    }

    /// Reads the monitor's configuration and sets up logging (once per process).
    ///
    /// Keys read: the broker's endpoints (`BrokerEndpoints(reader:dataDirectory:)`),
    /// `certificate` and `broker_key`, `log_format` and `log_level` (default warning).
    func settings() throws -> Settings {
        do {
            let configuration = try ProgramConfiguration(
                program: "monitor", keys: Self.keys, arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            return try configuration.read { reader in
                let credentials = try ClientCredentials.load(
                    certificate: try reader.nonEmpty("certificate"), brokerKey: try reader.nonEmpty("broker_key"))
                return Settings(
                    configuration: configuration, endpoints: try BrokerEndpoints(reader: reader, dataDirectory: dataDirectory),
                    credentials: credentials)
            }
        } catch {
            // A certificate that cannot be read comes here too, as the reader's failure.
            throw ValidationError(error.description)
        }
    }

    /// Sets up logging as the configuration says (default level warning).
    func bootstrapLogging() throws {
        do {
            try settings().configuration.read { reader in try StructuredLogHandler.bootstrap(reader: reader, defaultLevel: .warning) }
        } catch let failure as ConfigurationError {
            throw ValidationError(failure.description)
        }
    }

    func validate() throws {
        _ = try settings()
    }
}
