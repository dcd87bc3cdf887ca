import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// The README's walk-through ("While it runs, from another terminal …"), its commands taken from
/// README.md's code block as printed and run against `switchboard up` in a temporary directory.
/// Only what must differ is substituted: `.build/debug/` becomes the directory the tests were
/// built into, and the fixed ports (broker, admin, emulator, the dashboard's, `serve --admin`'s)
/// free ones. Each command has its documented outcome below; a command the README gains that
/// this table does not know fails the test, so the README cannot drift from what works.
extension ToolTests {
    /// One walk-through command's outcome: what its output must contain, and whether it runs
    /// until stopped (then: what to wait for in its output before stopping it).
    struct Outcome {
        var contains: [String]
        var runsUntilStopped = false
        /// Retry until it succeeds (the allow-list reloads and the eto service registers by themselves).
        var retry = false
    }

    /// Outcomes by the command's words after the program (the first that prefixes it).
    static let outcomes: [(String, Outcome)] = [
        ("switchboard keygen", Outcome(contains: ["riverside-1.cert"])),
        ("cp ", Outcome(contains: [])),
        ("switchboard-kiosk sites", Outcome(contains: ["site 101", "program 792"], retry: true)),
        ("switchboard-kiosk lookup", Outcome(contains: ["participant 1000"])),
        ("switchboard-kiosk checkin", Outcome(contains: ["participant 1000", "Delivered 1 check-in"])),
        ("switchboard-kiosk import", Outcome(contains: ["Queued 2 check-ins"])),
        ("switchboard-kiosk load", Outcome(contains: ["Generated 2000 check-ins"])),
        ("switchboard-kiosk status", Outcome(contains: ["waiting:", "delivered so far:"])),
        ("switchboard-kiosk flush", Outcome(contains: ["check-ins waiting to send"])),
        ("switchboard-kiosk serve", Outcome(contains: ["sending its outbox"], runsUntilStopped: true)),
        ("curl -s", Outcome(contains: ["switchboard_group_lag{"])),
        ("switchboard-monitor --topic", Outcome(contains: ["checkin.recorded  riverside-1"], runsUntilStopped: true)),
        ("switchboard-monitor --json", Outcome(contains: ["{\""], runsUntilStopped: true)),
        ("switchboard-monitor --stats", Outcome(contains: ["checkin.recorded"], runsUntilStopped: true)),
        ("switchboard-monitor lag", Outcome(contains: ["filemaker", "eto"])),
        ("switchboard-monitor web", Outcome(contains: ["http://127.0.0.1:"], runsUntilStopped: true)),
        ("switchboard status", Outcome(contains: ["eto", "filemaker"])),
        ("switchboard groups create", Outcome(contains: ["group 'audit'"])),
        ("switchboard dlq list", Outcome(contains: ["dead letter"])),
        ("curl --cacert", Outcome(contains: ["\"method\""])),
    ]

    /// The walk-through's lines: the code block after "While it runs, from another terminal".
    static func walkthrough() throws -> [String] {
        let readme = try String(contentsOf: Vectors.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        guard let intro = readme.range(of: "While it runs, from another terminal"),
            let open = readme.range(of: "```sh\n", range: intro.upperBound..<readme.endIndex),
            let close = readme.range(of: "\n```", range: open.upperBound..<readme.endIndex)
        else { throw WaitTimedOut(description: "README.md has no walk-through code block after 'While it runs, from another terminal'") }
        return readme[open.upperBound..<close.lowerBound].split(separator: "\n").map { line in
            // A comment starts at "  #" (the commands' own text has no such run).
            let text = String(line)
            return (text.range(of: "  #").map { String(text[..<$0.lowerBound]) } ?? text).trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
    }

    @Test(
        "the README walk-through, its commands parsed from README.md as printed, against `switchboard up` on free ports: each command's documented outcome"
    )
    func readmeWalkthrough() async throws {
        let lines = try Self.walkthrough()
        #expect(lines.count >= 20, "\(lines)")
        let directory = try TemporaryDirectory("readme")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort(count: 5)
        let emulatorPort = try freePort()
        let adminPort = try freePort(count: 8)
        let (servePort, webPort, deskPort) = (try freePort(), try freePort(), try freePort())
        let started = ContinuousClock.now
        let up = try programs.start(
            "switchboard",
            [
                "up", "--port", String(port), "--emulator-port", String(emulatorPort), "--admin-port", String(adminPort), "--desk-port",
                String(deskPort),
            ], log: "up.log")
        try await waitUntil("switchboard up has started everything", timeout: .seconds(90)) {
            guard up.isRunning else {
                // The broker's own words on why it stopped, with up's (a port taken between
                // `freePort` and the bind shows there).
                let broker = programs.read(".switchboard/logs/broker.log").split(separator: "\n").suffix(20).joined(separator: "\n")
                throw WaitTimedOut(description: "up exited: \(programs.read("up.log"))\nbroker log, last lines:\n\(broker)")
            }
            return programs.read("up.log").contains("Ctrl-C stops everything.")
        }
        // `import day.csv` reads a file of the walk-through's reader: two of the seed's people.
        try "first_name,last_name,date_of_birth,site_id,program_id\nAna,Ortiz,1976-02-23,101,792\nAna,Ortiz,1976-02-23,101,792\n".write(
            toFile: directory.path("day.csv"), atomically: true, encoding: .utf8)
        var environment = ["SWITCHBOARD_MONITOR_LISTEN": "127.0.0.1:\(webPort)"]
        let binaries = Programs.binaries.path + "/"
        for (index, line) in lines.enumerated() {
            if line.hasPrefix("export ") {
                for assignment in line.dropFirst("export ".count).split(separator: " ") {
                    let parts = assignment.split(separator: "=", maxSplits: 1)
                    environment[String(parts[0])] = String(parts[1])
                }
                continue
            }
            if line.hasPrefix("unset ") {
                for name in line.dropFirst("unset ".count).split(separator: " ") { environment[String(name)] = nil }
                continue
            }
            let command = line.replacingOccurrences(of: ".build/debug/", with: binaries)
                .replacingOccurrences(of: "127.0.0.1:9560/", with: "127.0.0.1:\(adminPort)/")
                .replacingOccurrences(of: "127.0.0.1:9571", with: "127.0.0.1:\(servePort)")
                .replacingOccurrences(of: "127.0.0.1:8480/", with: "127.0.0.1:\(emulatorPort)/")
            let words = line.replacingOccurrences(of: ".build/debug/", with: "")
            guard let outcome = Self.outcomes.first(where: { words.hasPrefix($0.0) })?.1 else {
                Issue.record("README walk-through line \(index + 1) has no documented outcome in this test: \(line)")
                continue
            }
            let log = "step\(index).log"
            // Line-buffered output (stdbuf), so a program run until stopped has shown its lines;
            // `exec` makes the shell the program, so stopping it stops the program.
            let shell = command.contains("|") ? command : "exec " + command
            func run(_ log: String) throws -> ChildProcess {
                try programs.start(
                    "sh", ["-oL", "-eL", "/bin/sh", "-c", shell], log: log, environment: environment, executable: "/usr/bin/stdbuf")
            }
            func shows(_ log: String) -> Bool { outcome.contains.allSatisfy { programs.read(log).contains($0) } }
            if outcome.runsUntilStopped {
                let child = try run(log)
                try await waitUntil("'\(line)' shows \(outcome.contains); it printed: \(programs.read(log))", timeout: .seconds(30)) {
                    guard child.isRunning else { throw WaitTimedOut(description: "'\(line)' exited: \(programs.read(log))") }
                    return shows(log)
                }
                #expect(await child.stop() != nil, "'\(line)' did not stop: \(programs.read(log))")
                #expect(shows(log), "'\(line)': \(programs.read(log))")
            } else if outcome.retry {
                var attempt = 0
                try await waitUntil("'\(line)' succeeds; the last try: \(programs.read("\(log).\(attempt)"))", timeout: .seconds(60)) {
                    attempt += 1
                    let child = try run("\(log).\(attempt)")
                    return await child.waitForExit(timeout: .seconds(30)) == 0 && shows("\(log).\(attempt)")
                }
            } else {
                let child = try run(log)
                let status = await child.waitForExit(timeout: .seconds(60))
                if status == nil { _ = await child.stop() }
                #expect(status == 0 && shows(log), "'\(line)' exited \(String(describing: status)): \(programs.read(log))")
            }
        }
        #expect(await up.stop(grace: .seconds(60)) == 0, "\(programs.read("up.log"))")
        let took = started.duration(to: .now)
        #expect(took < .seconds(120), "the walk-through took \(took)")
    }
}
