// What every `switchboard-kiosk` command runs with: who the kiosk is, where its outbox is, how it
// reaches the broker, and where `serve`, `demo` and `desk` serve /metrics and /health. One
// "kiosk" section of the configuration for every subcommand; the desk's own keys are
// SwitchboardDesk's `DeskConfiguration`.

public import Configuration
import Foundation
public import SwitchboardObservability
import SwitchboardProtocol
public import SwitchboardRuntime
public import SwitchboardSecurity

/// The kiosk's settings, read from its configuration.
public struct KioskConfiguration: Sendable {
    /// The keys this type reads, with logging's; the kiosk program knows the desk's too
    /// (`programConfiguration(arguments:environment:adding:)`).
    public static let keys = [
        "id", "data_dir", "broker_host", "ingest", "service", "outbox", "certificate", "broker_key", "admin", "log_format", "log_level",
    ]

    /// `data_dir` when not given: the directory `switchboard up` keeps its state in.
    public static let defaultDataDirectory = ".switchboard"
    /// `admin` when not given: loopback at the kiosk's admin port.
    public static let defaultAdmin = AdminAddress.loopback(AdminPort.kiosk.defaultPort)

    /// `id`: this kiosk's producer name, e.g. `riverside-1` (default: the certificate's principal,
    /// else `kiosk-<host>`). With a certificate it must be the certificate's principal.
    public var id: String
    /// `data_dir`: where `switchboard up` keeps its state: the endpoints its broker wrote
    /// (`broker/endpoints.json`) and the default outbox (default `.switchboard`).
    public var dataDirectory: String
    /// `broker_host`, `ingest`, `service`, `certificate`, `broker_key`: how the broker is reached.
    public var connection: BrokerConnection
    /// `outbox`: the outbox file (default `<data_dir>/kiosk/<id>/outbox.sqlite`).
    public var outboxPath: String
    /// `admin`: where `serve`, `demo` and `desk` serve /metrics and /health (`HOST:PORT`, or
    /// `none`: nil; default 127.0.0.1:9561).
    public var admin: AdminAddress?

    /// The kiosk program's configuration: the "kiosk" section, `SWITCHBOARD_KIOSK_*`, and the
    /// shared keys it knows.
    /// - Parameter others: the keys of the program's other settings in the same section (the
    ///   desk's, `DeskConfiguration.keys`), so that none of them is refused as unknown.
    public static func programConfiguration(
        arguments: [String], environment: [String: String], adding others: [String] = []
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(program: "kiosk", keys: keys + others, arguments: arguments, environment: environment)
    }

    /// Reads the kiosk's settings.
    ///
    /// Keys read: `id` (this kiosk's producer name, 1–64 of A–Z a–z 0–9 . _ : -; default the
    /// certificate's principal, else `kiosk-<host>`); `data_dir` (default `.switchboard`);
    /// `broker_host`, `ingest`, `service` (the broker's endpoints: default what a local broker
    /// wrote to `<data_dir>/broker/endpoints.json`, else 127.0.0.1 at the broker's ports);
    /// `certificate` and `broker_key` (this kiosk's secret certificate and the broker's key, both
    /// or neither; default neither); `outbox` (default `<data_dir>/kiosk/<id>/outbox.sqlite`);
    /// `admin` (`HOST:PORT` or `none`; default 127.0.0.1:9561). Logging (`log_format`,
    /// `log_level`; default level warning) is `StructuredLogHandler.bootstrap(reader:defaultLevel:)`'s.
    ///
    /// - Parameter host: this machine's name, for the default id (nil: `ProcessInfo`'s).
    public init(reader: ConfigReader, host: String? = nil) throws(ConfigurationError) {
        dataDirectory = try reader.nonEmpty("data_dir") ?? Self.defaultDataDirectory
        connection = try BrokerConnection(reader: reader, dataDirectory: dataDirectory)
        let given = try reader.nonEmpty("id")
        let principal = connection.credentials?.certificate.name
        if let given, let principal, given != principal {
            throw ConfigurationError(
                key: "id", "'\(given)' differs from the certificate's principal '\(principal)'; the broker would refuse its check-ins")
        }
        // With a certificate, the kiosk is the principal it names (the broker checks it).
        let shortHost = (host ?? ProcessInfo.processInfo.hostName).split(separator: ".").first.map(String.init) ?? "local"
        id = given ?? principal ?? "kiosk-" + String(shortHost.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "-" }.prefix(50))
        guard Producer.isValid(id) else {
            throw ConfigurationError(key: "id", "'\(id)' must be 1–64 characters of A–Z a–z 0–9 . _ : -")
        }
        outboxPath = try reader.nonEmpty("outbox") ?? (dataDirectory as NSString).appendingPathComponent("kiosk/\(id)/outbox.sqlite")
        admin = try reader.address("admin", default: Self.defaultAdmin)
    }
}
