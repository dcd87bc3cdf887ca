// What `switchboard-eto` runs with: every worker's settings (`WorkerSettings`) and ETO's own,
// from the "eto" section of its configuration.

public import Configuration
public import SwitchboardRuntime

/// The ETO worker's settings, read from its configuration.
public struct ETOConfiguration: Sendable {
    /// Every key of the "eto" section: the workers' and ETO's.
    public static let keys = WorkerSettings.keys + ["url", "account", "touchpoint", "concurrency", "no_service", "no_group"]

    public static let defaultURL = "https://127.0.0.1:8480/API"
    public static let defaultAccount = "intake@riverside.example"
    public static let defaultConcurrency = 4

    /// What every worker reads (`WorkerSettings(reader:)`).
    public var worker: WorkerSettings
    /// `url`: ETO's API root, ending in /API (default https://127.0.0.1:8480/API).
    public var url: String
    /// `account`: the ETO account (e-mail) whose sessions auth hands out (default
    /// intake@riverside.example).
    public var account: String
    /// `touchpoint`: the TouchPoint configuration file (JSON; default: TouchPoint 54 of the seed).
    public var touchpointPath: String?
    /// `concurrency`: service requests answered at once, 1–64 (default 4).
    public var concurrency: Int
    /// `no_service`: record check-ins only, do not serve `eto` (default false).
    public var noService: Bool
    /// `no_group`: serve `eto` only, do not join the group `eto` (default false).
    public var noGroup: Bool

    /// ETO's configuration: the "eto" section, `SWITCHBOARD_ETO_*`, and the shared keys among
    /// `keys`.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(program: "eto", keys: keys, arguments: arguments, environment: environment)
    }

    /// Reads the ETO worker's settings.
    ///
    /// Keys read: every worker's (`WorkerSettings(reader:)`); `url` (an http(s) URL; default
    /// https://127.0.0.1:8480/API); `account` (default intake@riverside.example); `touchpoint`
    /// (a file; default TouchPoint 54 of the seed); `concurrency` (1–64, default 4);
    /// `no_service` and `no_group` (true or false, default false; not both).
    public init(reader: ConfigReader) throws(ConfigurationError) {
        noService = reader.bool(forKey: "no_service") ?? false
        noGroup = reader.bool(forKey: "no_group") ?? false
        guard !(noService && noGroup) else {
            throw ConfigurationError("no_service and no_group (--no-service, --no-group) together leave nothing to do")
        }
        worker = try WorkerSettings(reader: reader)
        url = try reader.url("url") ?? Self.defaultURL
        account = try reader.nonEmpty("account") ?? Self.defaultAccount
        touchpointPath = try reader.nonEmpty("touchpoint")
        concurrency = try reader.int("concurrency", default: Self.defaultConcurrency, in: 1...64)
    }
}
