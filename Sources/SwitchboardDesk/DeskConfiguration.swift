// What `switchboard-kiosk desk` reads beside the kiosk's settings (`KioskConfiguration`): the ETO
// site and program of its check-ins and where it serves the page. Keys of the same "kiosk"
// section of the configuration.

public import Configuration
public import SwitchboardObservability
public import SwitchboardRuntime

/// The front desk's own settings.
public struct DeskConfiguration: Sendable {
    /// The keys this type reads, in the kiosk's section.
    public static let keys = ["site_id", "program_id", "listen"]

    /// `listen` when not given: loopback.
    public static let defaultListen = AdminAddress.loopback(9580)

    /// `site_id`: the ETO site of this desk's check-ins (required, at least 1).
    public var siteID: Int64
    /// `program_id`: the ETO program of this desk's check-ins (required, at least 1).
    public var programID: Int64
    /// `listen`: where the page is served, `HOST:PORT` (default 127.0.0.1:9580). Anything but
    /// loopback needs TLS (`DeskListen.check`).
    public var listen: AdminAddress

    public init(siteID: Int64, programID: Int64, listen: AdminAddress = defaultListen) {
        self.siteID = siteID
        self.programID = programID
        self.listen = listen
    }

    /// Reads the desk's settings.
    ///
    /// Keys read: `site_id` and `program_id` (the ETO site and program of this desk's check-ins;
    /// required, positive); `listen` (`HOST:PORT` where the page is served; default
    /// 127.0.0.1:9580).
    public init(reader: ConfigReader) throws(ConfigurationError) {
        func id(_ key: String, _ what: String) throws(ConfigurationError) -> Int64 {
            guard let value = reader.int(forKey: ConfigKey(key)) else {
                throw ConfigurationError(
                    key: key, "is required (\(ProgramConfiguration.flagName(key))): the ETO \(what) of this desk's check-ins")
            }
            guard value >= 1 else { throw ConfigurationError(key: key, "\(value) is not a positive ETO id") }
            return Int64(value)
        }
        siteID = try id("site_id", "site")
        programID = try id("program_id", "program")
        listen = try reader.address("listen", default: Self.defaultListen, allowsNone: false) ?? Self.defaultListen
    }
}
