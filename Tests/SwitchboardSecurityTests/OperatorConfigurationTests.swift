import Foundation
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("Operator configuration: the broker's endpoints and keys, else up's")
struct OperatorConfigurationTests {
    /// The operator commands' settings as `switchboard status FLAGS…` would read them beside
    /// `dataDirectory`.
    static func read(
        _ sources: ConfigurationSources, dataDirectory: String, insecure: Bool = false
    ) throws -> (OperatorConfiguration, ProgramConfiguration) {
        try sources.read(program: "operator", OperatorConfiguration.programConfiguration) { configuration in
            (
                try configuration.read { try OperatorConfiguration(reader: $0, dataDirectory: dataDirectory, insecure: insecure) },
                configuration
            )
        }
    }

    /// What `body` was refused with.
    static func refusal(_ body: () throws -> Any) -> String {
        do {
            _ = try body()
            return "accepted"
        } catch {
            return "\(error)"
        }
    }

    /// A broker certificate and an admin's, written where `switchboard up` keeps them.
    static func upKeys(in directory: TemporaryDirectory) throws {
        let secrets = directory.path("keys/secrets")
        try Certificate(name: "operator", role: .admin, keys: try CurveKeyPair.generate()).write(to: secrets)
        try Certificate(name: "broker", role: .broker, keys: try CurveKeyPair.generate()).write(to: secrets)
    }

    @Test("with nothing given and no up beside it: 127.0.0.1 at the broker's ports, no keys")
    func defaults() throws {
        let directory = try TemporaryDirectory("operator")
        defer { directory.remove() }
        let (settings, _) = try Self.read(ConfigurationSources(), dataDirectory: directory.path)
        #expect(settings.connection.endpoints == BrokerEndpoints())
        #expect(settings.connection.credentials == nil)
        #expect(settings.connection.socketOptions.isEmpty)
    }

    @Test("up's data directory gives the endpoints its broker wrote and its operator key; --insecure takes no key")
    func fromUp() throws {
        let directory = try TemporaryDirectory("operator")
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.path("broker"), withIntermediateDirectories: true)
        try #"{"groups": "tcp://127.0.0.1:7564", "service": "tcp://127.0.0.1:7563"}"#.write(
            toFile: directory.path("broker/endpoints.json"), atomically: true, encoding: .utf8)
        try Self.upKeys(in: directory)
        var (settings, _) = try Self.read(ConfigurationSources(), dataDirectory: directory.path)
        #expect(settings.connection.endpoints.groups == "tcp://127.0.0.1:7564")
        #expect(settings.connection.endpoints.service == "tcp://127.0.0.1:7563")
        #expect(settings.connection.credentials?.certificate.name == "operator")
        // Said explicitly wins over the file; --insecure loads no key.
        (settings, _) = try Self.read(
            ConfigurationSources(flags: ["--groups", "tcp://10.0.0.1:5564"]), dataDirectory: directory.path, insecure: true)
        #expect(settings.connection.endpoints.groups == "tcp://10.0.0.1:5564")
        #expect(settings.connection.credentials == nil)
    }

    @Test("a flag beats the section's variable, which beats the shared one, which beats the file; each is named")
    func precedence() throws {
        let directory = try TemporaryDirectory("operator")
        defer { directory.remove() }
        let file = #"{"broker_host": "bus.example", "operator": {"groups": "tcp://file.example:5564"}}"#
        var sources = ConfigurationSources(file: file)
        var (settings, configuration) = try Self.read(sources, dataDirectory: directory.path)
        #expect(settings.connection.endpoints.groups == "tcp://file.example:5564")
        #expect(settings.connection.endpoints.service == "tcp://bus.example:5563")
        #expect(configuration.source(of: "groups")?.hasSuffix("(operator.groups)") == true)
        sources.environment = ["SWITCHBOARD_GROUPS": "tcp://shared.example:5564"]
        (settings, configuration) = try Self.read(sources, dataDirectory: directory.path)
        #expect(settings.connection.endpoints.groups == "tcp://shared.example:5564")
        #expect(configuration.source(of: "groups") == "environment SWITCHBOARD_GROUPS")
        sources.environment["SWITCHBOARD_OPERATOR_GROUPS"] = "tcp://own.example:5564"
        (settings, configuration) = try Self.read(sources, dataDirectory: directory.path)
        #expect(settings.connection.endpoints.groups == "tcp://own.example:5564")
        #expect(configuration.source(of: "groups") == "environment SWITCHBOARD_OPERATOR_GROUPS")
        sources.flags = ["--groups", "tcp://flag.example:5564"]
        (settings, configuration) = try Self.read(sources, dataDirectory: directory.path)
        #expect(settings.connection.endpoints.groups == "tcp://flag.example:5564")
        #expect(configuration.source(of: "groups") == "flag --groups")
    }

    @Test(
        "a bad value is refused naming the key and where it came from",
        arguments: [
            (
                ConfigurationSources(environment: ["SWITCHBOARD_OPERATOR_GROUPS": "udp://x:1"]),
                "groups from environment SWITCHBOARD_OPERATOR_GROUPS: must be a ZeroMQ endpoint"
            ),
            (ConfigurationSources(flags: ["--broker-host", "a/b"]), "broker_host from flag --broker-host: must be a host name"),
            (ConfigurationSources(file: #"{"operator": {"ingest": "tcp://x:1"}}"#), "unknown key 'operator.ingest'"),
            (ConfigurationSources(flags: ["--certificate", "/nowhere.secret"]), "a certificate was given but no broker key"),
        ])
    func refusals(sources: ConfigurationSources, mentions: String) throws {
        let directory = try TemporaryDirectory("operator")
        defer { directory.remove() }
        let refusal = Self.refusal { try Self.read(sources, dataDirectory: directory.path) }
        #expect(refusal.contains(mentions), "\(refusal)")
    }
}
