import ArgumentParser
import Foundation
import SwitchboardEmulators
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity

@main
struct SwitchboardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard",
        abstract: "Switchboard's front door.",
        version: SwitchboardVersion.current,
        subcommands: [
            UpCommand.self, StatusCommand.self, GroupsCommand.self, DeadLetterCommand.self, AuthCommand.self, KeygenCommand.self,
            KeysCommand.self,
        ])
}

struct UpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "up",
        abstract:
            "Run everything on this machine: a broker, the back-end emulators, the auth manager, the FileMaker, ETO and Directory workers, a demo kiosk sending check-ins, and a monitor.",
        // Each paragraph is one line (a trailing backslash joins them): ArgumentParser wraps it
        // to the terminal, and a hard break would show.
        discussion: """
            State lives under --data-dir (default .switchboard in the working directory); each \
            program's log goes to <data-dir>/logs/<program>.log. The demo kiosk checks in the \
            emulator's seed participants in turn, so each check-in becomes a FileMaker record \
            (filemaker.record.written in the monitor) and an ETO TouchPoint response.

            Each program's pid is shown when it starts. A program that exits on its own (a \
            crash, kill -9, the broker included) is started again, as the systemd units do: \
            after 1s, then 2s, 4s … up to 30s while it keeps failing (a run of 60s starts the \
            back-off afresh). Each restart is shown and counted; after 5 restarts of one program \
            within 5 minutes, up stops everything and names the program and its log.

            Ctrl-C (or SIGTERM) stops everything cleanly: the kiosk, workers and monitor first, \
            then the broker, so no acknowledged check-in is lost.
            """)

    @Option(name: .customLong("data-dir"), help: "Where state and logs go.") var dataDirectory = ".switchboard"
    @Option(help: "First of five consecutive TCP ports (ingest, fan-out, replay, service, groups) on 127.0.0.1.") var port: Int = 5560
    @Option(help: "Time between demo check-ins.") var interval = "2s"
    @Option(help: "Stop by itself after this long (e.g. 10s); default: until Ctrl-C.") var duration: String?
    @Flag(name: .customLong("no-demo"), help: "Start no demo kiosk.") var noDemo = false
    @Option(
        name: .customLong("desk-port"),
        help: "Port of the front desk page on 127.0.0.1 (switchboard-kiosk desk as desk-1, site 101, program 792; sign in as demo).")
    var deskPort: Int = 9580
    @Flag(name: .customLong("no-desk"), help: "Start no front desk.") var noDesk = false
    @Flag(help: "Run without CURVE (no keys): anyone on this machine may connect. Experiments only.") var insecure = false
    @Option(name: .customLong("emulator-port"), help: "Port of the back-end emulators (HTTPS on 127.0.0.1).") var emulatorPort: Int = 8480
    @Option(
        name: .customLong("admin-port"),
        help:
            "First of eight consecutive ports on 127.0.0.1 where the programs serve /metrics and /health: broker, kiosk, (monitor), auth, filemaker, eto, directory, desk (default 9560; 0: any free port; without it, SWITCHBOARD_ADMIN applies when set)."
    )
    var adminPort: Int?

    func validate() throws {
        guard (1024...65_531).contains(port) else { throw ValidationError("--port must be 1024–65531") }
        guard (1024...65_535).contains(emulatorPort), !(port...(port + 4)).contains(emulatorPort) else {
            throw ValidationError("--emulator-port must be 1024–65535 and not one of the broker's five ports")
        }
        if let adminPort, adminPort != 0, !(1024...65_528).contains(adminPort) {
            throw ValidationError("--admin-port must be 0 or 1024–65528")
        }
        guard noDesk || (1024...65_535).contains(deskPort) && !(port...(port + 4)).contains(deskPort) && deskPort != emulatorPort else {
            throw ValidationError("--desk-port must be 1024–65535 and not one of the broker's five ports or the emulator's")
        }
        if let duration, DurationText.parse(duration) == nil { throw ValidationError("--duration: '\(duration)' is not a duration") }
        guard DurationText.parse(interval) != nil else { throw ValidationError("--interval: '\(interval)' is not a duration") }
    }

    /// What `up` runs, from its options.
    func layout(keys: LocalKeys?) -> LocalDeployment {
        var options = LocalDeployment.Options()
        options.dataDirectory = dataDirectory
        options.port = port
        options.emulatorPort = emulatorPort
        options.deskPort = noDesk ? nil : deskPort
        // Without --admin-port, SWITCHBOARD_ADMIN applies when set (no --admin flags then).
        options.adminBase = adminPort ?? (ProcessInfo.processInfo.environment["SWITCHBOARD_ADMIN"] == nil ? AdminPort.base : nil)
        options.demoInterval = noDemo ? nil : interval
        return LocalDeployment(
            options, keys: keys.map { keys in .init(broker: keys.brokerArguments, client: { keys.clientArguments($0) }) })
    }

    func run() async throws {
        let fileManager = FileManager.default
        let data = URL(fileURLWithPath: dataDirectory, isDirectory: true)
        // Secure by default: keys for the broker, the demo kiosk, the monitor and an operator
        // (for `switchboard status`, `groups` and `dlq`) are made on first start and kept under <data-dir>/keys.
        let keys = try insecure ? nil : LocalKeys.ensure(in: data.appendingPathComponent("keys"), principals: Self.principals)
        let deployment = layout(keys: keys)
        let logs = deployment.logs
        try fileManager.createDirectory(at: logs, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let endpoints = deployment.endpoints
        // Every child reports READY=1 on its own notify socket; the broker and the emulators are
        // waited for, as the rest need them.
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        // Every child's pid, as it starts: what an operator (or a test) needs to send it a signal.
        func start(_ name: String) throws {
            guard let process = deployment.process(name) else { return }
            let log = try process.log.map(openLog)
            let started = try supervisor.start(
                .init(
                    name: process.name, executable: process.executable, arguments: process.arguments,
                    output: process.outputToLog ? log : nil, errors: log, stopGrace: process.stopGrace,
                    restartArguments: process.restartArguments))
            say("\(name) started (pid \(started.processIdentifier))")
        }
        try start("broker")
        say("Switchboard is starting in \(data.path) (broker log: \(logs.appendingPathComponent("broker.log").path))")

        // The broker says it is ready once every socket is bound.
        switch await supervisor.waitUntilReady("broker", timeout: .seconds(15)) {
        case .ready: break
        case .exited:
            throw ValidationError(
                "the broker stopped at start; see \(logs.appendingPathComponent("broker.log").path) (is port \(port) in use? try --port)")
        case .timedOut:
            await supervisor.stopAll()
            throw ValidationError("the broker did not become ready within 15s; see its log")
        }
        say(
            "broker: ingest \(endpoints.ingest), fan-out \(endpoints.fanout), replay \(endpoints.replay), service \(endpoints.service), groups \(endpoints.groups)"
        )
        if let keys {
            say("CURVE on every endpoint; keys and the allow-list in \(keys.directory.path)")
        } else {
            say("WARNING: --insecure: no encryption, no authentication; anyone on this machine may connect")
        }

        // The emulated back ends (HTTPS with a test CA made on first start) and the auth manager,
        // which logs in to them with the seed's demo accounts and trusts only that CA.
        try fileManager.createDirectory(
            at: deployment.emulatorDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let emulatorLogPath = logs.appendingPathComponent("emulator.log")
        try start("emulator")
        // Ready once it listens.
        guard await supervisor.waitUntilReady("emulator", timeout: .seconds(15)) == .ready else {
            await supervisor.stopAll()
            throw ValidationError(
                "the emulator did not start; see \(emulatorLogPath.path) (is port \(emulatorPort) in use? try --emulator-port)")
        }
        let backends = deployment.backends
        say(
            "emulators: ETO, FileMaker, Directory and SAP at \(backends) (log: \(emulatorLogPath.path), control: \(backends)/_emulator/health)"
        )

        _ = try DemoAccounts.write(in: deployment.authDirectory, base: backends)
        try start("auth")
        say("auth: service `auth` for FileMaker, ETO, Directory and SAP (log: \(logs.appendingPathComponent("auth.log").path))")

        // The workers, each with its own key, data directory and log; their tokens come from auth.
        for name in ["filemaker", "eto", "directory"] { try start(name) }
        say(
            "workers: switchboard-filemaker (group filemaker → FileMaker CheckIns and Staff), switchboard-eto (group eto → TouchPoint 54; service eto), switchboard-directory (Directory ⇄ person.*) (logs: \(logs.path)/{filemaker,eto,directory}.log)"
        )

        try start("monitor")
        if !noDemo {
            _ = try DemoRoster.write(in: deployment.kioskDirectory)
            try start("kiosk")
            say("demo kiosk: one check-in every \(interval) (log: \(logs.appendingPathComponent("kiosk.log").path))")
        }
        if !noDesk {
            // The front desk, as the kiosk desk-1 at the seed's site 101, program 792, with a demo
            // staff account made on first start (its password kept 0600 beside the desk's files).
            let password = try DemoDesk.ensureAccount(data: data)
            try start("desk")
            say(
                "front desk: http://127.0.0.1:\(deskPort)/ — sign in as \(DemoDesk.user), password \(password) (log: \(logs.appendingPathComponent("desk.log").path))"
            )
        }
        if let adminBase = deployment.options.adminBase, adminBase != 0 {
            func port(_ program: AdminPort) -> Int { adminBase + program.offset }
            say(
                "metrics and health: http://127.0.0.1:\(adminBase)/metrics (broker), ports \(port(.kiosk)) kiosk, \(port(.auth)) auth, \(port(.filemaker))–\(port(.directory)) filemaker, eto, directory, \(port(.desk)) desk"
            )
        }
        say("Ctrl-C stops everything.")
        // `up` under systemd (Type=notify) is ready once everything is started.
        ServiceReadiness.notify(.ready, environment: ProcessInfo.processInfo.environment)

        let limit = duration.flatMap(DurationText.parse)
        // Runs until the time is up, Ctrl-C or SIGTERM (nil), or one program kept failing. Any
        // exit before then is unexpected, and restarted; the others reconnect by themselves
        // (to a restarted broker too).
        let gaveUp =
            try await untilInterrupted {
                await withTaskGroup(of: Supervisor.GaveUp?.self) { group in
                    group.addTask { await supervisor.keepRunning { say(Self.describe($0)) } }
                    if let limit {
                        group.addTask {
                            try? await Task.sleep(for: limit)
                            return nil
                        }
                    }
                    let first = await group.next() ?? nil
                    group.cancelAll()
                    return first
                }
            } ?? nil
        let restarts = supervisor.statuses.filter { $0.value.restarts > 0 }.sorted { $0.key < $1.key }
        // In the reverse of the start: the kiosk and monitor, the workers (they finish what they
        // hold and leave their groups while auth and the back ends still answer), auth, the
        // emulators; the broker last (20 s): it drains and closes the journal.
        let brokerStatus = await supervisor.stopAll()["broker"] ?? nil
        if let gaveUp {
            // The monitor writes to our output; every other program has a log of its own.
            let log = gaveUp.name == "monitor" ? "its output is above" : "see \(logs.appendingPathComponent("\(gaveUp.name).log").path)"
            say(
                "Stopped: \(gaveUp.name) kept failing (\(gaveUp.restarts) restarts within \(Self.text(gaveUp.window)), then it exited again); \(log)."
            )
            throw ExitCode(1)
        }
        let counted = restarts.isEmpty ? "" : " Restarts: \(restarts.map { "\($0.key) \($0.value.restarts)" }.joined(separator: ", "))."
        say(
            "Switchboard stopped\(brokerStatus == 0 ? " cleanly" : " (broker exit status \(brokerStatus.map(String.init) ?? "unknown"))").\(counted)"
        )
    }

    /// A line for `up`'s output about a restart.
    static func describe(_ event: Supervisor.Event) -> String {
        switch event {
        case .exited(let name, let termination, .restart(let delay, let restart, let limit, let window)):
            "\(name) exited (\(termination?.description ?? "unknown status")); restarting in \(text(delay)) (restart \(restart) of \(limit) in \(text(window)))"
        case .exited(let name, let termination, .giveUp(let restarts, let window)):
            "\(name) exited (\(termination?.description ?? "unknown status")) after \(restarts) restarts within \(text(window)); giving up"
        case .restarted(let name, let pid, let restarts):
            "\(name) started (pid \(pid), restart \(restarts))"
        case .restartFailed(let name, let reason):
            "\(name) could not be restarted: \(reason)"
        case .ready(let name, let pid, let after):
            "\(name) is ready again (pid \(pid), \(seconds(after)) after its restart)"
        }
    }

    /// "1s", "30s", "5 min": how `up` writes a delay or a window.
    static func text(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        return seconds >= 60 && seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds)s"
    }

    /// "2.35s".
    static func seconds(_ duration: Duration) -> String {
        String(format: "%.2fs", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    /// The principals `up` makes keys for (LocalKeys): one per program, and an operator for
    /// `switchboard status`, `groups` and `dlq`.
    static let principals: [(name: String, role: Role)] = [
        ("broker", .broker), (LocalDeployment.demoKiosk, .kiosk), (LocalDeployment.deskKiosk, .kiosk), ("monitor", .monitor),
        ("operator", .admin),
        ("auth", .auth),
        ("filemaker", .worker(service: "filemaker")), ("eto", .worker(service: "eto")), ("directory", .worker(service: "directory")),
    ]

    private func openLog(_ url: URL) throws -> FileHandle {
        if !FileManager.default.fileExists(atPath: url.path) {
            _ = FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        let handle = try FileHandle(forWritingTo: url)
        try handle.seekToEnd()
        return handle
    }
}

/// Writes a line at once: `up` shares the terminal with its children, whose lines would
/// otherwise overtake ours in a pipe or a log.
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// The accounts file `switchboard up` gives `switchboard-auth`: the emulator seed's demo
/// accounts (they open nothing real), written 0600 like any accounts file.
enum DemoAccounts {
    static func write(in directory: URL, base: String) throws -> String {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = directory.appendingPathComponent("accounts.json").path
        let document: [String: Any] = [
            "accounts": [
                [
                    "backend": "filemaker", "account": "switchboard", "password": "fm-demo-Passw0rd!", "base_url": base,
                    "options": ["database": "Shelter"],
                ],
                [
                    "backend": "eto", "account": "intake@riverside.example", "password": "eto-demo-Passw0rd!", "base_url": base + "/API",
                    "options": ["site": "101", "program": "792", "time_zone": "UTC"],
                ],
                ["backend": "directory", "account": "outreach-team", "password": "dir-demo-Passw0rd!", "base_url": base + "/directory"],
                [
                    "backend": "sap", "account": "outreach1", "password": "sap-demo-Passw0rd!", "base_url": base,
                    "options": ["application": "org.riverside.outreach"],
                ],
            ]
        ]
        let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
        try? fileManager.removeItem(atPath: path)
        guard fileManager.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("cannot write \(path)")
        }
        return path
    }
}

/// The front desk `up` runs: the kiosk `desk-1` and its demo staff account.
enum DemoDesk {
    static let kiosk = LocalDeployment.deskKiosk
    static let user = "demo"

    /// The demo account's password: made on first start (random, kept 0600 in
    /// <data-dir>/kiosk/desk-1/demo-password) and the account added with
    /// `switchboard-kiosk desk-user add demo --password-stdin`; later starts read it back.
    static func ensureAccount(data: URL) throws -> String {
        let fileManager = FileManager.default
        let directory = data.appendingPathComponent("kiosk/\(kiosk)")
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let passwordFile = directory.appendingPathComponent("demo-password")
        if let kept = try? String(contentsOf: passwordFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
            !kept.isEmpty, fileManager.fileExists(atPath: directory.appendingPathComponent("desk-users.json").path)
        {
            return kept
        }
        let alphabet = Array("abcdefghjkmnpqrstuvwxyz23456789")
        var generator = SystemRandomNumberGenerator()
        let password = (0..<3).map { _ in String((0..<4).map { _ in alphabet.randomElement(using: &generator)! }) }.joined(separator: "-")
        // A password file lost beside an existing account: the account is made anew.
        _ = try? deskUser(["remove", user], data: data)
        let (status, said) = try deskUser(["add", user, "--password-stdin"], data: data, input: password + "\n")
        guard status == 0 else { throw ValidationError("could not make the desk's demo account: \(said)") }
        try? fileManager.removeItem(at: passwordFile)
        guard
            fileManager.createFile(
                atPath: passwordFile.path, contents: Data((password + "\n").utf8), attributes: [.posixPermissions: 0o600])
        else { throw ValidationError("cannot write \(passwordFile.path)") }
        return password
    }

    /// Runs `switchboard-kiosk desk-user ARGS` for desk-1; its exit status and output.
    static func deskUser(_ arguments: [String], data: URL, input: String = "") throws -> (Int32, String) {
        let process = Process()
        process.executableURL = ChildProcess.executableDirectory.appendingPathComponent("switchboard-kiosk")
        process.arguments = ["desk-user"] + arguments + ["--id", kiosk, "--data-dir", data.path]
        let stdin = Pipe()
        let output = Pipe()
        process.standardInput = stdin
        process.standardOutput = output
        process.standardError = output
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let said = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: said, as: UTF8.self))
    }
}

/// The demo kiosk's roster: the emulator seed's ETO participants (enabled ones, each at their site
/// in an enabled program they are enrolled in), so the demo's check-ins match in ETO and land in
/// both back ends. Written anew at each start, 0600 (it names people, if made-up ones).
enum DemoRoster {
    static func write(in directory: URL) throws -> String {
        let seed = try EmulatorSeed.bundled()
        var enabled: Set<Int> = []
        for site in seed.eto.enterprises.flatMap(\.sites) {
            for program in site.programs where !program.disabled { enabled.insert(program.id) }
        }
        var text = "first_name,last_name,date_of_birth,site_id,program_id\n"
        for person in seed.eto.participants where !person.disabled {
            guard let program = person.enrollments.map(\.programID).first(where: enabled.contains) else { continue }
            let day = String(Timestamp.format(milliseconds: person.dateOfBirth).prefix(10))
            text += "\(person.firstName),\(person.lastName),\(day),\(person.siteID),\(program)\n"
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = directory.appendingPathComponent("roster.csv").path
        try? FileManager.default.removeItem(atPath: path)
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("cannot write \(path)")
        }
        return path
    }
}
