// How every monitor command finds the broker and who it is there: the same sources as every
// program (defaults < file < environment < flags), in the file's "monitor" section and the
// shared keys at its top; an endpoint none of them sets (nor broker_host) comes from what a
// local broker wrote to <data-dir>/broker/endpoints.json, as for the operator commands and the
// kiosk, so the monitor finds `switchboard up --port N`'s broker from up's directory.

import ArgumentParser
import Foundation
import Logging
import SwitchboardMonitor
import SwitchboardRuntime

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
    var dataDirectory = MonitorConfiguration.defaultDataDirectory
    @Option(help: "This monitor's (or an admin's) secret certificate, for a broker that runs CURVE (default: none).")
    var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's .cert file or public key (default: none).") var brokerKey: String?

    @Option(name: .customLong("log-format"), help: "text or json, for diagnostics on standard error (default text).")
    var logFormat: String?
    @Option(name: .customLong("log-level"), help: "Log level for diagnostics on standard error (default warning).") var logLevel: String?

    /// Reads the monitor's configuration (`MonitorConfiguration(reader:dataDirectory:)`, whose
    /// doc comment lists the keys) and sets up logging (default level warning), from one reader
    /// built once per run. Not in `validate()`: ArgumentParser gives `run()` only the parsed
    /// arguments, so what `validate()` read would be read again.
    func load() throws -> MonitorConfiguration {
        do {
            let configuration = try MonitorConfiguration.programConfiguration(
                arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            return try configuration.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader, defaultLevel: .warning)
                return try MonitorConfiguration(reader: reader, dataDirectory: dataDirectory)
            }
        } catch {
            // A certificate that cannot be read comes here too, as the reader's failure.
            throw ValidationError("\(error)")
        }
    }
}
