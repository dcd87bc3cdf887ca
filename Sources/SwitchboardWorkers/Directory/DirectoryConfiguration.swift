// What `switchboard-directory` runs with: every worker's settings (`WorkerSettings`) and the
// Directory syncer's own, from the "directory" section of its configuration.

public import Configuration
public import SwitchboardRuntime

/// The Directory worker's settings, read from its configuration.
public struct DirectoryConfiguration: Sendable {
    /// Every key of the "directory" section: the workers' and the syncer's (`add` and `delete`
    /// read the same section).
    public static let keys = WorkerSettings.keys + ["url", "account", "interval", "max_missing", "start_timeout"]

    public static let defaultURL = "https://127.0.0.1:8480/directory"
    public static let defaultAccount = "outreach-team"
    public static let defaultInterval: Duration = .seconds(30)
    public static let defaultMaxMissing = 0.5
    public static let defaultStartTimeout: Duration = .seconds(60)

    /// What every worker reads (`WorkerSettings(reader:)`).
    public var worker: WorkerSettings
    /// `url`: the Directory service root, ending in /directory (default
    /// https://127.0.0.1:8480/directory).
    public var url: String
    /// `account`: the Directory user whose people are synced (default outreach-team).
    public var account: String
    /// `interval`: time between two polls, 100ms–1d (default 30s).
    public var interval: Duration
    /// `max_missing`: the share of the last accepted list (0 < x ≤ 1) that may go missing in one
    /// poll before the list is held back as suspect (default 0.5).
    public var maxMissing: Double
    /// `start_timeout`: how long to keep trying to reach auth and the Directory at start, 1s–1h
    /// (default 1m).
    public var startTimeout: Duration

    /// The Directory worker's configuration: the "directory" section, `SWITCHBOARD_DIRECTORY_*`,
    /// and the shared keys among `keys`.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(program: "directory", keys: keys, arguments: arguments, environment: environment)
    }

    /// Reads the Directory worker's settings.
    ///
    /// Keys read: every worker's (`WorkerSettings(reader:)`); `url` (an http(s) URL; default
    /// https://127.0.0.1:8480/directory); `account` (default outreach-team); `interval` (100ms–1d,
    /// default 30s); `max_missing` (above 0, at most 1; default 0.5); `start_timeout` (1s–1h,
    /// default 1m).
    public init(reader: ConfigReader) throws(ConfigurationError) {
        maxMissing = reader.double(forKey: "max_missing") ?? Self.defaultMaxMissing
        guard maxMissing > 0, maxMissing <= 1 else {
            throw ConfigurationError(key: "max_missing", "must be above 0 and at most 1, got \(maxMissing)")
        }
        worker = try WorkerSettings(reader: reader)
        url = try reader.url("url") ?? Self.defaultURL
        account = try reader.nonEmpty("account") ?? Self.defaultAccount
        interval = try reader.duration("interval", default: Self.defaultInterval, in: Duration.milliseconds(100)...Duration.seconds(86_400))
        startTimeout = try reader.duration(
            "start_timeout", default: Self.defaultStartTimeout, in: Duration.seconds(1)...Duration.seconds(3600))
    }
}
