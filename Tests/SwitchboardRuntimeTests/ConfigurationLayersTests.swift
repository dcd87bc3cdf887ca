import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

@Suite("Configuration layers: defaults < file < environment < flags, the program's own key over the shared one")
struct ConfigurationLayersTests {
    static let keys = ["broker_host", "ingest", "groups", "service", "data_dir", "credit", "certificate", "ca_file", "admin"]

    func file(_ text: String) throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory("layers")
        let path = directory.path("switchboard.json")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return (directory, path)
    }

    @Test("each layer overrides the one below it, and in each layer the program's section wins over the shared top")
    func order() throws {
        let (directory, path) = try file(
            #"{"broker_host": "bus.example", "admin": "0.0.0.0:9000", "filemaker": {"admin": "0.0.0.0:9564", "credit": 8, "data_dir": "/var/lib/fm"}, "eto": {"credit": 2}}"#
        )
        defer { directory.remove() }
        // The file alone: the section's value over the shared one, and the shared host.
        var layers = try ConfigurationLayers(program: "filemaker", file: path, keys: Self.keys, environment: [:])
        #expect(layers.string("admin") == "0.0.0.0:9564")
        #expect(try layers.integer("credit") == 8)
        #expect(layers.string("broker_host") == "bus.example")
        #expect(try layers.lookup("admin")?.source == "file \(path) (filemaker.admin)")
        // The shared environment variable beats the file's section (a higher layer)…
        layers = try ConfigurationLayers(program: "filemaker", file: path, keys: Self.keys, environment: ["SWITCHBOARD_ADMIN": "none"])
        #expect(layers.string("admin") == "none")
        #expect(try layers.lookup("admin")?.source == "environment SWITCHBOARD_ADMIN")
        // …and the program's own variable beats the shared one.
        layers = try ConfigurationLayers(
            program: "filemaker", file: path, keys: Self.keys,
            environment: ["SWITCHBOARD_ADMIN": "none", "SWITCHBOARD_FILEMAKER_ADMIN": "127.0.0.1:1", "SWITCHBOARD_FILEMAKER_CREDIT": "7"])
        #expect(layers.string("admin") == "127.0.0.1:1")
        #expect(try layers.integer("credit") == 7)
        // A key that is not shared is never read from the top: eto's credit is its section's.
        #expect(
            try ConfigurationLayers(program: "eto", file: path, keys: Self.keys, environment: ["SWITCHBOARD_CREDIT": "5"]).integer("credit")
                == 2)
        // A flag beats everything.
        layers = try ConfigurationLayers(
            program: "filemaker", file: path, keys: Self.keys, flags: ["credit": "9"], flagNames: ["credit": "--credit"],
            environment: ["SWITCHBOARD_FILEMAKER_CREDIT": "7"])
        #expect(try layers.integer("credit") == 9)
        #expect(try layers.lookup("credit")?.source == "flag --credit")
        #expect(layers.string("data_dir") == "/var/lib/fm")
        // The file named by SWITCHBOARD_CONFIG is read when no --config is given; nothing anywhere
        // leaves the caller's default.
        layers = try ConfigurationLayers(program: "eto", keys: Self.keys, environment: ["SWITCHBOARD_CONFIG": path])
        #expect(try layers.integer("credit") == 2)
        #expect(layers.string("data_dir") == nil)
        #expect(try layers.integer("credit", default: 16, in: 1...1000) == 2)
        #expect(
            try ConfigurationLayers(program: "eto", keys: Self.keys, environment: [:]).integer("credit", default: 16, in: 1...1000) == 16)
    }

    @Test("one broker host gives every endpoint; an endpoint set alone overrides it; IPv6 goes in brackets")
    func endpoints() throws {
        var layers = try ConfigurationLayers(
            program: "kiosk", keys: Self.keys, environment: ["SWITCHBOARD_BROKER_HOST": "broker.shelter.lan"])
        var endpoints = try BrokerEndpoints(layers: layers)
        #expect(endpoints.ingest == "tcp://broker.shelter.lan:5560")
        #expect(endpoints.groups == "tcp://broker.shelter.lan:5564")
        layers = try ConfigurationLayers(
            program: "kiosk", keys: Self.keys,
            environment: ["SWITCHBOARD_BROKER_HOST": "fd00::1", "SWITCHBOARD_KIOSK_INGEST": "tcp://10.0.0.9:7000"])
        endpoints = try BrokerEndpoints(layers: layers)
        #expect(endpoints.ingest == "tcp://10.0.0.9:7000")
        #expect(endpoints.service == "tcp://[fd00::1]:5563")
        #expect(try BrokerEndpoints(layers: ConfigurationLayers(program: "kiosk", keys: Self.keys, environment: [:])) == BrokerEndpoints())
    }

    @Test(
        "bad settings are refused, naming the setting and where it came from",
        arguments: [
            (#"{"filemaker": {"credt": 8}}"#, [String: String](), "unknown key 'filemaker.credt'"),
            (#"{"colour": "blue"}"#, [:], "unknown key 'colour' at the top"),
            (#"{"filemaker": 3}"#, [:], "'filemaker' must be an object"),
            ("[]", [:], "is not a JSON object"),
            ("{", [:], "is not a JSON object"),
            ("{}", ["SWITCHBOARD_FILEMAKER_CREDT": "8"], "environment SWITCHBOARD_FILEMAKER_CREDT: filemaker has no such setting"),
            ("{}", ["SWITCHBOARD_FILEMAKER_CREDIT": "many"], "credit from environment SWITCHBOARD_FILEMAKER_CREDIT must be an integer"),
            (#"{"filemaker": {"groups": "http://x"}}"#, [:], "groups from file"),
            ("{}", ["SWITCHBOARD_BROKER_HOST": "tcp://x:1"], "broker_host from environment SWITCHBOARD_BROKER_HOST must be a host"),
            ("{}", ["SWITCHBOARD_FILEMAKER_DATA_DIR": " "], "data_dir from environment SWITCHBOARD_FILEMAKER_DATA_DIR must not be empty"),
        ])
    func refusals(text: String, environment: [String: String], mentions: String) throws {
        let (directory, path) = try file(text)
        defer { directory.remove() }
        do {
            let layers = try ConfigurationLayers(program: "filemaker", file: path, keys: Self.keys, environment: environment)
            _ = try layers.integer("credit")
            _ = try layers.nonEmpty("data_dir")
            _ = try BrokerEndpoints(layers: layers)
            Issue.record("accepted \(text) \(environment)")
        } catch {
            #expect(error.description.contains(mentions), "\(error)")
        }
    }

    @Test("a missing file is an error naming it")
    func missingFile() {
        #expect {
            _ = try ConfigurationLayers(program: "eto", file: "/nonexistent/switchboard.json", keys: Self.keys, environment: [:])
        } throws: { error in
            "\(error)".contains("cannot read configuration file /nonexistent/switchboard.json")
        }
    }

    @Test("JSON numbers, booleans and lists read as the text a flag would give")
    func jsonTypes() throws {
        let (directory, path) = try file(#"{"filemaker": {"credit": 12, "ca_file": ["/a.pem", "/b.pem"], "admin": "none"}}"#)
        defer { directory.remove() }
        let layers = try ConfigurationLayers(program: "filemaker", file: path, keys: Self.keys, environment: [:])
        #expect(try layers.integer("credit") == 12)
        #expect(try layers.list("ca_file") == ["/a.pem", "/b.pem"])
        #expect(layers.string("admin") == "none")
    }

    @Test("the broker reads only its own section: a client's shared endpoint is not its bind address")
    func brokerIsolation() throws {
        let (directory, path) = try file(#"{"ingest": "tcp://bus:5560", "broker": {"groups": "tcp://0.0.0.0:5564"}}"#)
        defer { directory.remove() }
        let layers = try ConfigurationLayers(
            program: "broker", file: path, keys: ["ingest", "groups", "admin"], shared: ["admin"], sectioned: false,
            environment: ["SWITCHBOARD_INGEST": "tcp://other:1", "SWITCHBOARD_ADMIN": "none"])
        #expect(layers.string("ingest") == nil)
        #expect(layers.string("groups") == "tcp://0.0.0.0:5564")
        #expect(layers.string("admin") == "none")
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
