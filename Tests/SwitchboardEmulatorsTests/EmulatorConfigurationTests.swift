import Foundation
import SwitchboardEmulators
import SwitchboardRuntime
import SwitchboardTesting
import Testing

@Suite("Emulator configuration: address, APIs, seed, state, TLS")
struct EmulatorConfigurationTests {
    /// The emulator's settings as `switchboard-emulator FLAGS…` would read them.
    static func read(_ sources: ConfigurationSources) throws -> (Emulator.Configuration, ProgramConfiguration) {
        try sources.read(program: "emulator", Emulator.Configuration.programConfiguration) { configuration in
            (try configuration.read { try Emulator.Configuration(reader: $0) }, configuration)
        }
    }

    @Test("nothing given: every API over plain HTTP on 127.0.0.1:8480, the bundled seed, in memory")
    func defaults() throws {
        let (settings, _) = try Self.read(ConfigurationSources())
        #expect(settings.host == "127.0.0.1")
        #expect(settings.port == 8480)
        #expect(settings.apis == Set(Emulator.API.allCases))
        #expect(settings.statePath == nil)
        #expect(settings.tls == nil)
        #expect(settings.generatedTLSDirectory == nil)
    }

    @Test("the file, then the environment, then a flag; each is named; a list adds its flags")
    func precedence() throws {
        var sources = ConfigurationSources(file: #"{"emulator": {"port": 9000, "api": ["eto"], "state": "/tmp/state.json"}}"#)
        var (settings, configuration) = try Self.read(sources)
        #expect(settings.port == 9000)
        #expect(settings.apis == [.eto])
        #expect(settings.statePath == "/tmp/state.json")
        #expect(configuration.source(of: "port")?.hasSuffix("(emulator.port)") == true)
        sources.environment = ["SWITCHBOARD_EMULATOR_PORT": "0", "SWITCHBOARD_EMULATOR_API": "filemaker,sap"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.port == 0)
        #expect(settings.apis == [.filemaker, .sap])
        #expect(configuration.source(of: "port") == "environment SWITCHBOARD_EMULATOR_PORT")
        sources.flags = ["--port", "9001", "--api", "directory", "--api", "eto", "--host", "0.0.0.0"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.port == 9001)
        #expect(settings.apis == [.directory, .eto])
        #expect(settings.host == "0.0.0.0")
        #expect(configuration.source(of: "port") == "flag --port")
    }

    @Test("tls_generate writes a test CA for localhost and the extra hosts, and serves HTTPS with it")
    func generatedTLS() throws {
        let directory = try TemporaryDirectory("emulator-tls")
        defer { directory.remove() }
        let (settings, _) = try Self.read(ConfigurationSources(flags: ["--tls-generate", directory.path, "--tls-host", "emu.lan"]))
        #expect(settings.tls != nil)
        #expect(settings.generatedTLSDirectory == directory.path)
        #expect(FileManager.default.fileExists(atPath: directory.path("ca.pem")))
    }

    @Test(
        "a bad value is refused naming the key and where it came from",
        arguments: [
            (ConfigurationSources(flags: ["--api", "soap"]), "api from flag --api: 'soap' is not one of eto, filemaker, directory, sap"),
            (
                ConfigurationSources(environment: ["SWITCHBOARD_EMULATOR_PORT": "70000"]),
                "port from environment SWITCHBOARD_EMULATOR_PORT: must be 0–65535, got 70000"
            ),
            (ConfigurationSources(file: #"{"emulator": {"seed": "/nowhere/seed.json"}}"#), "seed from file"),
            (ConfigurationSources(flags: ["--tls-key", "/k.pem"]), "give either tls_generate"),
            (ConfigurationSources(environment: ["SWITCHBOARD_EMULATOR_BROKER_HOST": "x"]), "emulator has no such setting"),
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
