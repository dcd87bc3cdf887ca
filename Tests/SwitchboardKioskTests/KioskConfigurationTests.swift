import Foundation
import SwitchboardKiosk
import SwitchboardObservability
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("Kiosk configuration: who the kiosk is, its outbox, its broker")
struct KioskConfigurationTests {
    /// The kiosk's settings as `switchboard-kiosk checkin FLAGS…` would read them on host
    /// `shelter-pc.riverside.example`.
    static func read(_ sources: ConfigurationSources) throws -> (KioskConfiguration, ProgramConfiguration) {
        try sources.read(program: "kiosk", { try KioskConfiguration.programConfiguration(arguments: $0, environment: $1) }) {
            configuration in
            (try configuration.read { try KioskConfiguration(reader: $0, host: "shelter-pc.riverside.example") }, configuration)
        }
    }

    @Test("nothing given: kiosk-<host>, its outbox under .switchboard, the broker on 127.0.0.1, admin on 9561")
    func defaults() throws {
        let (settings, _) = try Self.read(ConfigurationSources())
        #expect(settings.id == "kiosk-shelter-pc")
        #expect(settings.dataDirectory == ".switchboard")
        #expect(settings.outboxPath == ".switchboard/kiosk/kiosk-shelter-pc/outbox.sqlite")
        #expect(settings.connection.endpoints == BrokerEndpoints())
        #expect(settings.connection.credentials == nil)
        #expect(settings.admin == AdminAddress(host: "127.0.0.1", port: 9561))
    }

    @Test("the file, then the environment, then a flag; each is named; data_dir moves the outbox")
    func precedence() throws {
        var sources = ConfigurationSources(
            file: #"{"ingest": "tcp://shared.example:5560", "kiosk": {"id": "riverside-1", "data_dir": "/var/lib/kiosk"}}"#)
        var (settings, configuration) = try Self.read(sources)
        #expect(settings.id == "riverside-1")
        #expect(settings.outboxPath == "/var/lib/kiosk/kiosk/riverside-1/outbox.sqlite")
        #expect(settings.connection.endpoints.ingest == "tcp://shared.example:5560")
        #expect(configuration.source(of: "id")?.hasSuffix("(kiosk.id)") == true)
        #expect(configuration.source(of: "ingest")?.hasSuffix("(ingest)") == true)
        sources.environment = ["SWITCHBOARD_KIOSK_ID": "riverside-2", "SWITCHBOARD_ADMIN": "none"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.id == "riverside-2")
        #expect(settings.admin == nil)
        #expect(configuration.source(of: "id") == "environment SWITCHBOARD_KIOSK_ID")
        sources.flags = ["--id", "riverside-3", "--outbox", "/tmp/o.sqlite", "--admin", "0.0.0.0:9000"]
        (settings, configuration) = try Self.read(sources)
        #expect(settings.id == "riverside-3")
        #expect(settings.outboxPath == "/tmp/o.sqlite")
        #expect(settings.admin == AdminAddress(host: "0.0.0.0", port: 9000))
        #expect(configuration.source(of: "id") == "flag --id")
    }

    @Test("with a certificate the kiosk is its principal; another id is refused")
    func certificate() throws {
        let directory = try TemporaryDirectory("kiosk-keys")
        defer { directory.remove() }
        let kiosk = try Certificate(name: "riverside-1", role: .kiosk, keys: try CurveKeyPair.generate()).write(to: directory.path("keys"))
        let broker = try Certificate(name: "broker", role: .broker, keys: try CurveKeyPair.generate()).write(to: directory.path("keys"))
        var sources = ConfigurationSources(environment: ["SWITCHBOARD_CERTIFICATE": kiosk.secret, "SWITCHBOARD_BROKER_KEY": broker.public])
        let (settings, _) = try Self.read(sources)
        #expect(settings.id == "riverside-1")
        #expect(settings.connection.credentials?.certificate.name == "riverside-1")
        #expect(settings.connection.socketOptions.count == 3)
        sources.flags = ["--id", "riverside-9"]
        let error = #expect(throws: (any Error).self) { try Self.read(sources) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("id from flag --id: 'riverside-9' differs from the certificate's principal"))
    }

    @Test(
        "a bad value is refused naming the key and where it came from; the desk's keys are known",
        arguments: [
            (ConfigurationSources(flags: ["--id", "bad id"]), "id from flag --id: 'bad id' must be 1–64 characters"),
            (
                ConfigurationSources(environment: ["SWITCHBOARD_KIOSK_ADMIN": "9561"]),
                "admin from environment SWITCHBOARD_KIOSK_ADMIN: must be HOST:PORT"
            ),
            (ConfigurationSources(file: #"{"kiosk": {"ingest": "broker:5560"}}"#), "ingest from file"),
            (ConfigurationSources(file: #"{"kiosk": {"fanout": "tcp://x:1"}}"#), "unknown key 'kiosk.fanout'"),
            (ConfigurationSources(flags: ["--data-dir", " "]), "data_dir from flag --data-dir: must not be empty"),
        ])
    func refusals(sources: ConfigurationSources, mentions: String) {
        do {
            _ = try Self.read(sources)
            Issue.record("accepted \(sources)")
        } catch {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }

    @Test("the desk's keys sit in the kiosk's section when the program knows them")
    func deskKeys() throws {
        let sources = ConfigurationSources(file: #"{"kiosk": {"site_id": 101}}"#)
        #expect(throws: ConfigurationError.self) { try Self.read(sources) }
        let settings = try sources.read(
            program: "kiosk", { try KioskConfiguration.programConfiguration(arguments: $0, environment: $1, adding: ["site_id"]) }
        ) { configuration in try configuration.read { try KioskConfiguration(reader: $0, host: "h") } }
        #expect(settings.id == "kiosk-h")
    }
}
