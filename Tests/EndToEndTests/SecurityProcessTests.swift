import Foundation
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("Keys and a secure broker (processes)")
struct SecurityProcessTests {
    /// How a CURVE handshake with `keys` against `endpoint` ends.
    static func handshake(_ io: IOThread, keys: CurveKeyPair, server: CurveKey, endpoint: String) async throws -> SocketEvent.Kinds {
        let monitorEndpoint = "inproc://e2e-handshake-\(UUID().uuidString)"
        let socket = try await io.open(.dealer, linger: 0) { socket in
            try socket.set([.curvePublicKey(keys.publicKey), .curveSecretKey(keys.secretKey), .curveServerKey(server)])
            try socket.startMonitor(
                endpoint: monitorEndpoint, events: [.handshakeSucceeded, .handshakeFailedAuth, .handshakeFailedProtocol])
        }
        let monitor = try await io.open(.pair, linger: 0) { try $0.connect(monitorEndpoint) }
        try await socket.perform { try $0.connect(endpoint) }
        let message = try await monitor.receive(timeout: .seconds(20))
        await socket.close()
        await monitor.close()
        guard let message else { throw WaitTimedOut(description: "no handshake event from \(endpoint)") }
        return try SocketEvent(frames: message.frames).kind
    }

    @Test("keygen makes certificates; the broker runs CURVE with them, refuses a readable secret, and reloads its allow-list on SIGHUP")
    func keysAndReload() async throws {
        let directory = try TemporaryDirectory("keys")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        for (name, role) in [("broker", "broker"), ("riverside-1", "kiosk"), ("ops-1", "monitor")] {
            let keygen = try programs.start(
                "switchboard", ["keygen", "--name", name, "--role", role, "--out", directory.path("secrets")], log: "keygen-\(name).log")
            #expect(await keygen.waitForExit(timeout: .seconds(30)) == 0, "\(programs.read("keygen-\(name).log"))")
        }
        let bad = try programs.start(
            "switchboard", ["keygen", "--name", "x", "--role", "janitor", "--out", directory.path("secrets")], log: "keygen-bad.log")
        #expect(await bad.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("keygen-bad.log").contains("--role must be"))
        let secret = directory.path("secrets/riverside-1.secret")
        #expect((try FileManager.default.attributesOfItem(atPath: secret)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(!programs.read("keygen-riverside-1.log").contains(try Certificate.load(secretFile: secret).secretKey!.z85))

        try FileManager.default.createDirectory(atPath: directory.path("certs"), withIntermediateDirectories: true)
        for name in ["riverside-1", "ops-1"] {
            try FileManager.default.copyItem(atPath: directory.path("secrets/\(name).cert"), toPath: directory.path("certs/\(name).cert"))
        }
        // A secret certificate that others can read is refused at start, with the fix named.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: directory.path("secrets/broker.secret"))
        let refused = try programs.start(
            "switchboard-broker",
            [
                "--data-dir", directory.path("b0"), "--security-key", directory.path("secrets/broker.secret"), "--security-certificates",
                directory.path("certs"),
                "--ingest", "tcp://127.0.0.1:*", "--fanout", "tcp://127.0.0.1:*", "--replay", "tcp://127.0.0.1:*", "--service",
                "tcp://127.0.0.1:*", "--groups", "tcp://127.0.0.1:*",
            ],
            log: "refused.log")
        #expect(await refused.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("refused.log").contains("chmod 600"), "\(programs.read("refused.log"))")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.path("secrets/broker.secret"))

        let broker = try programs.start(
            "switchboard-broker",
            [
                "--data-dir", directory.path("broker"), "--security-key", directory.path("secrets/broker.secret"),
                "--security-certificates",
                directory.path("certs"),
                "--ingest", "tcp://127.0.0.1:*", "--fanout", "tcp://127.0.0.1:*", "--replay", "tcp://127.0.0.1:*", "--service",
                "tcp://127.0.0.1:*", "--groups", "tcp://127.0.0.1:*",
            ],
            log: "broker.log")
        try await waitUntil("the broker is up") { FileManager.default.fileExists(atPath: directory.path("broker/endpoints.json")) }
        let endpoints = try JSONDecoder().decode(
            Programs.Endpoints.self, from: Data(contentsOf: URL(fileURLWithPath: directory.path("broker/endpoints.json"))))
        let server = try Certificate.load(publicFile: directory.path("secrets/broker.cert")).publicKey
        let kiosk = try #require(try Certificate.load(secretFile: secret).keyPair)
        let context = try Context()
        let io = try IOThread(context: context)
        #expect(try await Self.handshake(io, keys: kiosk, server: server, endpoint: endpoints.ingest) == .handshakeSucceeded)
        let ops = try #require(try Certificate.load(secretFile: directory.path("secrets/ops-1.secret")).keyPair)
        #expect(
            try await Self.handshake(io, keys: ops, server: server, endpoint: endpoints.ingest) == .handshakeFailedAuth,
            "a monitor may not publish")
        #expect(try await Self.handshake(io, keys: ops, server: server, endpoint: endpoints.replay) == .handshakeSucceeded)

        // The kiosk program with its certificate delivers; told another name, it refuses to start.
        let kioskArguments = [
            "--certificate", secret, "--broker-key", directory.path("secrets/broker.cert"), "--ingest", endpoints.ingest, "--outbox",
            directory.path("kiosk/outbox.sqlite"),
        ]
        let checkin = try programs.start(
            "switchboard-kiosk", ["checkin", "--first", "Ana", "--last", "Diaz", "--site", "12", "--program", "3"] + kioskArguments,
            log: "checkin.log")
        #expect(await checkin.waitForExit(timeout: .seconds(30)) == 0, "\(programs.read("checkin.log"))")
        let rows = try JournalFile.rows(at: directory.path("broker/journal.sqlite"))
        #expect(rows.filter { $0.producer == "riverside-1" }.count == 1)
        #expect(rows.filter { $0.producer == "broker" }.count >= 1, "the monitor refused at ingest is a security.refused event")
        let renamed = try programs.start(
            "switchboard-kiosk",
            ["checkin", "--id", "eastside-9", "--first", "Li", "--last", "Chen", "--site", "12", "--program", "3"]
                + kioskArguments, log: "renamed.log")
        #expect(await renamed.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("renamed.log").contains("differs from the certificate's principal"))
        let halfConfigured = try programs.start(
            "switchboard-kiosk", ["status", "--certificate", secret, "--outbox", directory.path("kiosk/outbox.sqlite")], log: "half.log")
        #expect(await halfConfigured.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("half.log").contains("no broker key"))

        // Revoke the kiosk: remove its certificate and send SIGHUP.
        try FileManager.default.removeItem(atPath: directory.path("certs/riverside-1.cert"))
        broker.signal(SIGHUP)
        try await waitUntil("the kiosk is refused after the reload") {
            try await Self.handshake(io, keys: kiosk, server: server, endpoint: endpoints.ingest) == .handshakeFailedAuth
        }
        #expect(programs.read("broker.log").contains("allow-list reloaded"))
        await io.shutdown()
        await context.terminate()
        #expect(await broker.stop() == 0)
        #expect(!programs.read("broker.log").contains(kiosk.secretKey.z85), "no secret in the log")
    }

    static func mode(_ path: String) throws -> Int? {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
    }

    @Test("keygen makes --out 0700, refuses an existing one group or others can enter (naming it and chmod 700), and uses a 0700 one")
    func keygenDirectoryIsPrivate() async throws {
        let directory = try TemporaryDirectory("keygen-dir")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        func keygen(_ name: String, out: String) async throws -> (Int32?, String) {
            let process = try programs.start(
                "switchboard", ["keygen", "--name", name, "--role", "kiosk", "--out", out], log: "keygen-\(name).log")
            return (await process.waitForExit(timeout: .seconds(30)), programs.read("keygen-\(name).log"))
        }
        let fresh = directory.path("new/keys")
        let (made, madeLog) = try await keygen("k1", out: fresh)
        #expect(made == 0, "\(madeLog)")
        #expect(try Self.mode(fresh) == 0o700)
        #expect(try Self.mode(fresh + "/k1.secret") == 0o600)

        let shared = directory.path("shared")
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
        chmod(shared, 0o755)
        let (refused, refusedLog) = try await keygen("k2", out: shared)
        #expect(refused != 0 && refused != nil)
        #expect(refusedLog.contains(shared) && refusedLog.contains("chmod 700 \(shared)"), "\(refusedLog)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: shared).isEmpty, "nothing written")
        #expect(try Self.mode(shared) == 0o755, "the directory is left as it was")

        chmod(shared, 0o700)
        let (fixed, fixedLog) = try await keygen("k3", out: shared)
        #expect(fixed == 0, "\(fixedLog)")
        #expect(FileManager.default.fileExists(atPath: shared + "/k3.secret"))

        let withoutOut = try programs.start("switchboard", ["keygen", "--name", "k4", "--role", "kiosk"], log: "keygen-k4.log")
        #expect(await withoutOut.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("keygen-k4.log").contains("--out"), "--out is required: \(programs.read("keygen-k4.log"))")
    }

    @Test("a broker process refuses a journal others can read, naming it and chmod 600; a fresh one's files are private")
    func brokerRefusesAReadableJournal() async throws {
        let directory = try TemporaryDirectory("broker-files")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (first, _) = try await programs.broker()
        let journal = directory.path("broker/journal.sqlite")
        #expect(try Self.mode(directory.path("broker")) == 0o700)
        for path in [journal, journal + "-wal", journal + "-shm"] {
            #expect(try Self.mode(path) == 0o600, "\(path)")
        }
        #expect(await first.stop() == 0)

        chmod(journal, 0o644)
        let refused = try programs.start(
            "switchboard-broker",
            [
                "--data-dir", directory.path("broker"), "--insecure", "--ingest", "tcp://127.0.0.1:*", "--fanout", "tcp://127.0.0.1:*",
                "--replay", "tcp://127.0.0.1:*", "--service", "tcp://127.0.0.1:*",
            ],
            log: "refused.log")
        #expect(await refused.waitForExit(timeout: .seconds(30)) != 0)
        let log = programs.read("refused.log")
        #expect(log.contains(journal) && log.contains("chmod 600 \(journal)"), "\(log)")

        chmod(journal, 0o600)
        let (fixed, _) = try await programs.broker(log: "fixed.log")
        #expect(await fixed.stop() == 0)
    }
}
