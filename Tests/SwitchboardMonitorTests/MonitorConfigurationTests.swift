import Foundation
import SwitchboardMonitor
import SwitchboardObservability
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardTesting
import Testing

@Suite("Monitor configuration: the broker's endpoints and keys, and where `web` listens")
struct MonitorConfigurationTests {
    /// The monitor's settings as `switchboard-monitor FLAGS…` would read them, with no `up` beside it.
    static func read(_ sources: ConfigurationSources) throws -> (MonitorConfiguration, ProgramConfiguration) {
        let directory = try TemporaryDirectory("monitor")
        defer { directory.remove() }
        return try sources.read(program: "monitor", MonitorConfiguration.programConfiguration) { configuration in
            (try configuration.read { try MonitorConfiguration(reader: $0, dataDirectory: directory.path) }, configuration)
        }
    }

    @Test("nothing given: the broker's ports on 127.0.0.1, no keys, the dashboard on loopback 9570")
    func defaults() throws {
        let (settings, _) = try Self.read(ConfigurationSources())
        #expect(settings.connection.endpoints == BrokerEndpoints())
        #expect(settings.connection.credentials == nil)
        #expect(settings.listen == AdminAddress(host: "127.0.0.1", port: 9570))
    }

    @Test("the file, then the shared variable, then the monitor's, then a flag; each is named")
    func precedence() throws {
        var sources = ConfigurationSources(
            file: #"{"broker_host": "bus.example", "monitor": {"listen": "127.0.0.1:7000", "fanout": "tcp://file.example:5561"}}"#)
        var (settings, configuration) = try Self.read(sources)
        #expect(settings.listen == AdminAddress(host: "127.0.0.1", port: 7000))
        #expect(settings.connection.endpoints.fanout == "tcp://file.example:5561")
        #expect(settings.connection.endpoints.replay == "tcp://bus.example:5562")
        #expect(configuration.source(of: "listen")?.hasSuffix("(monitor.listen)") == true)
        sources.environment = ["SWITCHBOARD_BROKER_HOST": "shared.example", "SWITCHBOARD_MONITOR_LISTEN": "127.0.0.1:7001"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.connection.endpoints.replay == "tcp://shared.example:5562")
        #expect(settings.listen.port == 7001)
        #expect(configuration.source(of: "listen") == "environment SWITCHBOARD_MONITOR_LISTEN")
        sources.flags = ["--listen", "[::1]:7002", "--fanout", "tcp://flag.example:5561"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.listen == AdminAddress(host: "::1", port: 7002))
        #expect(settings.connection.endpoints.fanout == "tcp://flag.example:5561")
        #expect(configuration.source(of: "listen") == "flag --listen")
    }

    @Test(
        "a bad value is refused naming the key and where it came from",
        arguments: [
            (ConfigurationSources(flags: ["--listen", "none"]), "listen from flag --listen: must be HOST:PORT, got 'none'"),
            (
                ConfigurationSources(environment: ["SWITCHBOARD_MONITOR_LISTEN": "127.0.0.1:99999"]),
                "listen from environment SWITCHBOARD_MONITOR_LISTEN: the port of '127.0.0.1:99999' must be a number"
            ),
            (ConfigurationSources(file: #"{"monitor": {"replay": "replay.example"}}"#), "replay from file"),
            (ConfigurationSources(environment: ["SWITCHBOARD_MONITOR_INGEST": "tcp://x:1"]), "monitor has no such setting"),
            (ConfigurationSources(flags: ["--broker-key", "broker.cert"]), "a broker key was given but no certificate"),
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
