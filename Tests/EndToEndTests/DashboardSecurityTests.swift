import Foundation
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

/// `switchboard-monitor web` as a real process, spoken to with plain HTTP requests shaped as a
/// browser (or another page in it) would send them: where its token may come from and where it
/// may appear, and which requests may change something.
@Suite("Dashboard token and forgery rules (processes)", .serialized, .timeLimit(.minutes(3)))
struct DashboardSecurityTests {
    static let token = "dashboard-test-token-0123456789"

    /// Starts the dashboard and waits for the line it prints once it listens; its port.
    static func web(
        _ programs: Programs, _ arguments: [String] = [], environment: [String: String] = [:], endpoints: Programs.Endpoints? = nil,
        log: String = "web.log"
    ) async throws -> (ChildProcess, Int) {
        let port = try freePort()
        var broker: [String] = []
        if let endpoints {
            broker = [
                "--fanout", endpoints.fanout, "--replay", endpoints.replay, "--groups", endpoints.groups, "--service", endpoints.service,
            ]
        }
        let web = try programs.start(
            "switchboard-monitor", ["web", "--listen", "127.0.0.1:\(port)"] + arguments + broker, log: log, environment: environment)
        try await waitUntil("the dashboard says where it listens", timeout: .seconds(30)) {
            guard web.isRunning else { throw WaitTimedOut(description: "the dashboard exited: \(programs.read(log))") }
            return programs.read(log).contains("Dashboard: http://127.0.0.1:\(port)/")
        }
        return (web, port)
    }

    /// A token file of `mode` holding `token` and a newline (as `echo` writes it).
    static func tokenFile(_ directory: TemporaryDirectory, mode: Int16 = 0o600, token: String = token) throws -> String {
        let path = directory.path("dashboard.token")
        try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    @Test(
        "a token from --token-file or SWITCHBOARD_DASHBOARD_TOKEN is never printed: the address is, with where the token comes from; a made-up one is not printed when standard output is no terminal"
    )
    func tokenNotPrinted() async throws {
        let directory = try TemporaryDirectory("dashboard-print")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let file = try Self.tokenFile(directory)
        let (fromFile, filePort) = try await Self.web(programs, ["--token-file", file], log: "file.log")
        defer { fromFile.signal(SIGKILL) }
        let (fromEnvironment, environmentPort) = try await Self.web(
            programs, environment: ["SWITCHBOARD_DASHBOARD_TOKEN": Self.token], log: "environment.log")
        defer { fromEnvironment.signal(SIGKILL) }
        let (generated, generatedPort) = try await Self.web(programs, log: "generated.log")
        defer { generated.signal(SIGKILL) }

        let fileLog = programs.read("file.log")
        #expect(!fileLog.contains(Self.token), "\(fileLog)")
        #expect(fileLog.contains("Dashboard: http://127.0.0.1:\(filePort)/ (") && fileLog.contains(file), "\(fileLog)")
        let environmentLog = programs.read("environment.log")
        #expect(!environmentLog.contains(Self.token), "\(environmentLog)")
        #expect(environmentLog.contains("SWITCHBOARD_DASHBOARD_TOKEN"), "\(environmentLog)")
        let generatedLog = programs.read("generated.log")
        #expect(!generatedLog.contains("token="), "\(generatedLog)")
        #expect(generatedLog.contains("not a terminal"), "\(generatedLog)")
        // Both tokens open their pages (the file's newline is not part of it).
        for port in [filePort, environmentPort] {
            let entry = try await httpExchange("GET", "http://127.0.0.1:\(port)/?token=\(Self.token)")
            #expect(entry.status == 303, "port \(port): \(entry.status) \(entry.body)")
        }
        #expect(try await httpExchange("GET", "http://127.0.0.1:\(generatedPort)/?token=\(Self.token)").status == 401)
    }

    @Test("a made-up token is printed with the address when standard output is a terminal, and opens the page")
    func generatedTokenOnTerminal() async throws {
        let directory = try TemporaryDirectory("dashboard-tty")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort()
        let monitor = Programs.binaries.appendingPathComponent("switchboard-monitor").path
        // script(1) gives the dashboard a pseudo-terminal as its standard output and copies what
        // it writes there to ours (the log).
        let command = "exec '\(monitor)' web --listen 127.0.0.1:\(port)"
        let web = try programs.start(
            "script", ["-q", "-f", "-e", "-c", command, "/dev/null"], log: "web.log", executable: "/usr/bin/script")
        defer { web.signal(SIGKILL) }
        var printed = ""
        try await waitUntil("the dashboard prints its address with the token", timeout: .seconds(30)) {
            guard web.isRunning else { throw WaitTimedOut(description: "exited: \(programs.read("web.log"))") }
            let log = programs.read("web.log")
            guard let range = log.range(of: "http://127.0.0.1:\(port)/?token=") else { return false }
            printed = String(log[range.upperBound...].prefix { $0.isHexDigit })
            return printed.count == 32
        }
        let entry = try await httpExchange("GET", "http://127.0.0.1:\(port)/?token=\(printed)")
        #expect(entry.status == 303, "\(entry.status) \(entry.body)")
    }

    @Test(
        "token rules, the same for every source: --token is refused naming --token-file; a token file others can read is refused naming chmod 600; a short token is refused from a file and from the environment"
    )
    func tokenRules() async throws {
        let directory = try TemporaryDirectory("dashboard-rules")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        func refused(_ arguments: [String], environment: [String: String] = [:], _ log: String) async throws -> String {
            let process = try programs.start(
                "switchboard-monitor", ["web", "--listen", "127.0.0.1:\(try freePort())"] + arguments, log: log, environment: environment)
            let status = await process.waitForExit(timeout: .seconds(30))
            #expect(status != nil && status != 0, "\(log): \(programs.read(log))")
            return programs.read(log)
        }
        let flag = try await refused(["--token", Self.token], "flag.log")
        #expect(flag.contains("--token-file") && flag.contains("SWITCHBOARD_DASHBOARD_TOKEN"), "\(flag)")
        let open = try Self.tokenFile(directory, mode: 0o644)
        let readable = try await refused(["--token-file", open], "readable.log")
        #expect(readable.contains("chmod 600"), "\(readable)")
        let short = try Self.tokenFile(directory, token: "short")
        let shortFile = try await refused(["--token-file", short], "short-file.log")
        #expect(shortFile.contains("at least 16 characters"), "\(shortFile)")
        let shortVariable = try await refused([], environment: ["SWITCHBOARD_DASHBOARD_TOKEN": "short"], "short-variable.log")
        #expect(shortVariable.contains("SWITCHBOARD_DASHBOARD_TOKEN: the token must be at least 16 characters"), "\(shortVariable)")
    }

    @Test(
        "the token opens the page from the query only on /, which sets an HttpOnly SameSite=Strict cookie and redirects to / without it; the API refuses it in the query; every answer carries no-referrer, no-store, nosniff and no framing"
    )
    func tokenInTheAddress() async throws {
        let directory = try TemporaryDirectory("dashboard-entry")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (web, port) = try await Self.web(programs, environment: ["SWITCHBOARD_DASHBOARD_TOKEN": Self.token])
        defer { web.signal(SIGKILL) }
        let base = "http://127.0.0.1:\(port)"

        let entry = try await httpExchange("GET", base + "/?token=\(Self.token)")
        #expect(entry.status == 303)
        #expect(entry.header("Location") == "/")
        let cookie = try #require(entry.header("Set-Cookie"))
        #expect(cookie.hasPrefix("switchboard_dashboard=\(Self.token);"))
        for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] { #expect(cookie.contains(attribute), "\(cookie)") }
        let page = try await httpExchange("GET", base + "/", headers: [("Cookie", "switchboard_dashboard=\(Self.token)")])
        #expect(page.status == 200 && page.body.contains("<title>Switchboard</title>"))
        #expect(try await httpExchange("GET", base + "/?token=wrong-token-0123456789").status == 401)
        #expect(try await httpExchange("GET", base + "/").status == 401)

        // The API: the cookie or the bearer header, never the query.
        #expect(try await httpExchange("GET", base + "/api/snapshot?token=\(Self.token)").status == 401)
        #expect(try await httpExchange("GET", base + "/api/stream?token=\(Self.token)").status == 401)
        let snapshot = try await httpExchange("GET", base + "/api/snapshot", headers: [("Cookie", "switchboard_dashboard=\(Self.token)")])
        #expect(snapshot.status == 200)
        #expect(try await httpExchange("GET", base + "/api/snapshot", headers: [("Authorization", "Bearer \(Self.token)")]).status == 200)
        #expect(try await httpExchange("GET", base + "/api/snapshot", headers: [("Authorization", "Bearer \(Self.token)x")]).status == 401)

        let notFound = try await httpExchange("GET", base + "/nothing", headers: [("Cookie", "switchboard_dashboard=\(Self.token)")])
        #expect(notFound.status == 404)
        let refused = try await httpExchange("GET", base + "/api/snapshot")
        for answer in [entry, page, snapshot, notFound, refused] {
            #expect(answer.header("Referrer-Policy") == "no-referrer", "\(answer.status)")
            #expect(answer.header("Cache-Control") == "no-store", "\(answer.status)")
            #expect(answer.header("X-Content-Type-Options") == "nosniff", "\(answer.status)")
            #expect(answer.header("X-Frame-Options") == "DENY", "\(answer.status)")
            #expect(answer.header("Content-Security-Policy")?.contains("frame-ancestors 'none'") == true, "\(answer.status)")
        }
    }

    @Test(
        "a replay is refused from another origin (Origin or Referer), without the CSRF token, and as a form or plain text; the page's own request (same origin, its CSRF token, JSON) replays the dead letter"
    )
    func forgedReplay() async throws {
        let directory = try TemporaryDirectory("dashboard-csrf")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        defer { broker.signal(SIGKILL) }
        let (web, port) = try await Self.web(programs, environment: ["SWITCHBOARD_DASHBOARD_TOKEN": Self.token], endpoints: endpoints)
        defer { web.signal(SIGKILL) }
        let base = "http://127.0.0.1:\(port)"
        let other = "http://127.0.0.1:\(try freePort())"

        // A dead letter to replay: a member refuses the one event for good.
        let context = try Context()
        let io = try IOThread(context: context)
        let member = try await io.open(.dealer, linger: 0) { try $0.connect(endpoints.groups) }
        _ = try await GroupWire.joined(JoinHeader(group: "audit", topics: ["faults."], credit: 1, member: "refuser"), on: member)
        let producer = try await ResourceFaultTests.Producer(io: io, endpoint: endpoints.ingest, name: "csrf-producer")
        #expect(try await producer.send(try producer.next()).command == .ack)
        let (delivery, _) = try await GroupWire.delivery(on: member)
        try await member.send(
            GroupWire.settle(SettleHeader(.term, group: "audit", busSeq: delivery.busSeq, attempt: delivery.attempt, code: "test-refusal")))

        let cookie = ("Cookie", "switchboard_dashboard=\(Self.token)")
        let page = try await httpExchange("GET", base + "/", headers: [cookie])
        let csrf = try #require(
            page.body.range(of: #"<meta name="csrf-token" content=""#).map { String(page.body[$0.upperBound...].prefix { $0.isHexDigit }) })
        #expect(csrf.count == 32)
        let json = #"{"group": "audit", "bus_seq": \#(delivery.busSeq)}"#
        func replay(_ headers: [(String, String)], body: String = json) async throws -> HTTPAnswer {
            try await httpExchange("POST", base + "/api/dlq/replay", body: body, headers: [cookie] + headers)
        }
        let jsonType = ("Content-Type", "application/json")

        // Another page on another port of the same host: its fetch carries the cookie (same
        // site) but its own Origin.
        let crossOrigin = try await replay([("Origin", other), ("X-CSRF-Token", csrf), jsonType])
        #expect(crossOrigin.status == 403 && crossOrigin.body.contains("cross-origin"), "\(crossOrigin.body)")
        let crossReferer = try await replay([("Referer", other + "/attack.html"), ("X-CSRF-Token", csrf), jsonType])
        #expect(crossReferer.status == 403 && crossReferer.body.contains("cross-origin"), "\(crossReferer.body)")
        let noOrigin = try await replay([("X-CSRF-Token", csrf), jsonType])
        #expect(noOrigin.status == 403 && noOrigin.body.contains("no Origin or Referer"), "\(noOrigin.body)")
        let noToken = try await replay([("Origin", base), jsonType])
        #expect(noToken.status == 403 && noToken.body.contains("X-CSRF-Token"), "\(noToken.body)")
        let wrongToken = try await replay([("Origin", base), ("X-CSRF-Token", String(csrf.reversed())), jsonType])
        #expect(wrongToken.status == 403 && wrongToken.body.contains("X-CSRF-Token"), "\(wrongToken.body)")
        // A form (or a no-cors fetch: text/plain) cannot send JSON's content type.
        let form = try await replay(
            [("Origin", base), ("X-CSRF-Token", csrf), ("Content-Type", "application/x-www-form-urlencoded")],
            body: "group=audit&bus_seq=\(delivery.busSeq)")
        #expect(form.status == 415, "\(form.status) \(form.body)")
        let text = try await replay([("Origin", base), ("X-CSRF-Token", csrf), ("Content-Type", "text/plain")])
        #expect(text.status == 415, "\(text.status) \(text.body)")
        // The old shape (parameters in the query, no body) is gone.
        let query = try await httpExchange(
            "POST", base + "/api/dlq/replay?group=audit&bus_seq=\(delivery.busSeq)",
            headers: [cookie, ("Origin", base), ("X-CSRF-Token", csrf)])
        #expect(query.status == 415, "\(query.status) \(query.body)")
        // Without the cookie, the rest does not help.
        let noCookie = try await httpExchange(
            "POST", base + "/api/dlq/replay", body: json, headers: [("Origin", base), ("X-CSRF-Token", csrf), jsonType])
        #expect(noCookie.status == 401)

        // The page's own request: the dead letter is in the broker's table by now or soon.
        var answer: HTTPAnswer?
        try await waitUntil("the page's request replays the dead letter", timeout: .seconds(10), interval: .milliseconds(100)) {
            answer = try await replay([("Origin", base), ("X-CSRF-Token", csrf), jsonType])
            return answer?.status == 200
        }
        let replayed = try #require(answer)
        #expect(replayed.body.hasPrefix("replayed "), "\(replayed.body)")
        #expect(replayed.header("Referrer-Policy") == "no-referrer")

        await member.close()
        await producer.socket.close()
        await io.shutdown()
        await context.terminate()
    }
}
