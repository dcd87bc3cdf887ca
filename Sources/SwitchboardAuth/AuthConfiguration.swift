// What `switchboard-auth` runs with, from the "auth" section of its configuration. The accounts
// themselves (with their passwords) are not settings: `AuthAccounts.load` reads them from the
// file `accounts_file` names, or from SWITCHBOARD_AUTH_ACCOUNTS, never from a flag.

public import Configuration
public import SwitchboardObservability
public import SwitchboardRuntime

/// The auth service's settings, read from its configuration.
public struct AuthConfiguration: Sendable {
    /// Every key of the "auth" section.
    public static let keys =
        BrokerEndpoints.keys + [
            "accounts_file", "data_dir", "ca_file", "concurrency", "keep_alive", "certificate", "broker_key", "admin", "log_format",
            "log_level", "credentials_key_file",
        ]

    /// `data_dir` when not given: the directory `switchboard up` gives auth.
    public static let defaultDataDirectory = ".switchboard/auth/state"
    public static let defaultConcurrency = 4
    public static let defaultKeepAlive: Duration = .seconds(60)
    /// `admin` when not given: loopback at auth's admin port.
    public static let defaultAdmin = AdminAddress.loopback(AdminPort.auth.defaultPort)

    /// `broker_host`, `service`, `ingest` (and the other endpoints): the broker's service
    /// endpoint, where auth answers, and its ingest endpoint, for auth's events.
    public var endpoints = BrokerEndpoints()
    /// `accounts_file`: the accounts file (JSON, mode 0600; default none: then
    /// SWITCHBOARD_AUTH_ACCOUNTS holds the document).
    public var accountsFile: String?
    /// `data_dir`: the event outbox and the encrypted token file (default `.switchboard/auth/state`).
    public var dataDirectory = defaultDataDirectory
    /// `ca_file`: extra CA certificates (PEM) to trust for HTTPS (default none).
    public var caFiles: [String] = []
    /// `concurrency`: requests served at once, 1–64 (default 4).
    public var concurrency = defaultConcurrency
    /// `keep_alive`: time between checks that keep idle-clocked sessions alive, 1s–1d (default 1m).
    public var keepAlive = defaultKeepAlive
    /// `certificate`: this program's secret certificate (role auth), for a secure broker (default none).
    public var certificate: String?
    /// `broker_key`: the broker's public certificate or key (default none).
    public var brokerKey: String?
    /// `admin`: where /metrics and /health are served (`HOST:PORT`, or `none`: nil; default
    /// 127.0.0.1:9563).
    public var admin: AdminAddress? = defaultAdmin
    /// `credentials_key_file`: the key file that seals the token file (default
    /// `<data_dir>/credentials.key`; made 0600 if missing).
    public var credentialsKeyFile: String?

    public init() {}

    /// auth's configuration: the "auth" section, `SWITCHBOARD_AUTH_*` (but
    /// SWITCHBOARD_AUTH_ACCOUNTS, the accounts document), and the shared keys among `keys`.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(program: "auth", keys: keys, arguments: arguments, environment: environment)
    }

    /// Reads auth's settings over the defaults above.
    ///
    /// Keys read: `broker_host`, `service`, `ingest` (the broker's endpoints,
    /// `BrokerEndpoints(reader:)`: default 127.0.0.1 at the broker's ports); `accounts_file`
    /// (default none); `data_dir` (default `.switchboard/auth/state`); `ca_file` (a list; default
    /// none); `concurrency` (1–64, default 4); `keep_alive` (a duration, 1s–1d, default 1m);
    /// `certificate` and `broker_key` (default none); `admin` (`HOST:PORT` or `none`, default
    /// 127.0.0.1:9563); `credentials_key_file` (default `<data_dir>/credentials.key`). Logging
    /// (`log_format`, `log_level`) is `StructuredLogHandler.bootstrap(reader:)`'s.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        endpoints = try BrokerEndpoints(reader: reader)
        accountsFile = try reader.nonEmpty("accounts_file")
        dataDirectory = try reader.nonEmpty("data_dir") ?? Self.defaultDataDirectory
        caFiles = reader.stringArray(forKey: "ca_file")?.filter { !$0.isEmpty } ?? []
        concurrency = try reader.int("concurrency", default: Self.defaultConcurrency, in: 1...64)
        keepAlive = try reader.duration("keep_alive", default: Self.defaultKeepAlive, in: Duration.seconds(1)...Duration.seconds(86_400))
        certificate = try reader.nonEmpty("certificate")
        brokerKey = try reader.nonEmpty("broker_key")
        admin = try reader.address("admin", default: Self.defaultAdmin)
        credentialsKeyFile = try reader.nonEmpty("credentials_key_file")
    }
}
