import Foundation
import SwitchboardSecurity
import Testing

/// A key directory in a temporary directory, removed by `remove()`.
struct KeyDirectory {
    let root: URL
    let keys: DeploymentKeys

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("deployment-keys-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        keys = DeploymentKeys(directory: root.appendingPathComponent("keys").path)
    }

    func remove() { try? FileManager.default.removeItem(at: root) }

    func path(_ component: String) -> String { (keys.directory as NSString).appendingPathComponent(component) }

    func files(_ component: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path(component)).filter { !$0.hasPrefix(".") }.sorted()
    }

    func mode(_ component: String) throws -> Int {
        try #require((try FileManager.default.attributesOfItem(atPath: path(component))[.posixPermissions] as? NSNumber)?.intValue)
    }

    func publicKey(_ name: String) throws -> String {
        try #require(try keys.state().principal(name)).publicKey
    }
}

/// The design's example inventory (design/issue13-config.md, deploy/inventory.example.json).
let exampleInventory = """
    {
      "deployment": "riverside-coc",
      "broker_host": "broker.riverside.example",
      "hosts": {
        "broker":     {"programs": ["broker"]},
        "backoffice": {"programs": ["auth"]},
        "workers-1":  {"programs": ["filemaker", "eto", "directory"]},
        "workers-2":  {"programs": ["filemaker", "eto", "directory"]},
        "site-101":   {"kiosks": ["site-101-kiosk-1"]},
        "ops":        {"programs": ["monitor", "admin"]}
      }
    }
    """

func inventory(_ text: String = exampleInventory) throws -> DeploymentInventory {
    try DeploymentInventory.parse(Data(text.utf8))
}

/// The example with a second site and a second kiosk at the first.
let grownInventory = exampleInventory.replacingOccurrences(
    of: #""site-101":   {"kiosks": ["site-101-kiosk-1"]},"#,
    with: #""site-101": {"kiosks": ["site-101-kiosk-1", "site-101-kiosk-2"]}, "site-102": {"kiosks": ["site-102-kiosk-1"]},"#)

@Suite("switchboard keys: a deployment's certificates, allow-list and bundles")
struct DeploymentKeysTests {
    static let bundles: [String: [String]] = [
        "broker": ["allowed", "broker.cert", "broker.secret"],
        "backoffice": ["auth.secret", "broker.cert"],
        "workers-1": ["broker.cert", "directory.secret", "eto.secret", "filemaker.secret"],
        "workers-2": ["broker.cert", "directory.secret", "eto.secret", "filemaker.secret"],
        "site-101": ["broker.cert", "site-101-kiosk-1.secret"],
        "ops": ["admin.secret", "broker.cert", "monitor.secret"],
    ]

    @Test("the example inventory gives the design's principals and roles")
    func principals() throws {
        let parsed = try inventory()
        #expect(parsed.deployment == "riverside-coc" && parsed.brokerHost == "broker.riverside.example")
        #expect(parsed.brokerHostName == "broker")
        let summary = parsed.principals.map { "\($0.name)=\($0.role)@\($0.host)/\($0.file)" }
        #expect(
            summary == [
                "backoffice-auth=auth@backoffice/auth", "broker=broker@broker/broker", "ops-admin=admin@ops/admin",
                "ops-monitor=monitor@ops/monitor", "site-101-kiosk-1=kiosk@site-101/site-101-kiosk-1",
                "workers-1-directory=worker:directory@workers-1/directory", "workers-1-eto=worker:eto@workers-1/eto",
                "workers-1-filemaker=worker:filemaker@workers-1/filemaker", "workers-2-directory=worker:directory@workers-2/directory",
                "workers-2-eto=worker:eto@workers-2/eto", "workers-2-filemaker=worker:filemaker@workers-2/filemaker",
            ])
        // The file the deploy guide points at stays valid.
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../deploy/inventory.example.json")
        #expect(try DeploymentInventory.load(example.standardizedFileURL.path) == parsed)
    }

    @Test("init makes every certificate, the allow-list and one bundle per host holding only its secrets, with modes 0700 and 0600")
    func initialise() throws {
        let directory = try KeyDirectory()
        defer { directory.remove() }
        let parsed = try inventory()
        let changes = try directory.keys.initialise(parsed)
        #expect(changes.made.map(\.name) == parsed.principals.map(\.name))
        #expect(Set(changes.bundles) == Set(Self.bundles.keys) && changes.allowList)

        for component in ["", "public", "secret", "allowed", "bundles"] + Self.bundles.keys.map({ "bundles/\($0)" }) + [
            "bundles/broker/allowed"
        ] {
            #expect(try directory.mode(component) == 0o700, "\(component)")
        }
        #expect(try directory.files("") == ["allowed", "bundles", "deployment.json", "public", "secret"])
        #expect(try directory.mode("deployment.json") == 0o600)
        for principal in parsed.principals {
            #expect(try directory.mode("secret/\(principal.name).secret") == 0o600)
            let certificate = try Certificate.load(secretFile: directory.path("secret/\(principal.name).secret"))
            #expect(certificate.name == principal.name && certificate.role == principal.role && certificate.keyPair != nil)
            let publicCertificate = try Certificate.load(publicFile: directory.path("public/\(principal.name).cert"))
            #expect(publicCertificate.secretKey == nil && publicCertificate.publicKey == certificate.publicKey)
        }
        let clients = parsed.principals.filter { $0.role != .broker }.map { "\($0.name).cert" }.sorted()
        #expect(try directory.files("allowed") == clients)
        #expect(try directory.files("bundles/broker/allowed") == clients)
        for file in clients {
            #expect(
                FileManager.default.contents(atPath: directory.path("allowed/\(file)"))
                    == FileManager.default.contents(atPath: directory.path("bundles/broker/allowed/\(file)")))
        }
        #expect(try AllowList(directory: directory.path("bundles/broker/allowed")).count == clients.count)

        let broker = try Certificate.load(publicFile: directory.path("public/broker.cert"))
        for (host, expected) in Self.bundles {
            #expect(try directory.files("bundles/\(host)") == expected, "\(host)")
            #expect(try Certificate.load(publicFile: directory.path("bundles/\(host)/broker.cert")) == broker)
            for file in expected where file.hasSuffix(".secret") {
                #expect(try directory.mode("bundles/\(host)/\(file)") == 0o600, "\(host)/\(file)")
                let certificate = try Certificate.load(secretFile: directory.path("bundles/\(host)/\(file)"))
                // Only this host's principals: its programs as <host>-<program>, its kiosks.
                let principal = try #require(parsed.principals.first { $0.name == certificate.name })
                #expect(principal.host == host && "\(principal.file).secret" == file)
            }
        }

        // No secret key is in the state, in the public files or in what the command prints.
        let secrets = try parsed.principals.map { try secretKeyText(directory.path("secret/\($0.name).secret")) }
        let printed = String(describing: changes)
        let state = try String(contentsOfFile: directory.path("deployment.json"), encoding: .utf8)
        let publicTexts = try directory.files("public").map { try String(contentsOfFile: directory.path("public/\($0)"), encoding: .utf8) }
        for secret in secrets {
            #expect(!printed.contains(secret) && !state.contains(secret) && !publicTexts.contains { $0.contains(secret) })
        }
    }

    @Test("a second init is refused and points at add; so is a directory that is not empty or open to others")
    func secondInit() throws {
        let directory = try KeyDirectory()
        defer { directory.remove() }
        try directory.keys.initialise(try inventory())
        let before = try directory.publicKey("site-101-kiosk-1")
        let again = #expect(throws: DeploymentKeys.Failure.self) { try directory.keys.initialise(try inventory()) }
        #expect(again?.code == .alreadyInitialised && again?.message.contains("keys add") == true, "\(String(describing: again))")
        #expect(try directory.publicKey("site-101-kiosk-1") == before)

        let other = DeploymentKeys(directory: directory.root.appendingPathComponent("other").path)
        try FileManager.default.createDirectory(
            atPath: other.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        #expect(FileManager.default.createFile(atPath: other.directory + "/notes.txt", contents: Data("x".utf8)))
        let notEmpty = #expect(throws: DeploymentKeys.Failure.self) { try other.initialise(try inventory()) }
        #expect(notEmpty?.code == .alreadyInitialised && notEmpty?.message.contains("not empty") == true)

        let open = DeploymentKeys(directory: directory.root.appendingPathComponent("open").path)
        try FileManager.default.createDirectory(
            atPath: open.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let refused = #expect(throws: DeploymentKeys.Failure.self) { try open.initialise(try inventory()) }
        #expect(refused?.code == .io && refused?.message.contains("chmod 700") == true, "\(String(describing: refused))")

        let missing = DeploymentKeys(directory: directory.root.appendingPathComponent("missing").path)
        let notInitialised = #expect(throws: DeploymentKeys.Failure.self) { try missing.add(try inventory()) }
        #expect(notInitialised?.code == .notInitialised && notInitialised?.message.contains("keys init") == true)
    }

    @Test("add makes keys only for what the inventory gained, keeps every existing key, and a second add changes nothing")
    func add() throws {
        let directory = try KeyDirectory()
        defer { directory.remove() }
        let parsed = try inventory()
        try directory.keys.initialise(parsed)
        let before = try directory.keys.state()
        let unchanged = try directory.keys.add(parsed)
        #expect(unchanged.made.isEmpty && unchanged.bundles.isEmpty && !unchanged.allowList, "\(unchanged)")
        #expect(try directory.keys.state() == before)

        let grown = try inventory(grownInventory)
        let changes = try directory.keys.add(grown)
        #expect(changes.made.map(\.name) == ["site-101-kiosk-2", "site-102-kiosk-1"])
        #expect(changes.bundles.sorted() == ["broker", "site-101", "site-102"], "only the bundles that changed")
        #expect(changes.allowList)
        for principal in before.principals {
            #expect(try directory.publicKey(principal.name) == principal.publicKey, "\(principal.name) kept its key")
        }
        #expect(try directory.files("bundles/site-101") == ["broker.cert", "site-101-kiosk-1.secret", "site-101-kiosk-2.secret"])
        #expect(try directory.files("bundles/site-102") == ["broker.cert", "site-102-kiosk-1.secret"])
        #expect(try directory.mode("bundles/site-102") == 0o700 && directory.mode("bundles/site-102/site-102-kiosk-1.secret") == 0o600)
        #expect(try directory.files("allowed").contains("site-102-kiosk-1.cert"))
        #expect(try directory.files("bundles/broker/allowed") == directory.files("allowed"))

        let again = try directory.keys.add(grown)
        #expect(again.made.isEmpty && again.bundles.isEmpty && !again.allowList)

        // A kiosk moved to another site keeps its key; both sites' bundles change.
        let moved = try inventory(
            grownInventory.replacingOccurrences(of: #"["site-101-kiosk-1", "site-101-kiosk-2"]"#, with: #"["site-101-kiosk-1"]"#)
                .replacingOccurrences(of: #"["site-102-kiosk-1"]"#, with: #"["site-102-kiosk-1", "site-101-kiosk-2"]"#))
        let key = try directory.publicKey("site-101-kiosk-2")
        let move = try directory.keys.add(moved)
        #expect(move.made.isEmpty && move.moved == ["site-101-kiosk-2"] && move.bundles.sorted() == ["site-101", "site-102"])
        #expect(try directory.publicKey("site-101-kiosk-2") == key)
        #expect(try directory.files("bundles/site-101") == ["broker.cert", "site-101-kiosk-1.secret"])

        // A principal dropped from the inventory stays allowed, and add says so.
        let dropped = try directory.keys.add(try inventory())
        #expect(dropped.made.isEmpty && dropped.notes.contains { $0.contains("'site-102-kiosk-1'") && $0.contains("keys revoke") })
        #expect(try directory.files("allowed").contains("site-102-kiosk-1.cert"))

        let elsewhere = #expect(throws: DeploymentKeys.Failure.self) {
            try directory.keys.add(try inventory(exampleInventory.replacingOccurrences(of: "riverside-coc", with: "eastside-coc")))
        }
        #expect(elsewhere?.code == .refused && elsewhere?.message.contains("eastside-coc") == true)
    }

    @Test("bundle HOST writes that host's bundle again from KEYDIR: what is missing comes back, anything else goes")
    func bundle() throws {
        let directory = try KeyDirectory()
        defer { directory.remove() }
        try directory.keys.initialise(try inventory())
        try FileManager.default.removeItem(atPath: directory.path("bundles/workers-1/eto.secret"))
        try Data("{}".utf8).write(to: URL(fileURLWithPath: directory.path("bundles/workers-1/stray.secret")))
        try FileManager.default.copyItem(
            atPath: directory.path("secret/workers-2-eto.secret"), toPath: directory.path("bundles/workers-1/other.secret"))
        let changes = try directory.keys.bundle("workers-1")
        #expect(changes.bundles == ["workers-1"])
        #expect(try directory.files("bundles/workers-1") == Self.bundles["workers-1"])
        #expect(try Certificate.load(secretFile: directory.path("bundles/workers-1/eto.secret")).name == "workers-1-eto")
        #expect(try directory.keys.bundle("workers-1").bundles.isEmpty, "nothing to do the second time")

        try FileManager.default.removeItem(atPath: directory.path("bundles/broker/allowed/ops-monitor.cert"))
        #expect(try directory.keys.bundle("broker").bundles == ["broker"])
        #expect(try directory.files("bundles/broker/allowed") == directory.files("allowed"))

        let unknown = #expect(throws: DeploymentKeys.Failure.self) { try directory.keys.bundle("site-999") }
        #expect(
            unknown?.code == .unknownHost && unknown?.message.contains("'site-999'") == true
                && unknown?.message.contains("site-101") == true)
    }

    @Test(
        "a bad inventory is refused with a message naming what is wrong",
        arguments: [
            (#"{"deployment": "d", "broker_host": "b", "hosts": {"h": {"programs": ["broker", "fax"]}}}"#, "unknown program 'fax'"),
            (
                #"{"deployment": "d", "broker_host": "b", "hosts": {"a": {"programs": ["broker", "eto"], "kiosks": ["a-eto"]}}}"#,
                "duplicate principal name 'a-eto'"
            ),
            (
                #"{"deployment": "d", "broker_host": "b", "hosts": {"b": {"programs": ["broker"]}, "s": {"kiosks": ["kiosk 1"]}}}"#,
                "kiosk id 'kiosk 1' is not a valid certificate name"
            ),
            (#"{"deployment": "d", "hosts": {"b": {"programs": ["broker"]}}}"#, "'broker_host' is missing"),
            (#"{"deployment": "d", "broker_host": "b", "hosts": {"s": {"kiosks": ["k1"]}}}"#, "no host runs the broker"),
            (
                #"{"deployment": "d", "broker_host": "b", "hosts": {"b1": {"programs": ["broker"]}, "b2": {"programs": ["broker"]}}}"#,
                "two brokers: hosts 'b1' and 'b2'"
            ),
            (#"{"deployment": "d", "broker_host": "b", "hosts": {"b": {"program": ["broker"]}}}"#, "host 'b': unknown key 'program'"),
            (#"{"deployment": "d", "broker_host": "b", "hosts": {"../b": {"programs": ["broker"]}}}"#, "host name '../b'"),
            (
                #"{"deployment": "d", "broker_host": "b", "hosts": {"b": {"programs": ["broker"], "kiosks": ["broker"]}}}"#,
                "duplicate principal name 'broker'"
            ),
            (
                #"{"deployment": "d", "broker_host": "b", "hosts": {"b": {"programs": ["broker", "auth"], "kiosks": ["auth"]}}}"#,
                "would both be auth.secret"
            ),
            (#"{"deployment": "d", "broker_host": "b", "hosts": {"b": {"programs": ["broker"]}},}"#, "not valid JSON"),
        ])
    func badInventory(text: String, expected: String) throws {
        let failure = #expect(throws: DeploymentKeys.Failure.self) {
            try DeploymentInventory.parse(Data(text.utf8), source: "inventory.json")
        }
        #expect(failure?.code == .invalidInventory)
        #expect(failure?.message.contains(expected) == true, "\(String(describing: failure))")
        #expect(failure?.message.hasPrefix("inventory.json: ") == true)
    }

    @Test("revoke takes a key out of the allow-list and its bundle for good: add skips it until --reissue")
    func revoke() throws {
        let directory = try KeyDirectory()
        defer { directory.remove() }
        try directory.keys.initialise(try inventory(grownInventory))
        let old = try directory.publicKey("site-101-kiosk-1")
        let changes = try directory.keys.revoke("site-101-kiosk-1")
        #expect(changes.revoked == ["site-101-kiosk-1"] && changes.allowList && changes.bundles.sorted() == ["broker", "site-101"])
        #expect(try !directory.files("allowed").contains("site-101-kiosk-1.cert"))
        #expect(try !directory.files("bundles/broker/allowed").contains("site-101-kiosk-1.cert"))
        #expect(try directory.files("bundles/site-101") == ["broker.cert", "site-101-kiosk-2.secret"])
        #expect(!FileManager.default.fileExists(atPath: directory.path("secret/site-101-kiosk-1.secret")))
        #expect(!FileManager.default.fileExists(atPath: directory.path("public/site-101-kiosk-1.cert")))
        let state = try directory.keys.state()
        #expect(state.principal("site-101-kiosk-1") == nil)
        let revocation = try #require(state.revocation(of: "site-101-kiosk-1"))
        #expect(revocation.publicKey == old && revocation.host == "site-101" && revocation.role == "kiosk" && !revocation.time.isEmpty)

        let add = try directory.keys.add(try inventory(grownInventory))
        #expect(add.made.isEmpty && add.notes.contains { $0.contains("skipped 'site-101-kiosk-1'") && $0.contains("--reissue") })
        #expect(try !directory.files("allowed").contains("site-101-kiosk-1.cert"))

        let twice = try directory.keys.revoke("site-101-kiosk-1")
        #expect(twice.revoked.isEmpty && twice.notes.contains { $0.contains("revoked already") })

        let unknown = #expect(throws: DeploymentKeys.Failure.self) { try directory.keys.revoke("site-999-kiosk-1") }
        #expect(unknown?.code == .unknownPrincipal && unknown?.message.contains("'site-999-kiosk-1'") == true)
        let broker = #expect(throws: DeploymentKeys.Failure.self) { try directory.keys.revoke("broker") }
        #expect(broker?.code == .refused && broker?.message.contains("keys rotate broker") == true)
        let active = #expect(throws: DeploymentKeys.Failure.self) {
            try directory.keys.add(try inventory(grownInventory), reissue: ["site-101-kiosk-2"])
        }
        #expect(active?.code == .refused && active?.message.contains("keys rotate") == true)

        let reissued = try directory.keys.add(try inventory(grownInventory), reissue: ["site-101-kiosk-1"])
        #expect(reissued.made.map(\.name) == ["site-101-kiosk-1"])
        #expect(try directory.publicKey("site-101-kiosk-1") != old)
        #expect(try directory.files("bundles/site-101") == ["broker.cert", "site-101-kiosk-1.secret", "site-101-kiosk-2.secret"])
        #expect(try directory.files("allowed").contains("site-101-kiosk-1.cert"))
    }

    @Test("rotate gives a principal a new key under the same name; the old one stays allowed until revoke --previous")
    func rotate() throws {
        let directory = try KeyDirectory()
        defer { directory.remove() }
        try directory.keys.initialise(try inventory())
        let name = "workers-1-eto"
        let old = try Certificate.load(publicFile: directory.path("public/\(name).cert"))
        let changes = try directory.keys.rotate(name)
        #expect(changes.made.map(\.name) == [name] && changes.bundles.sorted() == ["broker", "workers-1"])
        let new = try Certificate.load(secretFile: directory.path("bundles/workers-1/eto.secret"))
        #expect(new.name == name && new.role == .worker(service: "eto") && new.publicKey != old.publicKey)
        #expect(try directory.files("allowed").filter { $0.hasPrefix(name) } == ["\(name).cert", "\(name).previous.cert"])
        for allowed in ["allowed", "bundles/broker/allowed"] {
            let list = try AllowList(directory: directory.path(allowed))
            #expect(list.certificate(for: old.publicKey)?.name == name && list.certificate(for: new.publicKey)?.name == name)
        }
        let twice = #expect(throws: DeploymentKeys.Failure.self) { try directory.keys.rotate(name) }
        #expect(twice?.code == .refused && twice?.message.contains("--previous") == true)

        let ended = try directory.keys.revoke(name, previousOnly: true)
        #expect(ended.revoked == ["\(name).previous"] && ended.bundles == ["broker"])
        let list = try AllowList(directory: directory.path("bundles/broker/allowed"))
        #expect(list.certificate(for: old.publicKey) == nil && list.certificate(for: new.publicKey)?.name == name)
        #expect(try directory.keys.state().revoked.map(\.reason) == ["rotated"])
        #expect(try directory.keys.state().principal(name)?.previousKey == nil)
        let none = #expect(throws: DeploymentKeys.Failure.self) { try directory.keys.revoke(name, previousOnly: true) }
        #expect(none?.code == .refused)

        // The broker's key: no overlap, every bundle gets the new broker.cert.
        let broker = try directory.keys.rotate("broker")
        #expect(Set(broker.bundles) == Set(Self.bundles.keys))
        let brokerKey = try Certificate.load(secretFile: directory.path("bundles/broker/broker.secret")).publicKey
        #expect(try Certificate.load(publicFile: directory.path("bundles/site-101/broker.cert")).publicKey == brokerKey)
    }

    @Test("the allow-list accepts two certificates of one principal only as <name>.cert and <name>.previous.cert of the same role")
    func allowListRotationOnly() throws {
        let directory = try KeyDirectory()
        defer { directory.remove() }
        try directory.keys.initialise(try inventory())
        let allowed = directory.path("allowed")
        try FileManager.default.copyItem(atPath: "\(allowed)/ops-monitor.cert", toPath: "\(allowed)/ops-monitor-copy.cert")
        #expect(throws: Certificate.Failure.self) { try AllowList(directory: allowed) }
        try FileManager.default.moveItem(atPath: "\(allowed)/ops-monitor-copy.cert", toPath: "\(allowed)/ops-monitor.previous.cert")
        #expect(try AllowList(directory: allowed).count == 10, "the same key twice counts once")
    }
}

/// The `secret_key` field of a secret certificate file.
func secretKeyText(_ path: String) throws -> String {
    let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    return try #require(object["secret_key"] as? String)
}
