import Foundation
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

/// Issue 26, item 9, as it was found: a certificate directory of mode 0777 and a world-writable
/// certificate claiming role admin, which the broker loaded silently.
@Suite("The allow-list's file modes (processes)")
struct AllowListModesProcessTests {
    @Test("the broker refuses to start on a 0777 allow-list, and a reload keeps out a world-writable admin certificate, saying why")
    func writableAllowList() async throws {
        let directory = try TemporaryDirectory("allow-list-modes")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        // Under umask 002 (a common default for users with a group of their own), keygen and the
        // README's `cp` must still give certificates only their owner can write.
        func underUmask002(_ log: String, _ command: [String]) async throws -> Int32? {
            let process = try programs.start(
                "sh", ["-c", #"umask 002 && exec "$0" "$@""#] + command, log: log, executable: "/bin/sh")
            return await process.waitForExit(timeout: .seconds(30))
        }
        for (name, role) in [("broker", "broker"), ("riverside-1", "kiosk"), ("intruder", "admin")] {
            let keygen = Programs.binaries.appendingPathComponent("switchboard").path
            let status = try await underUmask002(
                "keygen-\(name).log", [keygen, "keygen", "--name", name, "--role", role, "--out", directory.path("secrets")])
            #expect(status == 0, "\(programs.read("keygen-\(name).log"))")
            #expect(try SecurityProcessTests.mode(directory.path("secrets/\(name).cert")) == 0o644)
        }
        let certs = directory.path("certs")
        try FileManager.default.createDirectory(atPath: certs, withIntermediateDirectories: true)
        #expect(try await underUmask002("cp.log", ["/bin/cp", directory.path("secrets/riverside-1.cert"), certs + "/"]) == 0)
        chmod(certs, 0o777)
        func arguments(_ data: String) -> [String] {
            [
                "--data-dir", directory.path(data), "--security-key", directory.path("secrets/broker.secret"), "--security-certificates",
                certs,
                "--ingest", "tcp://127.0.0.1:*", "--fanout", "tcp://127.0.0.1:*", "--replay", "tcp://127.0.0.1:*", "--service",
                "tcp://127.0.0.1:*", "--groups", "tcp://127.0.0.1:*",
            ]
        }
        let refused = try programs.start("switchboard-broker", arguments("b0"), log: "refused.log")
        #expect(await refused.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("refused.log").contains("chmod go-w \(certs)"), "\(programs.read("refused.log"))")

        chmod(certs, 0o755)
        let broker = try programs.start("switchboard-broker", arguments("broker"), log: "broker.log")
        try await waitUntil("the broker is up") { FileManager.default.fileExists(atPath: directory.path("broker/endpoints.json")) }
        let endpoints = try JSONDecoder().decode(
            Programs.Endpoints.self, from: Data(contentsOf: URL(fileURLWithPath: directory.path("broker/endpoints.json"))))
        let server = try Certificate.load(publicFile: directory.path("secrets/broker.cert")).publicKey
        let kiosk = try #require(try Certificate.load(secretFile: directory.path("secrets/riverside-1.secret")).keyPair)
        let intruder = try #require(try Certificate.load(secretFile: directory.path("secrets/intruder.secret")).keyPair)
        let context = try Context()
        let io = try IOThread(context: context)

        // Someone other than the owner could have written this one: it must not count. The
        // broker notices the new file by itself (its directory watch); touching the file again
        // until it does covers a watch that started after the file was there.
        let planted = certs + "/intruder.cert"
        try FileManager.default.copyItem(atPath: directory.path("secrets/intruder.cert"), toPath: planted)
        chmod(planted, 0o666)
        var touches = 0.0
        func touch() throws {
            touches += 1
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: touches)], ofItemAtPath: planted)
        }
        try await waitUntil("the broker says why it kept its list: \(programs.read("broker.log"))", interval: .milliseconds(300)) {
            let log = programs.read("broker.log")
            if log.contains("allow-list not reloaded") && log.contains("chmod go-w \(planted)") { return true }
            try touch()
            return false
        }
        #expect(
            try await SecurityProcessTests.handshake(io, keys: intruder, server: server, endpoint: endpoints.replay) == .handshakeFailedAuth
        )
        #expect(
            try await SecurityProcessTests.handshake(io, keys: kiosk, server: server, endpoint: endpoints.ingest) == .handshakeSucceeded,
            "the previous list stays")

        // Once only its owner can write it, the certificate is loaded: the broker's watch notices
        // the chmod itself.
        chmod(planted, 0o644)
        try await waitUntil("the admin certificate is loaded once only its owner can write it", interval: .milliseconds(300)) {
            try await SecurityProcessTests.handshake(io, keys: intruder, server: server, endpoint: endpoints.replay) == .handshakeSucceeded
        }
        await io.shutdown()
        await context.terminate()
        #expect(await broker.stop() == 0)
    }
}
