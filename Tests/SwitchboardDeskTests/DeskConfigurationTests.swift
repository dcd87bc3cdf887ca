import Foundation
import SwitchboardDesk
import SwitchboardKiosk
import SwitchboardObservability
import SwitchboardRuntime
import SwitchboardTesting
import Testing

@Suite("Desk configuration: its site, its program, where it listens")
struct DeskConfigurationTests {
    /// The desk's settings as `switchboard-kiosk desk FLAGS…` would read them.
    static func read(_ sources: ConfigurationSources) throws -> (DeskConfiguration, ProgramConfiguration) {
        try sources.read(
            program: "kiosk",
            { try KioskConfiguration.programConfiguration(arguments: $0, environment: $1, adding: DeskConfiguration.keys) }
        ) { configuration in
            (try configuration.read { try DeskConfiguration(reader: $0) }, configuration)
        }
    }

    @Test("site and program given, nothing else: the page on loopback 9580")
    func defaults() throws {
        let (settings, _) = try Self.read(ConfigurationSources(flags: ["--site-id", "101", "--program-id", "792"]))
        #expect(settings.siteID == 101)
        #expect(settings.programID == 792)
        #expect(settings.listen == AdminAddress(host: "127.0.0.1", port: 9580))
    }

    @Test("the file, then the environment, then a flag; each is named")
    func precedence() throws {
        var sources = ConfigurationSources(file: #"{"kiosk": {"site_id": 101, "program_id": "792", "listen": "127.0.0.1:7000"}}"#)
        var (settings, configuration) = try Self.read(sources)
        #expect(settings.siteID == 101 && settings.programID == 792)
        #expect(settings.listen.port == 7000)
        #expect(configuration.source(of: "site_id")?.hasSuffix("(kiosk.site_id)") == true)
        sources.environment = ["SWITCHBOARD_KIOSK_SITE_ID": "102", "SWITCHBOARD_KIOSK_LISTEN": "127.0.0.1:7001"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.siteID == 102)
        #expect(settings.listen.port == 7001)
        #expect(configuration.source(of: "site_id") == "environment SWITCHBOARD_KIOSK_SITE_ID")
        sources.flags = ["--site-id", "103", "--listen", "127.0.0.1:7002"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.siteID == 103)
        #expect(settings.programID == 792)
        #expect(settings.listen.port == 7002)
        #expect(configuration.source(of: "site_id") == "flag --site-id")
    }

    @Test(
        "a missing or bad value is refused naming the key and where it came from",
        arguments: [
            (ConfigurationSources(flags: ["--program-id", "792"]), "site_id: is required (--site-id)"),
            (ConfigurationSources(flags: ["--site-id", "101"]), "program_id: is required (--program-id)"),
            (
                ConfigurationSources(flags: ["--site-id", "0", "--program-id", "792"]),
                "site_id from flag --site-id: 0 is not a positive ETO id"
            ),
            (
                ConfigurationSources(environment: ["SWITCHBOARD_KIOSK_PROGRAM_ID": "many"], flags: ["--site-id", "1"]),
                "program_id from environment SWITCHBOARD_KIOSK_PROGRAM_ID: the value is not an integer"
            ),
            (
                ConfigurationSources(file: #"{"kiosk": {"listen": "none"}}"#, flags: ["--site-id", "1", "--program-id", "2"]),
                "must be HOST:PORT, got 'none'"
            ),
        ])
    func refusals(sources: ConfigurationSources, mentions: String) {
        do {
            _ = try Self.read(sources)
            Issue.record("accepted \(sources)")
        } catch {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }
}
