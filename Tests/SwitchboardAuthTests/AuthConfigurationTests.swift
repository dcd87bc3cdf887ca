import Foundation
import SwitchboardAuth
import SwitchboardObservability
import SwitchboardRuntime
import SwitchboardTesting
import Testing

@Suite("Auth configuration")
struct AuthConfigurationTests {
    /// auth's settings as `switchboard-auth FLAGS…` would read them.
    static func read(_ sources: ConfigurationSources) throws -> (AuthConfiguration, ProgramConfiguration) {
        try sources.read(program: "auth", AuthConfiguration.programConfiguration) { configuration in
            (try configuration.read { try AuthConfiguration(reader: $0) }, configuration)
        }
    }

    @Test("nothing given: the defaults its --help shows")
    func defaults() throws {
        let (settings, _) = try Self.read(ConfigurationSources())
        #expect(settings.endpoints == BrokerEndpoints())
        #expect(settings.accountsFile == nil)
        #expect(settings.dataDirectory == ".switchboard/auth/state")
        #expect(settings.caFiles.isEmpty)
        #expect(settings.concurrency == 4)
        #expect(settings.keepAlive == .seconds(60))
        #expect(settings.certificate == nil && settings.brokerKey == nil)
        #expect(settings.admin == AdminAddress(host: "127.0.0.1", port: 9563))
        #expect(settings.credentialsKeyFile == nil)
    }

    @Test("the file, then the environment, then a flag; each is named; the accounts variable is no key")
    func precedence() throws {
        var sources = ConfigurationSources(
            file: #"{"admin": "none", "auth": {"concurrency": 8, "keep_alive": "5m", "ca_file": ["/a.pem", "/b.pem"]}}"#,
            environment: ["SWITCHBOARD_AUTH_ACCOUNTS": #"{"accounts": []}"#])
        var (settings, configuration) = try Self.read(sources)
        #expect(settings.concurrency == 8)
        #expect(settings.keepAlive == .seconds(300))
        #expect(settings.caFiles == ["/a.pem", "/b.pem"])
        #expect(settings.admin == nil)
        #expect(configuration.source(of: "concurrency")?.hasSuffix("(auth.concurrency)") == true)
        sources.environment["SWITCHBOARD_AUTH_CONCURRENCY"] = "16"
        sources.environment["SWITCHBOARD_ADMIN"] = "127.0.0.1:7563"
        (settings, configuration) = try Self.read(sources)
        #expect(settings.concurrency == 16)
        #expect(settings.admin == AdminAddress(host: "127.0.0.1", port: 7563))
        #expect(configuration.source(of: "concurrency") == "environment SWITCHBOARD_AUTH_CONCURRENCY")
        sources.flags = ["--concurrency", "2", "--data-dir", "/srv/auth", "--credentials-key-file", "/etc/auth.key"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.concurrency == 2)
        #expect(settings.dataDirectory == "/srv/auth")
        #expect(settings.credentialsKeyFile == "/etc/auth.key")
        #expect(configuration.source(of: "concurrency") == "flag --concurrency")
    }

    @Test(
        "a bad value is refused naming the key and where it came from",
        arguments: [
            (
                ConfigurationSources(flags: ["--concurrency", "65"]),
                "concurrency from flag --concurrency: must be 1–64, got 65"
            ),
            (
                ConfigurationSources(environment: ["SWITCHBOARD_AUTH_KEEP_ALIVE": "60"]),
                "keep_alive from environment SWITCHBOARD_AUTH_KEEP_ALIVE: must be a duration"
            ),
            (ConfigurationSources(file: #"{"auth": {"admin": "9563"}}"#), "admin from file"),
            (ConfigurationSources(file: #"{"auth": {"accounts": "/x"}}"#), "unknown key 'auth.accounts'"),
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
