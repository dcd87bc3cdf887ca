// What every `switchboard-monitor` command runs with: how it reaches the broker, and where `web`
// serves the dashboard. One "monitor" section of the configuration for every subcommand.

public import Configuration
public import SwitchboardObservability
public import SwitchboardRuntime
public import SwitchboardSecurity

/// The monitor's settings, read from its configuration.
public struct MonitorConfiguration: Sendable {
    /// Every key of the "monitor" section (`listen` is `web`'s). `--data-dir` is a flag, not a key.
    public static let keys = [
        "broker_host", "fanout", "replay", "groups", "service", "certificate", "broker_key", "listen", "log_format", "log_level",
    ]

    /// Where `web` serves the dashboard when `listen` is not given: loopback.
    public static let defaultListen = AdminAddress.loopback(9570)
    /// Where `switchboard up` keeps its state when `--data-dir` is not given.
    public static let defaultDataDirectory = ".switchboard"

    /// `broker_host`, `fanout`, `replay`, `groups`, `service`; `certificate`, `broker_key`.
    public var connection: BrokerConnection
    /// `listen`: where `web` serves the dashboard (default 127.0.0.1:9570).
    public var listen: AdminAddress

    public init(connection: BrokerConnection = BrokerConnection(), listen: AdminAddress = defaultListen) {
        self.connection = connection
        self.listen = listen
    }

    /// The monitor's configuration: the "monitor" section, `SWITCHBOARD_MONITOR_*`, and the
    /// shared keys among `keys`.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(program: "monitor", keys: keys, arguments: arguments, environment: environment)
    }

    /// Reads the monitor's settings.
    ///
    /// Keys read: `broker_host`, `fanout`, `replay`, `groups`, `service` (the broker's endpoints:
    /// default what a local broker wrote to `<dataDirectory>/broker/endpoints.json`, else
    /// 127.0.0.1 at the broker's ports); `certificate` and `broker_key` (this monitor's or an
    /// admin's secret certificate and the broker's key, both or neither; default neither);
    /// `listen` (`HOST:PORT` where `web` serves the dashboard; default 127.0.0.1:9570). Logging
    /// (`log_format`, `log_level`; default level warning) is
    /// `StructuredLogHandler.bootstrap(reader:defaultLevel:)`'s.
    ///
    /// - Parameter dataDirectory: `switchboard up`'s data directory (`--data-dir`).
    public init(reader: ConfigReader, dataDirectory: String = defaultDataDirectory) throws(ConfigurationError) {
        connection = try BrokerConnection(reader: reader, dataDirectory: dataDirectory)
        listen = try reader.address("listen", default: Self.defaultListen, allowsNone: false) ?? Self.defaultListen
    }
}
