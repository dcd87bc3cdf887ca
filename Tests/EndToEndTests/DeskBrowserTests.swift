import Foundation
import Logging
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// The front desk as staff use it: headless Chromium over WebDriver against `switchboard up`'s
/// processes (broker, emulators, auth, the three workers and the desk), issue 27's "Done means".
/// One at a time with the other `switchboard up` tests (ToolTests is serialized): each runs a
/// whole deployment.
extension ToolTests {
    /// `up` and what a test needs of it: its output, its pids, the back ends' readers.
    struct Up {
        let programs: Programs
        let process: ChildProcess
        let desk: String
        let emulator: String
        let http: SwitchboardHTTPClient

        var output: String { programs.read("up.log") }

        func pid(_ name: String) throws -> Int32 {
            try #require(ToolTests.pids(name, in: output).last, "no pid of \(name) in: \(output)")
        }

        /// The emulator's control API (faults, the request log).
        func control(_ method: HTTPRequest.Method, _ path: String, query: [(String, String)] = [], json: String? = nil) async throws -> Data
        {
            let request = HTTPRequest(
                method, emulator, path: ["_emulator"] + path.split(separator: "/").map { .plain(String($0)) }, query: query,
                body: json.map { HTTPRequest.Body.raw(Data($0.utf8), contentType: "application/json") } ?? HTTPRequest.Body.none,
                api: .generic("emulator-control"), operation: "control")
            return try await http.execute(request, logger: Logger(label: "test")).body
        }

        /// The CheckIns record holding `eventID`, as text fields.
        func checkInRecord(_ eventID: String) async throws -> [String: String]? {
            let client = FileMakerClient(http: http, serverURL: emulator, database: "Shelter", logger: Logger(label: "reader"))
            let session = try await client.logIn(account: "switchboard", password: "fm-demo-Passw0rd!")
            let found = try await client.find(layout: "CheckIns", [.init([("EventID", "==" + eventID)])], auth: .fixed(session))
            return found.data.first.map { $0.fieldData.mapValues(\.description) }
        }

        /// The site's participants with this last name, and the event ids of their TouchPoint 54 responses.
        func etoPeople(lastName: String) async throws -> (people: [ETO.Participant], eventIDs: [String]) {
            let client = ETOClient(http: http, baseURL: emulator + "/API", logger: Logger(label: "reader"))
            let session = CredentialSource<ETO.SiteSession>.fixed(
                try await client.logIn(
                    ETO.Account(email: WorkerProcessTests.etoEmail, password: WorkerProcessTests.etoPassword, siteID: 101)))
            let people = try await client.participants(siteID: 101, lastName: lastName, auth: session).participants
            var ids: [String] = []
            for person in people {
                let responses = try await client.touchPointResponses(subjectID: person.subjectID ?? 0, touchPointID: 54, auth: session)
                ids += responses.flatMap { $0.elements.filter { $0.elementID == 822 }.compactMap(\.value) }
            }
            return (people, ids)
        }
    }

    /// How many check-ins the desk's outbox holds (delivered or not).
    static func rowsCount(_ up: Up) async throws -> Int {
        JournalFile.count(at: up.programs.directory.path(".switchboard/kiosk/desk-1/outbox.sqlite"), table: "outbox")
    }

    /// Runs `switchboard-kiosk desk-user add NAME --password-stdin` for up's desk, the password
    /// read from a file (never an argument). Through `Programs`, whose spawn is safe beside
    /// the suite's other processes: Foundation's `Process.run()` crashed the test process here
    /// once (a bad pointer in its memcpy) while other tests started processes.
    static func addDeskUser(_ name: String, password: String, in programs: Programs) async throws -> Int32? {
        let file = programs.directory.path("desk-user-\(name).password")
        try #require(
            FileManager.default.createFile(atPath: file, contents: Data((password + "\n").utf8), attributes: [.posixPermissions: 0o600]))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let binary = Programs.binaries.appendingPathComponent("switchboard-kiosk").path
        let add = try programs.start(
            "sh",
            ["-c", "exec \"$0\" \"$@\" < \"$PASSWORD_FILE\"", binary, "desk-user", "add", name, "--password-stdin", "--id", "desk-1"],
            log: "desk-user-\(name).log", environment: ["PASSWORD_FILE": file], executable: "/bin/sh")
        return await add.waitForExit(timeout: .seconds(60))
    }

    @Test(
        "staff sign in (a wrong password refused, locked out after five), check a seed participant in and see FileMaker and ETO done, enter a walk-in while switchboard-eto is killed -9 mid-create (one ETO participant, one response), void a check-in (voided in FileMaker), check three people in while the broker is stopped (offline banner, then all land); tablet and phone sizes do not overflow; CSRF and sessions hold; no name, date of birth or password in any log",
        .timeLimit(.minutes(6))
    )
    func frontDeskInABrowser() async throws {
        for tool in Browser.tools { try #require(FileManager.default.isExecutableFile(atPath: tool), "\(Browser.missingTools)") }
        let directory = try TemporaryDirectory("desk-browser")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort(count: 5)
        let others = try freePort(count: 3)
        let (emulatorPort, deskPort, driverPort) = (others, others + 1, others + 2)
        let process = try programs.start(
            "switchboard",
            ["up", "--no-demo", "--port", String(port), "--emulator-port", String(emulatorPort), "--desk-port", String(deskPort)],
            log: "up.log")
        defer { process.signal(SIGKILL) }
        let desk = "http://127.0.0.1:\(deskPort)"
        try await waitUntil("up has started everything and the desk answers", timeout: .seconds(90), interval: .milliseconds(200)) {
            guard process.isRunning else { throw WaitTimedOut(description: "up exited: \(programs.read("up.log"))") }
            guard programs.read("up.log").contains("Ctrl-C stops everything.") else { return false }
            return (try? await httpGet(desk + "/signin"))?.status == 200
        }
        let http = try SwitchboardHTTPClient(
            configuration: .init(extraCAFiles: [directory.path(".switchboard/emulator/tls/ca.pem")]), logger: Logger(label: "reader"))
        defer { Task { try? await http.shutdown() } }
        let up = Up(programs: programs, process: process, desk: desk, emulator: "https://127.0.0.1:\(emulatorPort)", http: http)
        // "front desk: http://…/ — sign in as demo, password abcd-efgh-jkmn (log: …)"
        let demoPassword = try #require(
            up.output.range(of: #"password [a-z0-9-]+ "#, options: .regularExpression).map {
                String(up.output[$0].dropFirst("password ".count).dropLast())
            }, "\(up.output)")
        #expect(try await Self.addDeskUser("trainee", password: "trainee-Passw0rd", in: programs) == 0)

        let driver = try programs.start(
            "chromedriver", ["--port=\(driverPort)"], log: "chromedriver.log", executable: "/usr/bin/chromedriver")
        defer { driver.signal(SIGKILL) }
        try await waitUntil("chromedriver listens", timeout: .seconds(30), interval: .milliseconds(100)) {
            (try? await httpGet("http://127.0.0.1:\(driverPort)/status"))?.status == 200
        }
        let browser = try await Browser.open(port: driverPort, width: 1024, height: 768)
        func path() async throws -> String { try await browser.run("return location.pathname") }
        func status() async throws -> String { try await browser.text("status") }
        func signIn(_ name: String, _ password: String) async throws {
            try await browser.go(desk + "/signin")
            try await browser.type("#name", name)
            try await browser.type("#password", password)
            try await browser.click("form[action='/signin'] button")
        }

        // No session: the page sends the browser to sign in.
        try await browser.go(desk + "/")
        #expect(try await path() == "/signin")
        // A wrong password is refused; five lock the name, even with the right password after.
        for attempt in 1...5 {
            try await signIn("trainee", "wrong-\(attempt)")
            try await waitUntil("attempt \(attempt) is answered") {
                let here = try await path()
                let said = try await status()
                return here == "/signin" && !said.isEmpty
            }
        }
        let lockedMessage = try await status()
        #expect(lockedMessage.contains("locked"), "\(lockedMessage)")
        try await signIn("trainee", "trainee-Passw0rd")
        try await waitUntil("the locked name is answered") { !(try await status()).isEmpty }
        let stillLocked = try await status()
        #expect(try await path() == "/signin" && stillLocked.contains("locked"))

        // The demo account signs in, finds a seed participant in the roster and checks her in.
        try await signIn("demo", demoPassword)
        try await waitUntil("signed in") { try await path() == "/" }
        func search(_ name: String) async throws {
            try await browser.go(desk + "/?name=" + name)
            try await waitUntil("\(name) is found", timeout: .seconds(20)) {
                if try await browser.run("return document.querySelectorAll('ul.results button').length") != "0" { return true }
                try await browser.go(desk + "/?name=" + name)
                return false
            }
        }
        func rows() async throws -> [String] {
            try await browser.run(
                "return Array.from(document.querySelectorAll('[data-journey]')).map(e => e.dataset.journey + '=' + e.textContent).join('\\n')"
            ).split(separator: "\n").map(String.init)
        }
        func state(_ eventID: String) async throws -> String {
            try await browser.run(
                "const e = document.querySelector('[data-journey=\"' + arguments[0] + '\"]'); return e ? e.textContent : ''", [eventID])
        }
        try await search("Ortiz")
        try await browser.type("ul.results input[name='bed']", "12")
        let clicked = ContinuousClock.now
        try await browser.click("ul.results button")
        try await waitUntil("the check-in is listed") { try await rows().count == 1 }
        let ana = try #require(try await rows().first?.split(separator: "=").first.map(String.init))
        try await waitUntil("the journey shows FileMaker and ETO done", timeout: .seconds(20), interval: .milliseconds(100)) {
            try await state(ana) == "Done: in FileMaker and ETO"
        }
        let done = clicked.duration(to: .now)
        print("desk: check-in to 'Done: in FileMaker and ETO' on the page in \(done)")
        #expect(done < .seconds(5), "the journey shows FileMaker and ETO done within 5 s")
        #expect(try await up.checkInRecord(ana)?["Bed"] == "12")

        // A walk-in, with switchboard-eto killed -9 while ETO holds its participant add.
        let surname = "Okafor" + String((0..<5).map { _ in "abcdefghijkmnopqrstuvwxyz".randomElement()! })
        _ = try await up.control(
            .post, "faults",
            json: #"{"api": "eto", "method": "POST", "path": "/*participant/", "kind": "latency", "latency_ms": 3000, "count": 1}"#)
        try await browser.go(desk + "/")
        try await browser.type("#walkin-first_name", "Rosa")
        try await browser.type("#walkin-last_name", surname)
        _ = try await browser.run("document.getElementById('walkin-date_of_birth').value = '1979-02-11'; return ''")
        try await browser.click("form.walkin button")
        try await waitUntil("the walk-in is listed") { try await rows().count == 2 }
        let walkIn = try #require(try await rows().first?.split(separator: "=").first.map(String.init))
        let eto = try up.pid("eto")
        try await waitUntil("switchboard-eto has sent the participant add", timeout: .seconds(30), interval: .milliseconds(50)) {
            let log =
                try JSONSerialization.jsonObject(with: try await up.control(.get, "requests", query: [("api", "eto")])) as? [[String: Any]]
                ?? []
            return log.contains {
                ($0["method"] as? String) == "POST" && (($0["path"] as? String) ?? "").lowercased().hasSuffix("actor.svc/participant")
            }
        }
        #expect(kill(eto, SIGKILL) == 0)
        try await waitUntil(
            "the walk-in reaches FileMaker and ETO after eto's restart", timeout: .seconds(120), interval: .milliseconds(250)
        ) {
            try await state(walkIn) == "Done: in FileMaker and ETO"
        }
        let (people, responses) = try await up.etoPeople(lastName: surname)
        #expect(people.count == 1, "one ETO participant for the walk-in")
        #expect(responses == [walkIn], "one TouchPoint response, holding the walk-in's event id")
        #expect(up.output.contains("eto exited (signal 9)"))

        // Void Ana's check-in: FileMaker marks its record voided.
        try await browser.go(desk + "/")
        try await browser.click("[data-journey='\(ana)'] ~ details summary")
        try await browser.type("[data-journey='\(ana)'] ~ details input[name='reason']", "Checked in the wrong person")
        try await browser.click("[data-journey='\(ana)'] ~ details button")
        try await waitUntil("the void reaches FileMaker and ETO", timeout: .seconds(30), interval: .milliseconds(100)) {
            try await state(ana) == "Voided in FileMaker and ETO"
        }
        #expect(try await up.checkInRecord(ana)?["Voided"] == "1")

        // The broker stopped (SIGSTOP: up sees no exit): three check-ins wait, the banner says so.
        let broker = try up.pid("broker")
        #expect(kill(broker, SIGSTOP) == 0)
        var offline: [String] = []
        for name in ["Hart", "Brooks", "Haddad"] {
            try await search(name)
            try await browser.click("ul.results button")
            try await waitUntil("\(name) is listed") { try await rows().count == 3 + offline.count }
            offline.append(try #require(try await rows().first?.split(separator: "=").first.map(String.init)))
        }
        try await waitUntil("the offline banner shows three waiting", timeout: .seconds(60), interval: .milliseconds(250)) {
            try await browser.text("banner").contains("3 waiting")
        }
        #expect(kill(broker, SIGCONT) == 0)
        try await waitUntil("the three reach FileMaker and ETO", timeout: .seconds(90), interval: .milliseconds(250)) {
            for id in offline where try await state(id) != "Done: in FileMaker and ETO" { return false }
            return true
        }
        try await waitUntil("the banner is gone", timeout: .seconds(30)) { try await browser.text("banner").isEmpty }

        // Tablet and phone: screenshots kept beside the test's logs, and nothing wider than the screen.
        let artifacts =
            ProcessInfo.processInfo.environment["SWITCHBOARD_ARTIFACTS"] ?? (FileManager.default.currentDirectoryPath + "/.build/artifacts")
        for (width, height, name) in [(1024, 768, "tablet"), (390, 844, "phone")] {
            try await browser.resize(width: width, height: height)
            try await browser.go(desk + "/?name=Ortiz")
            try await waitUntil("the page is drawn at \(name) size") { try await browser.run("return document.readyState") == "complete" }
            #expect(try await browser.horizontalOverflow() == "", "\(name): something is wider than the screen")
            try await browser.screenshot(to: "\(artifacts)/desk-\(name).png")
        }

        // The session cookie is out of the page's reach (HttpOnly).
        #expect(try await browser.run("return document.cookie") == "")
        await browser.close()
        // A session of its own, as a script would get it; then a POST with it but without the
        // CSRF token (refused), one from another site (refused), and one with no session at all.
        let form = [("Content-Type", "application/x-www-form-urlencoded")]
        let signedIn = try await httpExchange(
            "POST", desk + "/signin", body: "name=demo&password=\(demoPassword)", headers: form + [("Origin", desk)])
        let cookie = try #require(signedIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init), "\(signedIn.status)")
        let before = try await Self.rowsCount(up)
        let withoutToken = try await httpExchange(
            "POST", desk + "/checkin", body: "participant_id=1000&first_name=Ana&last_name=Ortiz",
            headers: form + [("Origin", desk), ("Cookie", cookie)])
        #expect(withoutToken.status == 403, "\(withoutToken.status) \(withoutToken.body)")
        let crossSite = try await httpExchange(
            "POST", desk + "/checkin", body: "participant_id=1000&first_name=Ana&last_name=Ortiz",
            headers: form + [("Origin", "http://evil.example"), ("Cookie", cookie)])
        #expect(crossSite.status == 403, "\(crossSite.status)")
        let anonymous = try await httpExchange(
            "POST", desk + "/checkin", body: "participant_id=1000", headers: form + [("Origin", desk)])
        #expect([303, 401].contains(anonymous.status), "\(anonymous.status)")
        #expect(try await Self.rowsCount(up) == before, "nothing was checked in by the refused requests")

        // No name, date of birth or password in any log.
        let logs = try FileManager.default.contentsOfDirectory(atPath: directory.path(".switchboard/logs")).map {
            programs.read(".switchboard/logs/\($0)")
        }
        for word in [
            "Ortiz", "Okafor", surname, "1979-02-11", "Hart", "Brooks", "Haddad", demoPassword, "trainee-Passw0rd", "wrong-1",
            "Checked in the wrong person",
        ] {
            #expect(!logs.contains { $0.contains(word) }, "a log shows '\(word)'")
        }
        process.signal(SIGINT)
        #expect(await process.waitForExit(timeout: .seconds(60)) == 0, "\(up.output)")
    }
}
