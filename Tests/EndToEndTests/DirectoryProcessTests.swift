import Foundation
import Logging
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// `switchboard-directory` as a real process between a broker, the emulator and `auth`: the
/// Directory's changes reach the journal, the bus's requests reach the Directory, and neither
/// comes back the other way; an empty list from a broken Directory deletes nothing.
@Suite("Directory worker (processes)", .serialized, .timeLimit(.minutes(2)))
struct DirectoryWorkerProcessTests {
    static let account = "outreach-team"
    static let password = "dir-demo-Passw0rd!"

    struct Stack {
        let programs: Programs
        let processes: [ChildProcess]
        let endpoints: Programs.Endpoints
        let base: String

        var journal: String { programs.directory.path("broker/journal.sqlite") }

        func stop() { for process in processes { process.signal(SIGKILL) } }

        func syncerArguments() -> [String] {
            [
                "--groups", endpoints.groups, "--service", endpoints.service, "--ingest", endpoints.ingest, "--data-dir",
                programs.directory.path("directory-state"),
            ]
        }

        /// The journal's events of `type`, as JSON objects.
        func events(_ type: String) throws -> [[String: Any]] {
            try JournalFile.contents(at: journal, type: type).compactMap {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        func facts(_ type: String) throws -> [[String: Any]] { try events(type).filter { $0["source"] as? String == "directory" } }

        @discardableResult
        func control(
            _ method: HTTPRequest.Method, _ path: String, query: [(name: String, value: String?)] = [], body: String? = nil
        )
            async throws -> Data
        {
            let http = try SwitchboardHTTPClient(logger: Logger(label: "control"))
            var request = HTTPRequest(
                method, base, path: ["_emulator", .plain(path)], query: query, api: .generic("control"), operation: "control")
            if let body { request.body = .raw(Data(body.utf8), contentType: "application/json") }
            do {
                let response = try await http.response(for: request)
                try response.requireSuccess()
                try await http.shutdown()
                return response.body
            } catch {
                try? await http.shutdown()
                throw error
            }
        }

        /// The emulator's sequence number of its last logged request.
        func lastRequest() async throws -> Int {
            let data = try await control(.get, "requests", query: [("api", "directory")])
            let entries = (try JSONSerialization.jsonObject(with: data) as? [[String: Any]]) ?? []
            return entries.compactMap { $0["seq"] as? Int }.max() ?? 0
        }

        /// Waits until the syncer has listed the people `count` more times after request `mark`.
        func waitForPolls(after mark: Int, count: Int = 2) async throws {
            try await waitUntil("\(count) polls after request \(mark)", timeout: .seconds(20), interval: .milliseconds(100)) {
                let data = try await control(.get, "requests", query: [("api", "directory"), ("after", String(mark))])
                let entries = (try JSONSerialization.jsonObject(with: data) as? [[String: Any]]) ?? []
                return entries.filter {
                    ($0["method"] as? String) == "GET" && (($0["path"] as? String) ?? "").hasPrefix("/directory/people/")
                }
                .count >= count
            }
        }

        /// FileMaker's Staff records that mirror a Directory person: DirectoryID → Name.
        func staff() async throws -> [String: String] {
            let http = try SwitchboardHTTPClient(logger: Logger(label: "reader"))
            let client = FileMakerClient(http: http, serverURL: base, database: "Shelter", logger: Logger(label: "reader"))
            do {
                let session = try await client.logIn(account: "reports", password: "fm-reports-Passw0rd!")
                let found = try await client.records(layout: "Staff", limit: 500, auth: .fixed(session))
                try? await client.logOut(session)
                try await http.shutdown()
                var mirror: [String: String] = [:]
                for record in found.data {
                    if let id = record["DirectoryID"]?.description, !id.isEmpty { mirror[id] = record["Name"]?.description ?? "" }
                }
                return mirror
            } catch {
                try? await http.shutdown()
                throw error
            }
        }

        /// Runs the Directory client as an outside user of the Directory, with its own log-in.
        func directory<T: Sendable>(_ body: (DirectoryClient, CredentialSource<Directory.APIKey>) async throws -> T) async throws -> T {
            let http = try SwitchboardHTTPClient(logger: Logger(label: "outside"))
            let client = DirectoryClient(http: http, baseURL: base + "/directory", logger: Logger(label: "outside"))
            do {
                let key = try await client.logIn(user: DirectoryWorkerProcessTests.account, password: DirectoryWorkerProcessTests.password)
                let value = try await body(client, .fixed(key))
                try await http.shutdown()
                return value
            } catch {
                try? await http.shutdown()
                throw error
            }
        }
    }

    func stack(_ directory: TemporaryDirectory) async throws -> Stack {
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        let emulator = try programs.start("switchboard-emulator", ["--port", "0", "--log-level", "warning"], log: "emulator.log")
        var base: String?
        try await waitUntil("the emulator says it is listening") {
            guard emulator.isRunning else { throw WaitTimedOut(description: "the emulator exited: \(programs.read("emulator.log"))") }
            base = programs.read("emulator.log").split(separator: "\n").first { $0.hasPrefix("listening ") }.map {
                String($0.dropFirst("listening ".count))
            }
            return base != nil
        }
        let url = try #require(base)
        let accounts = directory.path("accounts.json")
        let text = """
            {"accounts": [{"backend": "directory", "account": "\(Self.account)", "password": "\(Self.password)",
              "base_url": "\(url)/directory"},
              {"backend": "filemaker", "account": "switchboard", "password": "fm-demo-Passw0rd!", "base_url": "\(url)",
              "options": {"database": "Shelter"}}]}
            """
        _ = FileManager.default.createFile(atPath: accounts, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let auth = try programs.start(
            "switchboard-auth",
            [
                "--accounts-file", accounts, "--service", endpoints.service, "--ingest", endpoints.ingest, "--data-dir",
                directory.path("auth-state"),
            ], log: "auth.log")
        return Stack(programs: programs, processes: [auth, emulator, broker], endpoints: endpoints, base: url)
    }

    @Test(
        "a person added in the Directory becomes a person.created fact and a FileMaker Staff record; a person.deleted request removes them from both; an add request adds one with one fact; the poll repeats neither; a transient empty list is held back and deletes nothing"
    )
    func syncsBothWays() async throws {
        let directory = try TemporaryDirectory("worker-directory")
        defer { directory.remove() }
        let stack = try await stack(directory)
        defer { stack.stop() }
        let programs = stack.programs
        let syncer = try programs.start(
            "switchboard-directory",
            stack.syncerArguments() + ["--url", stack.base + "/directory", "--interval", "300ms", "--max-missing", "0.5"],
            log: "directory.log")
        defer { syncer.signal(SIGKILL) }
        // The FileMaker writer mirrors the Directory's facts into Staff.
        let writer = try programs.start(
            "switchboard-filemaker",
            [
                "--groups", stack.endpoints.groups, "--service", stack.endpoints.service, "--ingest", stack.endpoints.ingest, "--url",
                stack.base, "--data-dir", directory.path("filemaker-state"),
            ], log: "filemaker.log")
        defer { writer.signal(SIGKILL) }

        // The first poll publishes the seed's three people.
        try await waitUntil("the seed's people are published", timeout: .seconds(30), interval: .milliseconds(100)) {
            guard syncer.isRunning else { throw WaitTimedOut(description: "the syncer exited: \(programs.read("directory.log"))") }
            return try stack.facts("person.created").count >= 3
        }

        // Directory → bus.
        let eve = try await stack.directory { client, key in
            try await client.addPerson(name: "Eve Stone", office: "Harbor Family Center", auth: key)
        }
        try await waitUntil("Eve's person.created fact", timeout: .seconds(20), interval: .milliseconds(100)) {
            try stack.facts("person.created").contains { $0["person_id"] as? Int == eve.id && $0["name"] as? String == "Eve Stone" }
        }

        try await waitUntil("Eve is in FileMaker's Staff", timeout: .seconds(30), interval: .milliseconds(200)) {
            guard writer.isRunning else { throw WaitTimedOut(description: "the writer exited: \(programs.read("filemaker.log"))") }
            return try await stack.staff()[String(eve.id)] == "Eve Stone"
        }

        // Bus → Directory: a delete request, published by the operator's subcommand.
        let deletion = try programs.start(
            "switchboard-directory", ["delete", "--person-id", String(eve.id), "--source", "kiosk"] + stack.syncerArguments(),
            log: "delete.log")
        #expect(await deletion.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("delete.log"))")
        try await waitUntil("Eve is gone from the Directory", timeout: .seconds(20), interval: .milliseconds(100)) {
            try await stack.directory { client, key in try await client.people(auth: key) }.allSatisfy { $0.id != eve.id }
        }
        var mark = try await stack.lastRequest()
        try await stack.waitForPolls(after: mark)
        // One fact for the delete, from the request's handler; the poll adds none.
        let deletions = try stack.facts("person.deleted")
        #expect(deletions.count == 1 && deletions.first?["person_id"] as? Int == eve.id, "\(deletions)")
        try await waitUntil("Eve is gone from FileMaker's Staff", timeout: .seconds(30), interval: .milliseconds(200)) {
            try await stack.staff()[String(eve.id)] == nil
        }

        // Bus → Directory: an add request.
        let addition = try programs.start(
            "switchboard-directory", ["add", "--name", "Marcus Bell", "--office", "Eastside Outreach"] + stack.syncerArguments(),
            log: "add.log")
        #expect(await addition.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("add.log"))")
        #expect(programs.read("add.log").contains("published person.created"))
        try await waitUntil("Marcus is in the Directory", timeout: .seconds(20), interval: .milliseconds(100)) {
            try await stack.directory { client, key in try await client.people(auth: key) }.contains { $0.name == "Marcus Bell" }
        }
        mark = try await stack.lastRequest()
        try await stack.waitForPolls(after: mark)
        let marcus = try stack.facts("person.created").filter { $0["name"] as? String == "Marcus Bell" }
        #expect(marcus.count == 1, "one fact for the add, from its handler: \(marcus)")
        let marcusID = try #require(marcus.first?["person_id"] as? Int)
        try await waitUntil("Marcus is in FileMaker's Staff", timeout: .seconds(30), interval: .milliseconds(200)) {
            try await stack.staff()[String(marcusID)] == "Marcus Bell"
        }
        let requests = try stack.events("person.created").filter { $0["source"] as? String == "operator" }
        #expect(requests.count == 1 && requests.first?["person_id"] == nil)

        // The guard: one empty answer is held back, and the list back to normal deletes nothing.
        try await stack.control(
            .post, "faults", body: #"{"api":"directory","method":"GET","path":"/directory/people/*","kind":"body","body":[],"count":1}"#)
        try await waitUntil("directory.sync.suspect", timeout: .seconds(20), interval: .milliseconds(100)) {
            try !stack.events("directory.sync.suspect").isEmpty
        }
        let suspect = try #require(try stack.events("directory.sync.suspect").first)
        #expect(suspect["current"] as? Int == 0 && suspect["previous"] as? Int == 4 && suspect["account"] as? String == Self.account)
        mark = try await stack.lastRequest()
        try await stack.waitForPolls(after: mark)
        #expect(try stack.facts("person.deleted").count == 1, "a transient empty list published deletes")
        #expect(try await stack.staff().count == 4, "the Staff mirror lost no one")
        let people = try await stack.directory { client, key in try await client.people(auth: key) }
        #expect(people.count == 4)

        syncer.signal(SIGTERM)
        #expect(await syncer.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("directory.log"))")
        #expect(programs.read("directory.log").contains("ready: joined the group"))
        for log in ["directory.log", "add.log", "delete.log", "auth.log"] {
            #expect(!programs.read(log).contains(Self.password), "\(log) shows the password")
        }
    }

    @Test("bad settings are refused at start, naming the setting")
    func badSettings() async throws {
        let directory = try TemporaryDirectory("worker-directory-config")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        for (arguments, expected) in [
            (["--interval", "5ms"], "interval from flag --interval: must be from 100ms to 1d"),
            (["--max-missing", "0"], "max_missing from flag --max-missing: must be above 0"),
            (["--url", "ftp://x"], "url from flag --url: must be an http(s) URL"),
            (["add", "--name", " ", "--office", "x"], "--name must be"),
            (["delete", "--office", "x"], "give --person-id, or --name and --office"),
        ] {
            let process = try programs.start("switchboard-directory", arguments, log: "bad.log")
            #expect(await process.waitForExit(timeout: .seconds(20)) != 0)
            #expect(programs.read("bad.log").contains(expected), "\(arguments): \(programs.read("bad.log"))")
        }
        let help = try programs.start("switchboard-directory", ["--help"], log: "help.log")
        #expect(await help.waitForExit(timeout: .seconds(20)) == 0)
        for option in ["--url", "--account", "--interval", "--max-missing", "--data-dir", "--groups", "--ingest", "--certificate"] {
            #expect(programs.read("help.log").contains(option), "--help does not document \(option)")
        }
    }
}
