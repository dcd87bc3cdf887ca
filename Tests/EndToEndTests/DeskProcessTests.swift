import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// `switchboard-kiosk desk` and `desk-user` as real processes: accounts from a script, the
/// refusals by name, the page served and a walk-in kept with no broker, SIGTERM.
@Suite("Front desk (processes)", .serialized, .timeLimit(.minutes(3)))
struct DeskProcessTests {
    @Test(
        "desk-user add from standard input; desk refuses a missing --site-id and a non-loopback --listen without TLS by name; with no broker it serves sign-in, keeps a walk-in, stops on SIGTERM; no name or password in its output"
    )
    func desk() async throws {
        let directory = try TemporaryDirectory("desk-process")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let binary = Programs.binaries.appendingPathComponent("switchboard-kiosk").path
        // Nothing listens on port 1: the broker is down for the whole test.
        let common = [
            "--id", "desk-9", "--data-dir", directory.path("data"), "--ingest", "tcp://127.0.0.1:1", "--service", "tcp://127.0.0.1:1",
        ]
        let password = "long-enough-pw"
        let add = try programs.start(
            "sh",
            ["-c", "printf '\(password)\\n' | exec \"$0\" \"$@\"", binary, "desk-user", "add", "Kim Staff", "--password-stdin"] + common,
            log: "add.log", executable: "/bin/sh")
        #expect(await add.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("add.log"))")
        #expect(programs.read("add.log").contains("Added Kim Staff as staff-"))
        let users = directory.path("data/kiosk/desk-9/desk-users.json")
        let mode = (try FileManager.default.attributesOfItem(atPath: users)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)

        let noSite = try programs.start("switchboard-kiosk", ["desk", "--program-id", "792"] + common, log: "nosite.log")
        #expect(await noSite.waitForExit(timeout: .seconds(60)) != 0)
        #expect(programs.read("nosite.log").contains("site_id: is required (--site-id)"))
        let open = try programs.start(
            "switchboard-kiosk", ["desk", "--site-id", "101", "--program-id", "792", "--listen", "0.0.0.0:9599"] + common, log: "open.log")
        #expect(await open.waitForExit(timeout: .seconds(60)) != 0)
        #expect(programs.read("open.log").contains("--tls-cert FILE and --tls-key FILE"))

        let desk = try programs.start(
            "switchboard-kiosk",
            ["desk", "--site-id", "101", "--program-id", "792", "--listen", "127.0.0.1:0", "--log-level", "info"] + common,
            log: "desk.log")
        var port: Int?
        try await waitUntil("the desk prints its address", timeout: .seconds(60)) {
            let log = programs.read("desk.log")
            guard let range = log.range(of: "Front desk desk-9: http://127.0.0.1:") else { return false }
            port = Int(log[range.upperBound...].prefix { $0.isNumber })
            return port != nil
        }
        let base = "http://127.0.0.1:\(port ?? 0)"
        #expect(try await httpExchange("GET", base + "/").header("Location") == "/signin")
        let form = [("Content-Type", "application/x-www-form-urlencoded"), ("Origin", base)]
        let signIn = try await httpExchange("POST", base + "/signin", body: "name=Kim+Staff&password=\(password)", headers: form)
        #expect(signIn.status == 303)
        let cookie = try #require(signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        let page = try await httpExchange("GET", base + "/", headers: [("Cookie", cookie)])
        let csrf = try #require(page.body.range(of: "name=\"csrf\" value=\"").map { String(page.body[$0.upperBound...].prefix(64)) })
        let walkIn = try await httpExchange(
            "POST", base + "/walkin", body: "csrf=\(csrf)&first_name=Quinn&last_name=Zephyr&date_of_birth=1988-03-04",
            headers: form + [("Cookie", cookie)])
        #expect(walkIn.status == 303)
        let after = try await httpExchange("GET", base + "/", headers: [("Cookie", cookie)])
        #expect(after.body.contains("Offline: the broker does not answer") || after.body.contains("Saved on this desk"))
        desk.signal(SIGTERM)
        #expect(await desk.waitForExit(timeout: .seconds(30)) == 0)
        let log = programs.read("desk.log")
        #expect(log.contains("Front desk stopped; 1 check-ins waiting."))
        for secret in ["Kim Staff", password, "Quinn", "Zephyr", "1988-03-04"] {
            #expect(!log.contains(secret), "the desk's output names \(secret)")
        }
    }
}
