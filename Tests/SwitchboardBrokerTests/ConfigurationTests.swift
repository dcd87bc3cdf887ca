import Foundation
import SwitchboardBroker
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing

@Suite("Broker configuration")
struct ConfigurationTests {
    /// The broker's settings as `switchboard-broker --config FILE FLAGS…` would read them.
    static func read(file: String?, flags: [String] = [], environment: [String: String]) throws -> BrokerConfiguration {
        let arguments = ["switchboard-broker"] + (file.map { ["--config", $0] } ?? []) + flags
        let configuration = try BrokerConfiguration.programConfiguration(arguments: arguments, environment: environment)
        return try configuration.read { reader in try BrokerConfiguration(reader: reader) }
    }

    @Test("defaults, then the file, then the environment, then flags: each source overrides the one before")
    func layers() throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        let file = directory.path("broker.json")
        try #"{"ingest": "tcp://127.0.0.1:7000", "retention": {"max_age": "12h", "max_bytes": "2GB"}, "batch_limit": 100}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let configuration = try Self.read(
            file: file, flags: ["--groups-liveness", "5s", "--groups-backoff", "1s,2m"],
            environment: [
                "SWITCHBOARD_BROKER_BATCH_LIMIT": "500", "SWITCHBOARD_BROKER_HEARTBEAT": "250ms", "SWITCHBOARD_BROKER_INSECURE": "true",
                "SWITCHBOARD_BROKER_GROUPS_LIVENESS": "4s",
            ])
        #expect(configuration.groupLiveness == .seconds(5))
        #expect(configuration.groupBackoff == [.seconds(1), .seconds(120)])
        #expect(configuration.insecure)
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
            (
                "{}", ["SWITCHBOARD_BROKER_INSECURE": "maybe"],
                "insecure from environment SWITCHBOARD_BROKER_INSECURE: the value is not true or false"
            ),
            (#"{"groups": {"liveness": "3"}}"#, ["SWITCHBOARD_BROKER_INSECURE": "true"], "groups.liveness from file"),
            (
                "{}", ["SWITCHBOARD_BROKER_INSECURE": "true", "SWITCHBOARD_BROKER_GROUPS_MAX_DELIVER": "500"],
                "groups.max_deliver from environment SWITCHBOARD_BROKER_GROUPS_MAX_DELIVER: must be 1–100, got 500"
            ),
            ("[1, 2]", [:], "not a JSON object"),
            (#"{"broker": {"ingest": "tcp://0.0.0.0:5560", "insecure": true}}"#, [:], "only on loopback"),
            (#"{"fanout": "tcp://*:5561"}"#, ["SWITCHBOARD_BROKER_INSECURE": "true"], "fanout tcp://*:5561 can be reached"),
            ("{}", ["SWITCHBOARD_BROKER_GROUPS": "tcp://eth0:5564", "SWITCHBOARD_BROKER_INSECURE": "1"], "groups tcp://eth0:5564"),
            ("{}", ["SWITCHBOARD_BROKER_RETENTON_MAX_AGE": "1d"], "SWITCHBOARD_BROKER_RETENTON_MAX_AGE: broker has no such setting"),
            (#"{"broker": {"heartbeat": "1s"}, "colour": "blue"}"#, [:], "unknown key 'colour' at the top"),
            (#"{"broker": {"colour": "blue"}}"#, [:], "unknown key 'broker.colour'"),
            (#"{"journal": {"store": "mysql"}}"#, ["SWITCHBOARD_BROKER_INSECURE": "true"], "journal.store from file"),
            (
                #"{"journal": {"store": "postgres", "postgres": {"host": "db.example.org", "tls": "disable"}}}"#,
                ["SWITCHBOARD_BROKER_INSECURE": "true"], "disable is allowed only when every server is on loopback"
            ),
            (
                #"{"journal": {"store": "postgres", "postgres": {"tls": "prefer"}}}"#, ["SWITCHBOARD_BROKER_INSECURE": "true"],
                "must be verify-full or disable"
            ),
        ])
    func refusals(file text: String, environment: [String: String], mentions: String) throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        let file = directory.path("broker.json")
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        do {
            _ = try Self.read(file: file, environment: environment)
            Issue.record("accepted \(text) \(environment)")
        } catch {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }

    @Test("journal.store and journal.postgres.* come from the file, the environment and flags; the password only from a file")
    func journalStoreKeys() throws {
        let defaults = try Self.read(file: nil, environment: ["SWITCHBOARD_BROKER_INSECURE": "true"])
        #expect(defaults.journalStore == .sqlite)
        #expect(defaults.postgres.tls == .verifyFull)
        let configuration = try Self.read(
            file: nil,
            flags: ["--journal-store", "postgres", "--journal-postgres-host", "db.example.org", "--journal-postgres-database", "bus"],
            environment: [
                "SWITCHBOARD_BROKER_INSECURE": "true", "SWITCHBOARD_BROKER_JOURNAL_POSTGRES_PORT": "6432",
                "SWITCHBOARD_BROKER_JOURNAL_POSTGRES_USER": "broker",
                "SWITCHBOARD_BROKER_JOURNAL_POSTGRES_PASSWORD_FILE": "/run/pg-password",
                "SWITCHBOARD_BROKER_JOURNAL_POSTGRES_TIMEOUT": "3s", "SWITCHBOARD_BROKER_JOURNAL_POSTGRES_CA_FILE": "/etc/pg-ca.pem",
            ])
        #expect(configuration.journalStore == .postgres)
        #expect(configuration.postgres.host == "db.example.org" && configuration.postgres.port == 6432)
        #expect(configuration.postgres.database == "bus" && configuration.postgres.user == "broker")
        #expect(configuration.postgres.passwordFile == "/run/pg-password" && configuration.postgres.caFile == "/etc/pg-ca.pem")
        #expect(configuration.postgres.timeout == .seconds(3) && configuration.postgres.tls == .verifyFull)
        #expect(configuration.postgres.location == "postgresql://broker@db.example.org:6432/bus")
    }

    @Test("'none' turns retention limits off")
    func noRetention() throws {
        let configuration = try Self.read(
            file: nil,
            environment: [
                "SWITCHBOARD_BROKER_RETENTION_MAX_AGE": "none", "SWITCHBOARD_BROKER_RETENTION_MAX_BYTES": "none",
                "SWITCHBOARD_BROKER_INSECURE": "true",
            ])
        #expect(configuration.retentionMaxAge == nil)
        #expect(configuration.retentionMaxBytes == nil)
    }

    @Test("durations and sizes parse as written by people, in one syntax: a bare number is no duration")
    func units() {
        #expect(DurationText.parse("500ms") == .milliseconds(500))
        #expect(DurationText.parse("30s") == .seconds(30))
        #expect(DurationText.parse("2m") == .seconds(120))
        #expect(DurationText.parse("15m") == .seconds(900))
        #expect(DurationText.parse("7d") == .seconds(7 * 86_400))
        #expect(DurationText.parse("1.5") == nil)
        #expect(DurationText.parse("30") == nil)
        #expect(DurationText.parse("soon") == nil)
        #expect(DurationText.format(.milliseconds(500)) == "500ms")
        #expect(DurationText.format(.seconds(120)) == "2m")
        #expect(DurationText.format(.seconds(7 * 86_400)) == "7d")
        #expect(ByteCountText.format(8 << 30) == "8GB")
        #expect(ByteCountText.parse("512MB") == 512 << 20)
        #expect(ByteCountText.parse("1024") == 1024)
        #expect(ByteCountText.parse("-1") == nil)
    }
}
