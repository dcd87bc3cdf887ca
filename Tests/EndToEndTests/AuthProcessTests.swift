import Foundation
import Logging
import SwitchboardBus
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

/// `switchboard-emulator` and `switchboard-auth` as real processes beside a broker process.
@Suite("switchboard-auth and switchboard-emulator (processes)", .timeLimit(.minutes(2)))
struct AuthProcessTests {
    /// Starts the emulator on a free port and returns its base URL.
    func emulator(_ programs: Programs) async throws -> (ChildProcess, String) {
        let process = try programs.start("switchboard-emulator", ["--port", "0", "--log-level", "warning"], log: "emulator.log")
        var base: String?
        try await waitUntil("the emulator says it is listening") {
            guard process.isRunning else { throw WaitTimedOut(description: "the emulator exited: \(programs.read("emulator.log"))") }
            base = programs.read("emulator.log").split(separator: "\n").first { $0.hasPrefix("listening ") }.map {
                String($0.dropFirst("listening ".count))
            }
            return base != nil
        }
        return (process, try #require(base))
    }

    func writeAccounts(_ programs: Programs, base: String, mode: Int) throws -> String {
        let path = programs.directory.path("accounts.json")
        let text = """
            {"accounts": [
              {"backend": "filemaker", "account": "switchboard", "password": "fm-demo-Passw0rd!", "base_url": "\(base)",
               "options": {"database": "Shelter"}},
              {"backend": "directory", "account": "outreach-team", "password": "dir-demo-Passw0rd!", "base_url": "\(base)/directory"}
            ]}
            """
        try? FileManager.default.removeItem(atPath: path)
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        return path
    }

    @Test(
        "auth serves token.get to a worker, logs in once, and logs out of FileMaker when stopped; --credentials-key-file keeps the sealing key out of its data directory"
    )
    func servesTokens() async throws {
        let directory = try TemporaryDirectory("auth-process")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        let (emulator, base) = try await emulator(programs)
        defer {
            broker.signal(SIGKILL)
            emulator.signal(SIGKILL)
        }
        let accounts = try writeAccounts(programs, base: base, mode: 0o600)
        try FileManager.default.createDirectory(
            atPath: directory.path("keys"), withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let auth = try programs.start(
            "switchboard-auth",
            [
                "--accounts-file", accounts, "--service", endpoints.service, "--ingest", endpoints.ingest, "--data-dir",
                directory.path("auth-state"), "--keep-alive", "1h", "--credentials-key-file", directory.path("keys/credentials.key"),
            ], log: "auth.log")

        let context = try Context()
        let io = try IOThread(context: context)
        var logger = Logger(label: "auth-process-test")
        logger.logLevel = .critical
        var settings = ServiceClient.Settings()
        settings.timeout = .seconds(20)
        let client = ServiceClient(io: io, endpoint: endpoints.service, settings: settings, logger: logger)
        try await waitUntil("auth registers with the broker") { (try? await client.isAlive("auth")) == true }
        let body = Data(#"{"backend":"filemaker","account":"switchboard"}"#.utf8)
        var tokens = Set<String>()
        for _ in 0..<3 {
            let reply = try await client.request(service: "auth", operation: "token.get", content: body, idempotent: true)
            let object = try #require(try JSONSerialization.jsonObject(with: reply.content) as? [String: Any])
            tokens.insert(try #require(object["token"] as? String))
            #expect((object["headers"] as? [String: String])?["Authorization"]?.hasPrefix("Bearer ") == true)
        }
        #expect(tokens.count == 1, "auth reuses its token")
        let status = try await client.request(service: "auth", operation: "status")
        #expect(String(decoding: status.content, as: UTF8.self).contains("\"logged_in\":true"))

        // auth.token.issued reaches the journal through auth's outbox (nothing else publishes here).
        try await waitUntil("auth's event is journaled") { programs.journalCount() >= 1 }

        auth.signal(SIGTERM)
        #expect(await auth.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("auth.log"))")
        let log = programs.read("auth.log")
        #expect(log.contains("logged out"))
        let kept = try FileManager.default.contentsOfDirectory(atPath: directory.path("auth-state"))
        #expect(kept.contains("credentials.sealed") && !kept.contains("credentials.key"), "\(kept)")
        #expect(FileManager.default.fileExists(atPath: directory.path("keys/credentials.key")))
        for secret in ["fm-demo-Passw0rd!", "dir-demo-Passw0rd!"] + Array(tokens) {
            #expect(!log.contains(secret), "auth's log shows a secret")
        }
        // The emulator saw one log-in and one log-out, the token is dead.
        let http = try SwitchboardHTTPClient(logger: logger)
        let requests =
            try await http.execute(
                HTTPRequest(
                    .get, base, path: ["_emulator", "requests"], query: [("api", "filemaker")], api: .generic("control"),
                    operation: "requests"),
                logger: logger
            ).text ?? ""
        try await http.shutdown()
        #expect(requests.components(separatedBy: "\"method\":\"POST\"").count - 1 == 1)
        #expect(requests.components(separatedBy: "\"method\":\"DELETE\"").count - 1 == 1)
        await client.close()
    }

    @Test("without --data-dir, auth keeps its outbox in .switchboard/auth/state (0700) and its auth.token.issued reaches the journal")
    func eventsWithoutDataDirectory() async throws {
        let directory = try TemporaryDirectory("auth-default-dir")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        let (emulator, base) = try await emulator(programs)
        defer {
            broker.signal(SIGKILL)
            emulator.signal(SIGKILL)
        }
        let accounts = try writeAccounts(programs, base: base, mode: 0o600)
        // The process runs in `directory`: the default data directory is relative to it.
        let auth = try programs.start(
            "switchboard-auth", ["--accounts-file", accounts, "--service", endpoints.service, "--ingest", endpoints.ingest], log: "auth.log"
        )
        let state = directory.path(".switchboard/auth/state")
        try await waitUntil("auth says where its outbox is") { programs.read("auth.log").contains("auth-outbox.sqlite") }
        #expect(programs.read("auth.log").contains(state + "/auth-outbox.sqlite"), "\(programs.read("auth.log"))")
        #expect((try FileManager.default.attributesOfItem(atPath: state)[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        #expect(
            (try FileManager.default.attributesOfItem(atPath: state + "/auth-outbox.sqlite")[.posixPermissions] as? NSNumber)?.intValue
                == 0o600)

        let context = try Context()
        let io = try IOThread(context: context)
        var logger = Logger(label: "auth-process-test")
        logger.logLevel = .critical
        var settings = ServiceClient.Settings()
        settings.timeout = .seconds(20)
        let client = ServiceClient(io: io, endpoint: endpoints.service, settings: settings, logger: logger)
        try await waitUntil("auth registers with the broker") { (try? await client.isAlive("auth")) == true }
        let reply = try await client.request(
            service: "auth", operation: "token.get", content: Data(#"{"backend":"filemaker","account":"switchboard"}"#.utf8),
            idempotent: true)
        #expect(reply.status == 200)
        try await waitUntil("auth.token.issued is journaled") { programs.journalCount() >= 1 }
        let producers = try JournalFile.rows(at: directory.path("broker/journal.sqlite")).map(\.producer)
        #expect(producers == ["auth"])
        auth.signal(SIGTERM)
        #expect(await auth.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("auth.log"))")
        await client.close()
    }

    @Test("switchboard-auth --help documents the default data directory and the accounts file, with an example")
    func helpDocumentsDataDirectoryAndAccounts() async throws {
        let directory = try TemporaryDirectory("auth-help")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let help = try programs.start("switchboard-auth", ["--help"], log: "help.log")
        #expect(await help.waitForExit(timeout: .seconds(20)) == 0)
        let text = programs.read("help.log")
        for words in [
            ".switchboard/auth/state", "auth.token.issued", #"{"accounts": ["#, #""backend": "filemaker""#, #""base_url""#,
            #""options": {"database": "Shelter"}"#, "EXAMPLE-not-a-real-password", "utc_offset", "chmod 600",
        ] {
            #expect(text.contains(words), "--help does not say \(words)")
        }
        // The example in --help is a document switchboard-auth accepts: give it as the
        // accounts and watch it start serving them.
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingPrefix(while: { $0 == " " }) }
        let first = try #require(lines.firstIndex { $0.hasPrefix(#"{"accounts": ["#) })
        let last = try #require(lines[first...].firstIndex { $0 == "]}" })
        let example = lines[first...last].joined(separator: "\n")
        let auth = try programs.start(
            "switchboard-auth", ["--service", "tcp://127.0.0.1:9", "--ingest", "tcp://127.0.0.1:9"], log: "example.log",
            environment: ["SWITCHBOARD_AUTH_ACCOUNTS": example])
        try await waitUntil("auth serves the example's accounts") {
            guard auth.isRunning else { throw WaitTimedOut(description: "auth exited: \(programs.read("example.log"))") }
            return programs.read("example.log").contains("auth serving")
        }
        #expect(programs.read("example.log").contains("filemaker/switchboard,eto/intake@example.org,directory/outreach-team,sap/outreach1"))
        // Its exit is not the point here (SIGTERM may beat its signal handler to it).
        auth.signal(SIGKILL)
        _ = await auth.waitForExit(timeout: .seconds(20))
    }

    @Test("auth refuses an accounts file others may read, naming it and the fix")
    func refusesReadableAccounts() async throws {
        let directory = try TemporaryDirectory("auth-process")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let accounts = try writeAccounts(programs, base: "http://127.0.0.1:1", mode: 0o644)
        let auth = try programs.start("switchboard-auth", ["--accounts-file", accounts], log: "auth.log")
        #expect(await auth.waitForExit(timeout: .seconds(20)) != 0)
        let log = programs.read("auth.log")
        #expect(log.contains(accounts) && log.contains("chmod 600"), "\(log)")
        #expect(!log.contains("fm-demo-Passw0rd!"))
    }

    @Test("the emulator refuses a seed it cannot use, naming the file and the field")
    func emulatorRefusesABadSeed() async throws {
        let directory = try TemporaryDirectory("emulator-process")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let seed = directory.path("seed.json")
        try Data(#"{"eto": {"ssoTokenMinutes": 60}}"#.utf8).write(to: URL(fileURLWithPath: seed))
        let emulator = try programs.start("switchboard-emulator", ["--port", "0", "--seed", seed], log: "emulator.log")
        #expect(await emulator.waitForExit(timeout: .seconds(20)) != 0)
        let log = programs.read("emulator.log")
        #expect(log.contains(seed) && log.contains("eto."), "\(log)")
    }
}
