import Configuration
import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

@Suite("Program configuration: flags > environment > file > defaults, the program's own key over the shared one")
struct ProgramConfigurationTests {
    static let keys = [
        "broker_host", "ingest", "groups", "service", "data_dir", "credit", "certificate", "ca_file", "admin", "retry.max_wait",
    ]

    func file(_ text: String) throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory("configuration")
        let path = directory.path("switchboard.json")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return (directory, path)
    }

    /// `program`'s configuration as its command line `flags` and `environment` give it.
    func configuration(
        _ program: String = "filemaker", file: String? = nil, flags: [String] = [], environment: [String: String] = [:],
        shared: [String]? = nil, sectioned: Bool = true
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(
            program: program, keys: Self.keys, arguments: ["switchboard-\(program)"] + (file.map { ["--config", $0] } ?? []) + flags,
            environment: environment, shared: shared, sectioned: sectioned)
    }

    @Test("a flag beats the environment, which beats the file, which beats the default; each names its source")
    func precedence() throws {
        let (directory, path) = try file(
            #"{"broker_host": "bus.example", "admin": "0.0.0.0:9000", "filemaker": {"admin": "0.0.0.0:9564", "credit": 8, "data_dir": "/var/lib/fm", "retry": {"max_wait": "2m"}}, "eto": {"credit": 2}}"#
        )
        defer { directory.remove() }
        // The file alone: the section's value over the shared one, and the shared host.
        var configuration = try configuration(file: path)
        try configuration.read { reader in
            #expect(reader.string(forKey: "admin") == "0.0.0.0:9564")
            #expect(reader.int(forKey: "credit") == 8)
            #expect(reader.string(forKey: "broker_host") == "bus.example")
            let wait = try reader.duration("retry.max_wait")
            let credit = try reader.int("credit", default: 16, in: 1...1000)
            #expect(wait == .seconds(120))
            #expect(credit == 8)
        }
        #expect(configuration.source(of: "admin") == "file \(path) (filemaker.admin)")
        #expect(configuration.source(of: "broker_host") == "file \(path) (broker_host)")
        // The shared variable beats the file's section (a higher source)…
        configuration = try self.configuration(file: path, environment: ["SWITCHBOARD_ADMIN": "none"])
        #expect(try configuration.read { $0.string(forKey: "admin") } == "none")
        #expect(configuration.source(of: "admin") == "environment SWITCHBOARD_ADMIN")
        // …the program's own variable beats the shared one…
        configuration = try self.configuration(
            file: path,
            environment: [
                "SWITCHBOARD_ADMIN": "none", "SWITCHBOARD_FILEMAKER_ADMIN": "127.0.0.1:1", "SWITCHBOARD_FILEMAKER_CREDIT": "7",
                "SWITCHBOARD_FILEMAKER_RETRY_MAX_WAIT": "500ms",
            ])
        try configuration.read { reader in
            #expect(reader.string(forKey: "admin") == "127.0.0.1:1")
            #expect(reader.int(forKey: "credit") == 7)
            let wait = try reader.duration("retry.max_wait")
            #expect(wait == .milliseconds(500))
        }
        #expect(configuration.source(of: "credit") == "environment SWITCHBOARD_FILEMAKER_CREDIT")
        // …and a flag beats everything: key a.b_c is --a-b-c.
        configuration = try self.configuration(
            file: path, flags: ["--credit", "9", "--retry-max-wait=30s", "--data-dir", "/srv/fm"],
            environment: ["SWITCHBOARD_FILEMAKER_CREDIT": "7", "SWITCHBOARD_FILEMAKER_RETRY_MAX_WAIT": "500ms"])
        try configuration.read { reader in
            #expect(reader.int(forKey: "credit") == 9)
            let wait = try reader.duration("retry.max_wait")
            #expect(wait == .seconds(30))
            #expect(reader.string(forKey: "data_dir") == "/srv/fm")
        }
        #expect(configuration.source(of: "credit") == "flag --credit")
        #expect(configuration.source(of: "retry.max_wait") == "flag --retry-max-wait")
        // A flag given twice counts once, its last, as ArgumentParser reads it; a list's flag adds.
        configuration = try self.configuration(flags: ["--credit", "3", "--ca-file", "/a.pem", "--credit", "9", "--ca-file", "/b.pem"])
        #expect(try configuration.read { $0.int(forKey: "credit") } == 9)
        #expect(try configuration.read { $0.stringArray(forKey: "ca_file") } == ["/a.pem", "/b.pem"])
        // A key that is not shared is never read from the top: eto's credit is its section's.
        configuration = try self.configuration("eto", file: path, environment: ["SWITCHBOARD_CREDIT": "5"])
        #expect(try configuration.read { $0.int(forKey: "credit") } == 2)
        // The file named by SWITCHBOARD_CONFIG is read when no --config is given; nothing
        // anywhere leaves the reader's default, and no source.
        configuration = try self.configuration("eto", environment: ["SWITCHBOARD_CONFIG": path])
        #expect(try configuration.read { $0.int(forKey: "credit") } == 2)
        configuration = try self.configuration("eto")
        #expect(try configuration.read { try $0.int("credit", default: 16, in: 1...1000) } == 16)
        #expect(configuration.source(of: "credit") == nil)
    }

    @Test("a list comes from repeated flags, a comma-separated variable, or a JSON array or text")
    func lists() throws {
        let (directory, path) = try file(#"{"filemaker": {"ca_file": ["/a.pem", "/b.pem"]}, "eto": {"ca_file": "/c.pem"}}"#)
        defer { directory.remove() }
        #expect(try configuration(file: path).read { $0.stringArray(forKey: "ca_file") } == ["/a.pem", "/b.pem"])
        #expect(try configuration("eto", file: path).read { $0.stringArray(forKey: "ca_file") } == ["/c.pem"])
        #expect(
            try configuration(environment: ["SWITCHBOARD_CA_FILE": "/d.pem,/e.pem"]).read { $0.stringArray(forKey: "ca_file") } == [
                "/d.pem", "/e.pem",
            ])
        #expect(
            try configuration(flags: ["--ca-file", "/f.pem", "--ca-file", "/g.pem"]).read { $0.stringArray(forKey: "ca_file") } == [
                "/f.pem", "/g.pem",
            ])
    }

    @Test("a flag's text with commas (a list of brokers) is read whole, as the same text from the environment or a file is")
    func flagTextWithCommas() throws {
        let pair = "tcp://broker-a:5560,tcp://broker-b:5560"
        for configuration in [
            try configuration(flags: ["--ingest", pair]), try configuration(environment: ["SWITCHBOARD_FILEMAKER_INGEST": pair]),
        ] {
            #expect(try configuration.read { try $0.endpoints("ingest") } == pair)
        }
        let (directory, path) = try file(#"{"filemaker": {"ingest": "\#(pair)"}}"#)
        defer { directory.remove() }
        let fromFile = try configuration(file: path)
        #expect(try fromFile.read { try $0.endpoints("ingest") } == pair)
        // A list asked for as a list still comes as its parts.
        let list = try configuration(flags: ["--ca-file", "/a.pem,/b.pem"])
        #expect(try list.read { $0.stringArray(forKey: "ca_file") } == ["/a.pem", "/b.pem"])
    }

    @Test("one broker host gives every endpoint; an endpoint set alone overrides it; IPv6 goes in brackets")
    func endpoints() throws {
        var configuration = try configuration("kiosk", environment: ["SWITCHBOARD_BROKER_HOST": "broker.shelter.lan"])
        var endpoints = try configuration.read { try BrokerEndpoints(reader: $0) }
        #expect(endpoints.ingest == "tcp://broker.shelter.lan:5560")
        #expect(endpoints.groups == "tcp://broker.shelter.lan:5564")
        configuration = try self.configuration(
            "kiosk", environment: ["SWITCHBOARD_BROKER_HOST": "fd00::1", "SWITCHBOARD_KIOSK_INGEST": "tcp://10.0.0.9:7000"])
        endpoints = try configuration.read { try BrokerEndpoints(reader: $0) }
        #expect(endpoints.ingest == "tcp://10.0.0.9:7000")
        #expect(endpoints.service == "tcp://[fd00::1]:5563")
        #expect(try self.configuration("kiosk").read { try BrokerEndpoints(reader: $0) } == BrokerEndpoints())
    }

    @Test(
        "an unknown key, in the file or the environment, is refused naming it and where it is",
        arguments: [
            (#"{"filemaker": {"credt": 8}}"#, [String: String](), "configuration file", "unknown key 'filemaker.credt'"),
            (#"{"filemaker": {"retry": {"max_wiat": "1s"}}}"#, [:], "configuration file", "unknown key 'filemaker.retry.max_wiat'"),
            (#"{"colour": "blue"}"#, [:], "configuration file", "unknown key 'colour' at the top"),
            (#"{"filemaker": 3}"#, [:], "configuration file", "'filemaker' must be an object"),
            ("[]", [:], "configuration file", "is not a JSON object"),
            ("{", [:], "configuration file", "is not a JSON object"),
            ("{}", ["SWITCHBOARD_FILEMAKER_CREDT": "8"], "environment SWITCHBOARD_FILEMAKER_CREDT", "filemaker has no such setting"),
        ])
    func unknownKeys(text: String, environment: [String: String], source: String, mentions: String) throws {
        let (directory, path) = try file(text)
        defer { directory.remove() }
        let error = #expect(throws: ConfigurationError.self) { try configuration(file: path, environment: environment) }
        #expect(error?.description.contains(source) == true, "\(String(describing: error))")
        #expect(error?.description.contains(mentions) == true, "\(String(describing: error))")
    }

    @Test(
        "a bad value is refused naming the key and the flag, variable or file key it came from",
        arguments: [
            (
                [String](), ["SWITCHBOARD_FILEMAKER_CREDIT": "many"],
                "credit from environment SWITCHBOARD_FILEMAKER_CREDIT: the value is not an integer"
            ),
            (["--credit", "many"], [:], "credit from flag --credit: the value is not an integer"),
            (["--credit", "2000"], [:], "credit from flag --credit: must be 1–1000, got 2000"),
            (
                ["--retry-max-wait", "30"], [:],
                "retry.max_wait from flag --retry-max-wait: must be a duration like 500ms, 30s or 2m, got '30'"
            ),
            ([], ["SWITCHBOARD_FILEMAKER_RETRY_MAX_WAIT": "2x"], "retry.max_wait from environment SWITCHBOARD_FILEMAKER_RETRY_MAX_WAIT"),
            ([], ["SWITCHBOARD_BROKER_HOST": "tcp://x:1"], "broker_host from environment SWITCHBOARD_BROKER_HOST: must be a host name"),
            ([], ["SWITCHBOARD_FILEMAKER_DATA_DIR": " "], "data_dir from environment SWITCHBOARD_FILEMAKER_DATA_DIR: must not be empty"),
            (
                [], ["SWITCHBOARD_FILEMAKER_GROUPS": "http://x"],
                "groups from environment SWITCHBOARD_FILEMAKER_GROUPS: must be a ZeroMQ endpoint"
            ),
        ])
    func badValues(flags: [String], environment: [String: String], message: String) throws {
        let configuration = try configuration(flags: flags, environment: environment)
        let error = #expect(throws: ConfigurationError.self) {
            try configuration.read { reader in
                _ = try reader.int("credit", default: 16, in: 1...1000)
                _ = try reader.duration("retry.max_wait")
                _ = try reader.nonEmpty("data_dir")
                _ = try BrokerEndpoints(reader: reader)
            }
        }
        #expect(error?.description.hasPrefix(message) == true, "\(String(describing: error))")
    }

    @Test("a bad value in the file names the file and the key in it")
    func badFileValue() throws {
        let (directory, path) = try file(#"{"filemaker": {"credit": "many", "retry": {"max_wait": "soon"}}}"#)
        defer { directory.remove() }
        let configuration = try configuration(file: path)
        let credit = #expect(throws: ConfigurationError.self) { try configuration.read { _ = $0.int(forKey: "credit") } }
        #expect(credit?.description.hasPrefix("credit from file \(path) (filemaker.credit)") == true, "\(String(describing: credit))")
        let wait = #expect(throws: ConfigurationError.self) { try configuration.read { _ = try $0.duration("retry.max_wait") } }
        #expect(
            wait?.description
                == "retry.max_wait from file \(path) (filemaker.retry.max_wait): must be a duration like 500ms, 30s or 2m, got 'soon'")
    }

    @Test("a missing file is an error naming it")
    func missingFile() {
        let error = #expect(throws: ConfigurationError.self) { try configuration("eto", file: "/nonexistent/switchboard.json") }
        #expect(error?.description.contains("cannot read configuration file /nonexistent/switchboard.json") == true)
    }

    @Test("the broker reads only its own section: a client's shared endpoint is not its bind address")
    func brokerIsolation() throws {
        let (directory, path) = try file(#"{"ingest": "tcp://bus:5560", "broker": {"groups": "tcp://0.0.0.0:5564"}}"#)
        defer { directory.remove() }
        let configuration = try configuration(
            "broker", file: path, environment: ["SWITCHBOARD_INGEST": "tcp://other:1", "SWITCHBOARD_ADMIN": "none"], shared: ["admin"],
            sectioned: false)
        try configuration.read { reader in
            #expect(reader.string(forKey: "ingest") == nil)
            #expect(reader.string(forKey: "groups") == "tcp://0.0.0.0:5564")
            #expect(reader.string(forKey: "admin") == "none")
        }
    }

    @Test("key a.b_c is flag --a-b-c and variable SWITCHBOARD_<PROGRAM>_A_B_C")
    func naming() {
        #expect(ProgramConfiguration.flagName("retention.max_age") == "--retention-max-age")
        #expect(ProgramConfiguration.flagName("data_dir") == "--data-dir")
        #expect(ProgramConfiguration.environmentName("retention.max_age") == "RETENTION_MAX_AGE")
    }

    @Test("endpoints reachable only from this machine, and the rest")
    func reach() {
        for local in ["tcp://127.0.0.1:5560", "tcp://localhost:1", "tcp://[::1]:5560", "tcp://lo:5560", "ipc:///tmp/x", "inproc://a"] {
            #expect(EndpointReach.isLocal(local), "\(local)")
        }
        for open in ["tcp://0.0.0.0:5560", "tcp://*:5560", "tcp://eth0:5560", "tcp://10.1.2.3:5560", "tcp://[::]:5560", "tcp://bus:1"] {
            #expect(!EndpointReach.isLocal(open), "\(open)")
        }
    }
}
