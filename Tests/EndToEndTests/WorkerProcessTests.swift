import Foundation
import Logging
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// The workers as real processes: a broker, the emulators, `auth`, kiosks and the worker, with
/// faults and kills, counted at the back end afterwards.
@Suite("Workers (processes)", .serialized, .timeLimit(.minutes(5)))
struct WorkerProcessTests {
    static let fileMakerPassword = "fm-demo-Passw0rd!"

    struct Stack {
        let programs: Programs
        let broker: ChildProcess
        let endpoints: Programs.Endpoints
        let emulator: ChildProcess
        let base: String
        let auth: ChildProcess

        func stop() async {
            for process in [auth, emulator, broker] { process.signal(SIGKILL) }
        }

        /// Starts `switchboard-filemaker` against this stack.
        func fileMaker(_ log: String, extra: [String] = []) throws -> ChildProcess {
            try programs.start(
                "switchboard-filemaker",
                [
                    "--groups", endpoints.groups, "--service", endpoints.service, "--ingest", endpoints.ingest, "--url", base,
                    "--data-dir", programs.directory.path("filemaker-state"), "--credit", "16",
                ] + extra, log: log)
        }

        /// Posts a fault rule to the emulator's control API.
        func fault(_ rule: String) async throws {
            try await control(.post, "faults", body: rule)
        }

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

        /// The emulator's request log for one API: method, path, status of each call.
        func requests(_ api: String) async throws -> [[String: Any]] {
            let data = try await control(.get, "requests", query: [("api", api)])
            return (try JSONSerialization.jsonObject(with: data) as? [[String: Any]]) ?? []
        }

        /// Every CheckIns record's EventID, read through the Data API with a session of our own.
        func checkInEventIDs() async throws -> [String] {
            let http = try SwitchboardHTTPClient(logger: Logger(label: "reader"))
            let client = FileMakerClient(http: http, serverURL: base, database: "Shelter", logger: Logger(label: "reader"))
            do {
                let session = try await client.logIn(account: "reports", password: "fm-reports-Passw0rd!")
                var ids: [String] = []
                var offset = 1
                while true {
                    let page = try await client.records(layout: "CheckIns", offset: offset, limit: 500, auth: .fixed(session))
                    ids += page.data.compactMap { $0["EventID"]?.description }
                    if page.data.count < 500 { break }
                    offset += 500
                }
                try? await client.logOut(session)
                try await http.shutdown()
                return ids
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
            {"accounts": [{"backend": "filemaker", "account": "switchboard", "password": "\(Self.fileMakerPassword)", "base_url": "\(url)",
              "options": {"database": "Shelter"}}]}
            """
        _ = FileManager.default.createFile(atPath: accounts, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let auth = try programs.start(
            "switchboard-auth",
            [
                "--accounts", accounts, "--service", endpoints.service, "--ingest", endpoints.ingest, "--data-dir",
                directory.path("auth-state"), "--keep-alive", "3600",
            ], log: "auth.log")
        return Stack(programs: programs, broker: broker, endpoints: endpoints, emulator: emulator, base: url, auth: auth)
    }

    @Test(
        "two kiosks record 600 check-ins while the FileMaker writer is killed -9 and restarted, with 10 % 503s and a session expiry: exactly 600 records, no duplicate EventID"
    )
    func fileMakerExactlyOnce() async throws {
        let directory = try TemporaryDirectory("worker-filemaker")
        defer { directory.remove() }
        let stack = try await stack(directory)
        let programs = stack.programs
        defer { Task { await stack.stop() } }
        let seeded = Set(try await stack.checkInEventIDs())
        try await stack.fault(
            #"{"api": "filemaker", "method": "POST", "path": "/*/records", "kind": "status", "status": 503, "rate": 0.1}"#)

        var writer = try stack.fileMaker("filemaker-1.log")
        let kiosks = try (1...2).map { n in
            try programs.start(
                "switchboard-kiosk",
                [
                    "import", try programs.writeCSV("day-\(n).csv", rows: 300), "--kiosk", "riverside-\(n)", "--outbox",
                    directory.path("kiosk-\(n)/outbox.sqlite"), "--broker", stack.endpoints.ingest, "--wait", "120s",
                ], log: "kiosk-\(n).log")
        }
        let journal = directory.path("broker/journal.sqlite")
        try await waitUntil("the writer has written 150 records", timeout: .seconds(120)) {
            guard writer.isRunning else { throw WaitTimedOut(description: "the writer exited: \(programs.read("filemaker-1.log"))") }
            return ((try? JournalFile.contents(at: journal, type: "filemaker.record.written"))?.count ?? 0) >= 150
        }
        writer.signal(SIGKILL)
        #expect(await writer.waitForExit(timeout: .seconds(10)) != nil)
        // The FileMaker session dies while the writer is down: the next one must notice (952),
        // get a fresh token from auth once, and carry on.
        try await stack.control(.post, "expire", body: #"{"api": "filemaker"}"#)
        writer = try stack.fileMaker("filemaker-2.log")
        for (n, kiosk) in kiosks.enumerated() {
            #expect(await kiosk.waitForExit(timeout: .seconds(150)) == 0, "kiosk \(n + 1): \(programs.read("kiosk-\(n + 1).log"))")
        }
        let checkIns = Set(try JournalFile.rows(at: journal).filter { $0.producer.hasPrefix("riverside-") }.map(\.eventID))
        #expect(checkIns.count == 600)
        try await waitUntil("every check-in is in FileMaker", timeout: .seconds(120)) {
            let written = Set(try await stack.checkInEventIDs()).subtracting(seeded)
            return written.isSuperset(of: checkIns)
        }
        let all = try await stack.checkInEventIDs().filter { !seeded.contains($0) }
        #expect(all.count == 600, "\(all.count - 600) records more than check-ins")
        #expect(Set(all) == checkIns, "records for exactly the journaled check-ins")

        writer.signal(SIGTERM)
        #expect(await writer.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("filemaker-2.log"))")
        // Log-ins: auth's, counted at FileMaker. One at start, one after the expiry; a few more
        // at most if a refresh raced a restart. Never one per request.
        let logins = try await stack.requests("filemaker").filter {
            ($0["method"] as? String) == "POST" && (($0["path"] as? String) ?? "").hasSuffix("/sessions")
                && ($0["credential"] as? String) == "basic switchboard"
        }.count
        #expect(logins >= 2 && logins <= 4, "\(logins) FileMaker log-ins for 600 check-ins")
        // Secrets: the worker never saw the password; its log holds no token either.
        for log in ["filemaker-1.log", "filemaker-2.log"] {
            #expect(!programs.read(log).contains(Self.fileMakerPassword))
        }
        #expect(programs.read("filemaker-2.log").contains("ready: joined the group"))
    }

    @Test("switchboard-filemaker refuses a mapping naming a field the layout lacks, or a source it does not know, naming the setting")
    func badMappingIsRefusedAtStart() async throws {
        let directory = try TemporaryDirectory("worker-filemaker-config")
        defer { directory.remove() }
        let stack = try await stack(directory)
        defer { Task { await stack.stop() } }
        let programs = stack.programs
        let missing = directory.path("missing-field.json")
        try #"{"checkins": {"layout": "CheckIns", "event_id_field": "EventID", "fields": {"Arrival": "checked_in_at"}}}"#.write(
            toFile: missing, atomically: true, encoding: .utf8)
        let first = try stack.fileMaker("bad-1.log", extra: ["--mapping", missing])
        #expect(await first.waitForExit(timeout: .seconds(60)) != 0)
        #expect(
            programs.read("bad-1.log").contains("checkins.fields.Arrival: layout 'CheckIns' has no field 'Arrival'"),
            "\(programs.read("bad-1.log"))")

        let unknown = directory.path("unknown-source.json")
        try #"{"checkins": {"layout": "CheckIns", "event_id_field": "EventID", "fields": {"Notes": "participant.shoe_size"}}}"#.write(
            toFile: unknown, atomically: true, encoding: .utf8)
        let second = try stack.fileMaker("bad-2.log", extra: ["--mapping", unknown])
        #expect(await second.waitForExit(timeout: .seconds(20)) != 0)
        #expect(programs.read("bad-2.log").contains("unknown source 'participant.shoe_size'"), "\(programs.read("bad-2.log"))")

        let wrongType = directory.path("wrong-type.json")
        try #"{"checkins": {"layout": "CheckIns", "event_id_field": "EventID", "fields": {"ParticipantID": "participant.first_name"}}}"#
            .write(
                toFile: wrongType, atomically: true, encoding: .utf8)
        let third = try stack.fileMaker("bad-3.log", extra: ["--mapping", wrongType])
        #expect(await third.waitForExit(timeout: .seconds(60)) != 0)
        #expect(
            programs.read("bad-3.log").contains("field 'ParticipantID' of layout 'CheckIns' is of type number"),
            "\(programs.read("bad-3.log"))")

        let fourth = try stack.fileMaker("bad-4.log", extra: ["--credit", "0"])
        #expect(await fourth.waitForExit(timeout: .seconds(20)) != 0)
        #expect(programs.read("bad-4.log").contains("--credit must be between 1 and 10000"))
    }
}
