// What `switchboard-filemaker` runs with: every worker's settings (`WorkerSettings`) and
// FileMaker's own, from the "filemaker" section of its configuration.

public import Configuration
public import SwitchboardRuntime

/// The FileMaker worker's settings, read from its configuration.
public struct FileMakerConfiguration: Sendable {
    /// Every key of the "filemaker" section: the workers' and FileMaker's.
    public static let keys = WorkerSettings.keys + ["url", "database", "account", "mapping", "start_timeout", "participants_layout"]

    public static let defaultURL = "https://127.0.0.1:8480"
    public static let defaultDatabase = "Shelter"
    public static let defaultAccount = "switchboard"
    public static let defaultStartTimeout: Duration = .seconds(60)

    /// What every worker reads (`WorkerSettings(reader:)`).
    public var worker: WorkerSettings
    /// `url`: the FileMaker server's base URL, `https://host[:port]` (default https://127.0.0.1:8480).
    public var url: String
    /// `database`: the database (file) name (default Shelter).
    public var database: String
    /// `account`: the account whose session auth hands out (default switchboard).
    public var account: String
    /// `mapping`: the mapping file (JSON; default: the seed's layouts and fields).
    public var mappingPath: String?
    /// `start_timeout`: how long to keep trying to reach auth and FileMaker at start, 1s–1h
    /// (default 1m).
    public var startTimeout: Duration
    /// `participants_layout`: the layout walk-ins are mirrored into, over the mapping's, or
    /// `none`: no mirror (default: the mapping's `participants.layout`).
    public var participantsLayout: String?

    /// FileMaker's configuration: the "filemaker" section, `SWITCHBOARD_FILEMAKER_*`, and the
    /// shared keys among `keys`.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(program: "filemaker", keys: keys, arguments: arguments, environment: environment)
    }

    /// Reads the FileMaker worker's settings.
    ///
    /// Keys read: every worker's (`WorkerSettings(reader:)`); `url` (an http(s) URL; default
    /// https://127.0.0.1:8480); `database` (default Shelter); `account` (default switchboard);
    /// `mapping` (a file; default the seed's layouts); `start_timeout` (1s–1h, default 1m);
    /// `participants_layout` (a layout or `none`; default the mapping's).
    public init(reader: ConfigReader) throws(ConfigurationError) {
        worker = try WorkerSettings(reader: reader)
        url = try reader.url("url") ?? Self.defaultURL
        database = try reader.nonEmpty("database") ?? Self.defaultDatabase
        account = try reader.nonEmpty("account") ?? Self.defaultAccount
        mappingPath = try reader.nonEmpty("mapping")
        startTimeout = try reader.duration(
            "start_timeout", default: Self.defaultStartTimeout, in: Duration.seconds(1)...Duration.seconds(3600))
        participantsLayout = try reader.nonEmpty("participants_layout")
    }
}
