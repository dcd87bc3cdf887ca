import Foundation
import Logging
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Synchronization
import Testing

/// The workers as real processes: a broker, the emulators, `auth`, kiosks and the worker, with
/// faults and kills, counted at the back end afterwards.
@Suite("Workers (processes)", .serialized, .timeLimit(.minutes(5)))
struct WorkerProcessTests {
    static let fileMakerPassword = "fm-demo-Passw0rd!"
    static let etoEmail = "intake@riverside.example"
    static let etoPassword = "eto-demo-Passw0rd!"

    struct Stack {
        let programs: Programs
        let broker: ChildProcess
        let endpoints: Programs.Endpoints
        let emulator: ChildProcess
        let base: String
        let auth: ChildProcess
        /// Every worker started through this stack, so a failing test leaves none running.
        let started = StartedProcesses()

        /// Kills every process of the stack at once (a test's `defer`: nothing may outlive it).
        func stop() {
            for process in started.all + [auth, emulator, broker] { process.signal(SIGKILL) }
        }

        /// Starts `switchboard-filemaker` against this stack.
        func fileMaker(_ log: String, extra: [String] = [], environment: [String: String] = [:]) throws -> ChildProcess {
            try started.add(
                programs.start(
                    "switchboard-filemaker",
                    [
                        "--groups", endpoints.groups, "--service", endpoints.service, "--ingest", endpoints.ingest, "--url", base,
                        "--data-dir", programs.directory.path("filemaker-state"), "--credit", "16",
                    ] + extra, log: log, environment: environment))
        }

        /// Starts `switchboard-eto` against this stack.
        func eto(_ log: String, extra: [String] = []) throws -> ChildProcess {
            try started.add(
                programs.start(
                    "switchboard-eto",
                    [
                        "--groups", endpoints.groups, "--service", endpoints.service, "--ingest", endpoints.ingest, "--url", base + "/API",
                        "--data-dir", programs.directory.path("eto-state"), "--credit", "16",
                    ] + extra, log: log))
        }

        /// Runs `switchboard` against this broker (no keys: the test broker is insecure).
        func switchboard(_ arguments: [String], log: String) async throws -> (Int32?, String) {
            let process = try programs.start("switchboard", arguments + ["--groups", endpoints.groups, "--insecure"], log: log)
            let status = await process.waitForExit(timeout: .seconds(30))
            return (status, programs.read(log))
        }

        /// Every TouchPoint 54 response's event id (element 822), for the given participants,
        /// read through the ETO API with a session of our own per site.
        func touchPointEventIDs(_ participants: [SeedParticipant]) async throws -> [String] {
            let http = try SwitchboardHTTPClient(logger: Logger(label: "reader"))
            let client = ETOClient(http: http, baseURL: base + "/API", logger: Logger(label: "reader"))
            do {
                var ids: [String] = []
                for (site, people) in Dictionary(grouping: participants, by: \.site) {
                    let session = try await client.logIn(
                        ETO.Account(email: WorkerProcessTests.etoEmail, password: WorkerProcessTests.etoPassword, siteID: site))
                    for person in people {
                        let responses = try await client.touchPointResponses(
                            subjectID: person.subject, touchPointID: 54, auth: .fixed(session))
                        ids += responses.flatMap { $0.elements.filter { $0.elementID == 822 }.compactMap(\.value) }
                    }
                }
                try await http.shutdown()
                return ids
            } catch {
                try? await http.shutdown()
                throw error
            }
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

    func stack(_ directory: TemporaryDirectory, brokerExtra: [String] = []) async throws -> Stack {
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker(extra: brokerExtra)
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
              "options": {"database": "Shelter"}},
              {"backend": "eto", "account": "\(Self.etoEmail)", "password": "\(Self.etoPassword)", "base_url": "\(url)/API",
              "options": {"site": "101", "time_zone": "America/Los_Angeles"}}]}
            """
        _ = FileManager.default.createFile(atPath: accounts, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let auth = try programs.start(
            "switchboard-auth",
            [
                "--accounts-file", accounts, "--service", endpoints.service, "--ingest", endpoints.ingest, "--data-dir",
                directory.path("auth-state"), "--keep-alive", "1h",
            ], log: "auth.log")
        return Stack(programs: programs, broker: broker, endpoints: endpoints, emulator: emulator, base: url, auth: auth)
    }

    @Test(
        "the workers refuse bad configuration at start, naming the setting: mapping fields and sources, credit, TouchPoint elements, an open data directory"
    )
    func badMappingIsRefusedAtStart() async throws {
        let directory = try TemporaryDirectory("worker-filemaker-config")
        defer { directory.remove() }
        let stack = try await stack(directory)
        defer { stack.stop() }
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
        #expect(programs.read("bad-4.log").contains("credit from flag --credit: must be 1–1000, got 0"), "\(programs.read("bad-4.log"))")

        // The same setting from the environment names the variable.
        let environmentCredit = try stack.fileMaker("bad-4e.log", environment: ["SWITCHBOARD_FILEMAKER_AUTH_TIMEOUT": "lots"])
        #expect(await environmentCredit.waitForExit(timeout: .seconds(20)) != 0)
        #expect(
            programs.read("bad-4e.log").contains(
                "auth_timeout from environment SWITCHBOARD_FILEMAKER_AUTH_TIMEOUT: must be a duration like 500ms, 30s or 2m"),
            "\(programs.read("bad-4e.log"))")

        // switchboard-eto: its TouchPoint file, and a data directory others can read.
        let touchpoint = directory.path("touchpoint.json")
        try #"{"touchpoint_id": 54, "event_id_element": 822, "elements": [{"id": 820, "type": 9, "source": "participant.first_name"}]}"#
            .write(toFile: touchpoint, atomically: true, encoding: .utf8)
        let fifth = try stack.eto("bad-5.log", extra: ["--touchpoint", touchpoint])
        #expect(await fifth.waitForExit(timeout: .seconds(20)) != 0)
        #expect(
            programs.read("bad-5.log").contains("elements.0: a date element (type 9) needs a date or timestamp source"),
            "\(programs.read("bad-5.log"))")
        let open = directory.path("open-dir")
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let sixth = try stack.eto("bad-6.log", extra: ["--data-dir", open])
        #expect(await sixth.waitForExit(timeout: .seconds(20)) != 0)
        #expect(programs.read("bad-6.log").contains("chmod 700"), "\(programs.read("bad-6.log"))")
    }
}

/// A participant of the emulator's seed, as a kiosk would record them.
struct SeedParticipant: Sendable, Hashable {
    var id: Int
    var subject: Int
    var first: String
    var last: String
    var dateOfBirth: String
    var site: Int
    var programs: [Int]

    /// The seed's enabled participants.
    static func all() throws -> [SeedParticipant] {
        let url = Vectors.packageRoot.appendingPathComponent("Sources/SwitchboardEmulators/Resources/seed.json")
        let seed = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let eto = try #require(seed["eto"] as? [String: Any])
        let people = try #require(eto["participants"] as? [[String: Any]])
        return people.compactMap { p -> SeedParticipant? in
            guard p["disabled"] as? Bool != true, let id = p["id"] as? Int, let subject = p["subjectID"] as? Int,
                let first = p["firstName"] as? String, let last = p["lastName"] as? String, let born = p["dateOfBirth"] as? Int64,
                let site = p["siteID"] as? Int, let enrollments = p["enrollments"] as? [[String: Any]]
            else { return nil }
            let day = String(Timestamp.format(milliseconds: born).prefix(10))
            return SeedParticipant(
                id: id, subject: subject, first: first, last: last, dateOfBirth: day, site: site,
                programs: enrollments.compactMap { $0["programID"] as? Int })
        }
    }
}

extension WorkerProcessTests {
    /// Check-ins by name and date of birth of seed participants, at their site, in a program
    /// they are enrolled in; `extra` rows are added as written.
    func writeSeedCSV(
        _ programs: Programs, _ name: String, rows: Int, offset: Int, people: [SeedParticipant], extra: [String] = []
    ) throws -> String {
        var text = "first_name,last_name,date_of_birth,site_id,program_id,notes\n"
        for i in 0..<rows {
            let p = people[(offset + i) % people.count]
            text += "\(p.first),\(p.last),\(p.dateOfBirth),\(p.site),\(p.programs[(offset + i) % p.programs.count]),row \(offset + i)\n"
        }
        text += extra.map { $0 + "\n" }.joined()
        let path = programs.directory.path(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(
        "1,000 check-ins from two kiosks land in FileMaker and ETO exactly once while each worker is killed -9 and restarted, with 10 % 503s and a session expiry per back end; an unmatched participant is a dead letter until fixed and replayed"
    )
    func bothWorkersExactlyOnce() async throws {
        let directory = try TemporaryDirectory("worker-both")
        defer { directory.remove() }
        let stack = try await stack(directory)
        let programs = stack.programs
        defer { stack.stop() }
        let people = try SeedParticipant.all()
        // Participant 1003 is enrolled in program 792 only: a check-in to 793 finds no one.
        let stranger = try #require(people.first { $0.id == 1003 })
        let seededFileMaker = Set(try await stack.checkInEventIDs())
        try await stack.fault(
            #"{"api": "filemaker", "method": "POST", "path": "/*/records", "kind": "status", "status": 503, "rate": 0.1}"#)
        try await stack.fault(
            #"{"api": "eto", "method": "POST", "path": "/*TouchPointResponseAdd*", "kind": "status", "status": 503, "rate": 0.1}"#)

        var fileMaker = try stack.fileMaker("filemaker-1.log")
        var eto = try stack.eto("eto-1.log")
        let unmatched = "\(stranger.first),\(stranger.last),\(stranger.dateOfBirth),\(stranger.site),793,not enrolled here"
        let kiosks = try (1...2).map { n in
            try stack.started.add(
                programs.start(
                    "switchboard-kiosk",
                    [
                        "import",
                        try writeSeedCSV(
                            programs, "day-\(n).csv", rows: n == 1 ? 499 : 500, offset: n * 1000, people: people,
                            extra: n == 1 ? [unmatched] : []),
                        "--id", "shelter-\(n)", "--outbox", directory.path("kiosk-\(n)/outbox.sqlite"), "--ingest",
                        stack.endpoints.ingest,
                        "--wait", "180s",
                    ], log: "kiosk-\(n).log"))
        }
        let journal = directory.path("broker/journal.sqlite")
        try await waitUntil("the FileMaker writer has written 250", timeout: .seconds(120), interval: .milliseconds(200)) {
            guard fileMaker.isRunning else { throw WaitTimedOut(description: "the writer exited: \(programs.read("filemaker-1.log"))") }
            return ((try? JournalFile.contents(at: journal, type: "filemaker.record.written"))?.count ?? 0) >= 250
        }
        fileMaker.signal(SIGKILL)
        #expect(await fileMaker.waitForExit(timeout: .seconds(10)) != nil)
        try await stack.control(.post, "expire", body: #"{"api": "filemaker"}"#)
        fileMaker = try stack.fileMaker("filemaker-2.log")
        try await waitUntil("the ETO worker has recorded 250", timeout: .seconds(120), interval: .milliseconds(200)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "the eto worker exited: \(programs.read("eto-1.log"))") }
            return programs.read("eto-1.log").components(separatedBy: "check-in recorded").count > 250
        }
        eto.signal(SIGKILL)
        #expect(await eto.waitForExit(timeout: .seconds(10)) != nil)
        try await stack.control(.post, "expire", body: #"{"api": "eto"}"#)
        eto = try stack.eto("eto-2.log")
        for (n, kiosk) in kiosks.enumerated() {
            #expect(await kiosk.waitForExit(timeout: .seconds(200)) == 0, "kiosk \(n + 1): \(programs.read("kiosk-\(n + 1).log"))")
        }
        let rows = try JournalFile.rows(at: journal).filter { $0.producer.hasPrefix("shelter-") }
        let checkIns = Set(rows.map(\.eventID))
        #expect(checkIns.count == 1_000)

        try await waitUntil("every check-in is in FileMaker", timeout: .seconds(180), interval: .milliseconds(500)) {
            Set(try await stack.checkInEventIDs()).subtracting(seededFileMaker).isSuperset(of: checkIns)
        }
        let written = try await stack.checkInEventIDs().filter { !seededFileMaker.contains($0) }
        #expect(written.count == 1_000 && Set(written) == checkIns, "FileMaker: \(written.count) records, \(Set(written).count) distinct")

        // ETO: every check-in but the stranger's, each once; the stranger's is a dead letter.
        try await waitUntil("999 check-ins are in ETO", timeout: .seconds(180), interval: .milliseconds(500)) {
            try await stack.touchPointEventIDs(people).filter(checkIns.contains).count >= 999
        }
        var (status, output) = try await stack.switchboard(["dlq", "list", "eto", "--json"], log: "dlq-list.log")
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
        let letters = try #require(listed["dead_letters"] as? [[String: Any]])
        #expect(status == 0 && letters.count == 1, "\(output)")
        let letter = try #require(letters.first)
        #expect(letter["code"] as? String == "participant-unmatched")
        // The site, the program and the candidates' ids; never the name or date of birth.
        let reason = letter["message"] as? String ?? ""
        #expect(reason.contains("no participant of program 793 at site \(stranger.site) has the check-in's"), "\(letter)")
        #expect(!reason.contains(stranger.last) && !reason.contains(stranger.dateOfBirth), "\(letter)")
        let busSeq = "\(try #require(letter["bus_seq"] as? Int))"
        var recorded = try await stack.touchPointEventIDs(people).filter(checkIns.contains)
        #expect(recorded.count == 999 && Set(recorded).count == 999, "ETO: \(recorded.count) responses, \(Set(recorded).count) distinct")

        // The fix: enroll the stranger in 793, replay the dead letter; it is recorded once.
        let http = try SwitchboardHTTPClient(logger: Logger(label: "fixer"))
        let client = ETOClient(http: http, baseURL: stack.base + "/API", logger: Logger(label: "fixer"))
        let session = try await client.logIn(ETO.Account(email: Self.etoEmail, password: Self.etoPassword, siteID: stranger.site))
        _ = try await client.enroll(participantID: stranger.id, programID: 793, startDate: Date(), auth: .fixed(session))
        try await http.shutdown()
        (status, output) = try await stack.switchboard(["dlq", "replay", "eto", busSeq], log: "dlq-replay.log")
        #expect(status == 0, "\(output)")
        try await waitUntil("the replayed check-in is in ETO", timeout: .seconds(60), interval: .milliseconds(500)) {
            try await stack.touchPointEventIDs(people).filter(checkIns.contains).count >= 1_000
        }
        recorded = try await stack.touchPointEventIDs(people).filter(checkIns.contains)
        #expect(recorded.count == 1_000 && Set(recorded) == checkIns, "ETO: \(recorded.count) responses, \(Set(recorded).count) distinct")

        fileMaker.signal(SIGTERM)
        eto.signal(SIGTERM)
        #expect(await fileMaker.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("filemaker-2.log"))")
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto-2.log"))")
        // Log-ins, counted at the back ends: auth's, never one per request.
        let fileMakerLogins = try await stack.requests("filemaker").filter {
            ($0["method"] as? String) == "POST" && (($0["path"] as? String) ?? "").hasSuffix("/sessions")
                && ($0["credential"] as? String) == "basic switchboard"
        }.count
        #expect(fileMakerLogins >= 2 && fileMakerLogins <= 4, "\(fileMakerLogins) FileMaker log-ins")
        // ETO log-ins are auth's events (the test's own reader logs in too, so the request log
        // cannot tell them apart): one per scope (3 sites, and `sso` for the site list) at
        // first, one per scope after the expiry, and a few more at most where a rejection raced
        // a restart.
        let authEvents = ["auth.token.issued", "auth.token.refreshed"].flatMap { (try? JournalFile.contents(at: journal, type: $0)) ?? [] }
        let etoLogins = authEvents.filter { $0.contains(#""backend":"eto""#) }.count
        #expect(etoLogins >= 4 && etoLogins <= 12, "\(etoLogins) ETO log-ins by auth for 3 sites and the site list")
        print("worker run: 1,000 check-ins; FileMaker log-ins \(fileMakerLogins), ETO log-ins \(etoLogins)")
        #expect(programs.read("filemaker-2.log").contains("ready: joined the group"))
        #expect(programs.read("eto-2.log").contains("ready: joined the group"))
        for log in ["filemaker-1.log", "filemaker-2.log", "eto-1.log", "eto-2.log", "auth.log"] {
            let text = programs.read(log)
            #expect(!text.contains(Self.fileMakerPassword) && !text.contains(Self.etoPassword), "\(log) shows a password")
        }
    }
}

extension WorkerProcessTests {
    @Test(
        "the eto service through a kiosk: sites and programs, lookup by name and date of birth, and checkin filling in the participant id")
    func kioskLookups() async throws {
        let directory = try TemporaryDirectory("worker-eto-service")
        defer { directory.remove() }
        let stack = try await stack(directory)
        let programs = stack.programs
        defer { stack.stop() }
        let eto = try stack.eto("eto.log", extra: ["--no-group"])
        let kiosk = ["--id", "riverside-1", "--service", stack.endpoints.service, "--ingest", stack.endpoints.ingest]
        func run(_ arguments: [String], _ log: String) async throws -> (Int32?, String) {
            let process = try programs.start("switchboard-kiosk", arguments + kiosk, log: log)
            return (await process.waitForExit(timeout: .seconds(60)), programs.read(log))
        }
        // The worker registers with the broker shortly after start; the first call may wait for it.
        var (status, output) = try await run(["sites", "--wait", "20s"], "sites.log")
        #expect(status == 0, "\(output) \(programs.read("eto.log"))")
        #expect(
            output.contains("site 101") && output.contains("program 792") && !output.contains("program 794"),
            "disabled programs are left out: \(output)")

        (status, output) = try await run(
            ["lookup", "--first", "ana", "--last", "ORTIZ", "--dob", "1976-02-23", "--site", "101", "--program", "792"], "lookup.log")
        #expect(status == 0 && output.contains("participant 1000  Ana Ortiz  born 1976-02-23"), "\(output)")
        (status, output) = try await run(
            ["lookup", "--first", "Ana", "--last", "Ortiz", "--dob", "1999-01-01", "--site", "101", "--program", "792"], "none.log")
        #expect(
            status == 1 && output.contains("No participant of program 792 at site 101 has that name and date of birth.")
                && !output.contains("1999"), "\(output)")

        // A site the enterprise lacks is refused before any session is opened for it.
        (status, output) = try await run(
            ["lookup", "--first", "Ana", "--last", "Ortiz", "--site", "999", "--program", "792"], "nosite.log")
        #expect(status != 0 && output.contains("the enterprise has no site 999"), "\(output)")
        let siteLogins = try await stack.requests("eto").filter { (($0["path"] as? String) ?? "").contains("SSOSiteLogin/999") }
        #expect(siteLogins.isEmpty, "auth logged in to a site the enterprise lacks")

        (status, output) = try await run(
            [
                "checkin", "--first", "Ana", "--last", "Ortiz", "--dob", "1976-02-23", "--site", "101", "--program", "792", "--outbox",
                directory.path("k/outbox.sqlite"),
            ],
            "checkin.log")
        #expect(status == 0 && output.contains("ETO knows this person: participant 1000."), "\(output)")
        let content = try #require(try JournalFile.contents(at: directory.path("broker/journal.sqlite"), type: "checkin.recorded").first)
        #expect(content.contains(#""eto_participant_id":1000"#), "\(content)")
        eto.signal(SIGTERM)
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto.log"))")
    }
}

/// The processes a test started, for its clean-up.
final class StartedProcesses: Sendable {
    private let list = Mutex<[ChildProcess]>([])
    var all: [ChildProcess] { list.withLock { $0 } }
    func add(_ process: ChildProcess) -> ChildProcess {
        list.withLock { $0.append(process) }
        return process
    }
}
