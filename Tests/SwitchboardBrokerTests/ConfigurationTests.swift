import Foundation
import SwitchboardBroker
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing

@Suite("Broker configuration")
struct ConfigurationTests {
    @Test("defaults, then the file, then the environment: each layer overrides the one before")
    func layers() throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        let file = directory.path("broker.json")
        try #"{"ingest": "tcp://127.0.0.1:7000", "retention": {"max_age": "12h", "max_bytes": "2GB"}, "batch_limit": 100}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let layers = try BrokerConfiguration.layers(
            file: file,
            environment: [
                "SWITCHBOARD_BROKER_BATCH_LIMIT": "500", "SWITCHBOARD_BROKER_HEARTBEAT": "250ms", "SWITCHBOARD_BROKER_INSECURE": "true",
            ])
        let configuration = try BrokerConfiguration(layers: layers)
        #expect(configuration.ingestEndpoint == "tcp://127.0.0.1:7000")
        #expect(configuration.fanoutEndpoint == "tcp://127.0.0.1:5561")
        #expect(configuration.retentionMaxAge == .seconds(12 * 3600))
        #expect(configuration.retentionMaxBytes == 2 << 30)
        #expect(configuration.batchLimit == 500)
        #expect(configuration.heartbeat == .milliseconds(250))
    }

    @Test(
        "bad settings are refused with the key, the value and where it came from",
        arguments: [
            (#"{"ingest": "x", "colour": "blue"}"#, [String: String](), "unknown key 'colour'"),
            (#"{"heartbeat": "soon"}"#, [:], "heartbeat from file"),
            ("{}", ["SWITCHBOARD_BROKER_BATCH_LIMIT": "many"], "SWITCHBOARD_BROKER_BATCH_LIMIT"),
            ("{}", ["SWITCHBOARD_BROKER_MIN_VERSION": "2.0", "SWITCHBOARD_BROKER_INSECURE": "true"], "min_version"),
            ("{}", [:], "switchboard keygen"),
            (#"{"security.key": "/k.secret"}"#, [:], "go together"),
            (#"{"security.key": "/k.secret", "security.certificates": "/c", "insecure": "true"}"#, [:], "contradict"),
            ("{}", ["SWITCHBOARD_BROKER_INSECURE": "maybe"], "insecure must be true or false"),
            ("[1, 2]", [:], "not a JSON object"),
            (#"{"broker": {"ingest": "tcp://0.0.0.0:5560", "insecure": true}}"#, [:], "only on loopback"),
            (#"{"fanout": "tcp://*:5561"}"#, ["SWITCHBOARD_BROKER_INSECURE": "true"], "fanout tcp://*:5561 can be reached"),
            ("{}", ["SWITCHBOARD_BROKER_GROUPS": "tcp://eth0:5564", "SWITCHBOARD_BROKER_INSECURE": "1"], "groups tcp://eth0:5564"),
            ("{}", ["SWITCHBOARD_BROKER_RETENTON_MAX_AGE": "1d"], "SWITCHBOARD_BROKER_RETENTON_MAX_AGE: broker has no such setting"),
            (#"{"broker": {"heartbeat": "1s"}, "colour": "blue"}"#, [:], "unknown key 'colour' at the top"),
            (#"{"broker": {"colour": "blue"}}"#, [:], "unknown key 'broker.colour'"),
        ])
    func refusals(file text: String, environment: [String: String], mentions: String) throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        let file = directory.path("broker.json")
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        do {
            let layers = try BrokerConfiguration.layers(file: file, environment: environment)
            _ = try BrokerConfiguration(layers: layers)
            Issue.record("accepted \(text) \(environment)")
        } catch {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }

    @Test("'none' turns retention limits off")
    func noRetention() throws {
        let layers = try BrokerConfiguration.layers(
            file: nil,
            environment: [
                "SWITCHBOARD_BROKER_RETENTION_MAX_AGE": "none", "SWITCHBOARD_BROKER_RETENTION_MAX_BYTES": "none",
                "SWITCHBOARD_BROKER_INSECURE": "true",
            ])
        let configuration = try BrokerConfiguration(layers: layers)
        #expect(configuration.retentionMaxAge == nil)
        #expect(configuration.retentionMaxBytes == nil)
    }

    @Test("durations and sizes parse as written by people")
    func units() {
        #expect(DurationText.parse("500ms") == .milliseconds(500))
        #expect(DurationText.parse("30s") == .seconds(30))
        #expect(DurationText.parse("15m") == .seconds(900))
        #expect(DurationText.parse("7d") == .seconds(7 * 86_400))
        #expect(DurationText.parse("1.5") == .milliseconds(1500))
        #expect(DurationText.parse("soon") == nil)
        #expect(ByteCountText.parse("512MB") == 512 << 20)
        #expect(ByteCountText.parse("1024") == 1024)
        #expect(ByteCountText.parse("-1") == nil)
    }
}
