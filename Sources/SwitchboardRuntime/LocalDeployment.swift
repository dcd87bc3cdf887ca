// What `switchboard up` runs, as a value: each process's name, program, arguments, log, admin
// port and how long it gets to stop, in start order, built from up's options alone. `up` starts
// what this says, and a test checks the layout (ports distinct, every server its admin port,
// every client the broker's endpoints), which the hand-written start sequence never had.

public import Foundation

/// The processes of a Switchboard run on one machine (`switchboard up`), in start order.
public struct LocalDeployment: Sendable {
    /// Up's options: what the layout is built from.
    public struct Options: Sendable {
        /// Where state, keys and logs go.
        public var dataDirectory: String = ".switchboard"
        /// The first of the broker's five consecutive ports (ingest, fan-out, replay, service,
        /// groups) on 127.0.0.1.
        public var port = 5560
        /// The back-end emulators' HTTPS port.
        public var emulatorPort = 8480
        /// The front desk page's port; nil: no desk.
        public var deskPort: Int? = 9580
        /// The first admin port (each program at its `AdminPort.offset` after it); 0: any free
        /// port for each; nil: no `--admin` flag, the environment's SWITCHBOARD_ADMIN applies.
        public var adminBase: Int? = AdminPort.base
        /// Time between the demo kiosk's check-ins; nil: no demo kiosk.
        public var demoInterval: String? = "2s"

        public init() {}
    }

    /// The flags that give each program its CURVE keys (`LocalKeys` makes the files).
    public struct KeyArguments: Sendable {
        /// The broker's: its secret certificate and the allow-list.
        public var broker: [String]
        /// A client's, by principal name.
        public var client: @Sendable (String) -> [String]

        public init(broker: [String], client: @escaping @Sendable (String) -> [String]) {
            self.broker = broker
            self.client = client
        }
    }

    /// One process `up` starts and supervises.
    public struct Process: Sendable, Hashable {
        public var name: String
        /// A program beside `switchboard` (see `ChildProcess`).
        public var executable: String
        public var arguments: [String]
        /// The arguments of a restart, when they differ (the emulator reuses its first
        /// certificate); nil: `arguments`.
        public var restartArguments: [String]?
        /// Its log file; nil: it writes to up's own output (the monitor).
        public var log: URL?
        /// Whether its standard output goes to the log too (the broker writes only errors).
        public var outputToLog: Bool
        /// Its admin port (`--admin 127.0.0.1:PORT`); nil: none given.
        public var adminPort: Int?
        /// `up` waits for its READY=1 before starting the rest, which need it.
        public var awaited: Bool
        /// How long it may take to stop after SIGTERM before SIGKILL.
        public var stopGrace: Duration
    }

    public let options: Options
    /// The broker's endpoints, as every client is given them.
    public let endpoints: BrokerEndpoints
    /// The processes in start order (they are stopped in reverse).
    public let processes: [Process]

    public var data: URL { URL(fileURLWithPath: options.dataDirectory, isDirectory: true) }
    public var logs: URL { data.appendingPathComponent("logs") }
    public var keys: URL { data.appendingPathComponent("keys") }
    public var brokerDirectory: URL { data.appendingPathComponent("broker") }
    public var emulatorDirectory: URL { data.appendingPathComponent("emulator") }
    /// The test CA and the emulator's certificate, made at its first start.
    public var tlsDirectory: URL { emulatorDirectory.appendingPathComponent("tls") }
    /// Auth's accounts file goes here (`accounts.json`), its state below.
    public var authDirectory: URL { data.appendingPathComponent("auth") }
    /// The demo kiosk's roster goes here (`roster.csv`).
    public var kioskDirectory: URL { data.appendingPathComponent("kiosk") }
    /// The emulators' base URL.
    public var backends: String { "https://127.0.0.1:\(options.emulatorPort)" }
    /// The demo kiosk's and the desk's names (their keys' principals too).
    public static let demoKiosk = "demo-kiosk-1"
    public static let deskKiosk = "desk-1"

    /// - Parameter keys: the key flags; nil: an insecure run (`--insecure` for the broker).
    public init(_ options: Options, keys: KeyArguments?) {
        self.options = options
        var endpoints = BrokerEndpoints(host: "127.0.0.1")
        endpoints.ingest = "tcp://127.0.0.1:\(options.port)"
        endpoints.fanout = "tcp://127.0.0.1:\(options.port + 1)"
        endpoints.replay = "tcp://127.0.0.1:\(options.port + 2)"
        endpoints.service = "tcp://127.0.0.1:\(options.port + 3)"
        endpoints.groups = "tcp://127.0.0.1:\(options.port + 4)"
        self.endpoints = endpoints
        let data = URL(fileURLWithPath: options.dataDirectory, isDirectory: true)
        let logs = data.appendingPathComponent("logs")
        let tls = data.appendingPathComponent("emulator/tls")
        let caFile = tls.appendingPathComponent("ca.pem").path
        let backends = "https://127.0.0.1:\(options.emulatorPort)"
        func adminPort(_ program: AdminPort) -> Int? {
            options.adminBase.map { $0 == 0 ? 0 : $0 + program.offset }
        }
        func admin(_ program: AdminPort) -> [String] {
            adminPort(program).map { ["--admin", "127.0.0.1:\($0)"] } ?? []
        }
        func clientKeys(_ name: String) -> [String] { keys?.client(name) ?? [] }
        func log(_ name: String) -> URL { logs.appendingPathComponent("\(name).log") }

        var processes: [Process] = []
        processes.append(
            Process(
                name: "broker", executable: "switchboard-broker",
                arguments: [
                    "--data-dir", data.appendingPathComponent("broker").path, "--ingest", endpoints.ingest, "--fanout", endpoints.fanout,
                    "--replay", endpoints.replay, "--service", endpoints.service, "--groups", endpoints.groups,
                ] + admin(.broker) + (keys?.broker ?? ["--insecure"]),
                log: log("broker"), outputToLog: false, adminPort: adminPort(.broker), awaited: true, stopGrace: .seconds(20)))
        let emulatorArguments = [
            "--port", String(options.emulatorPort), "--state", data.appendingPathComponent("emulator/state.json").path,
        ]
        processes.append(
            Process(
                name: "emulator", executable: "switchboard-emulator", arguments: emulatorArguments + ["--tls-generate", tls.path],
                // A restart serves the certificate made at the first start: auth and the workers
                // trust only the CA written then. Its state is on disk, so nothing else is lost.
                restartArguments: emulatorArguments + [
                    "--tls-certificate", tls.appendingPathComponent("server.pem").path, "--tls-key",
                    tls.appendingPathComponent("server-key.pem").path,
                ], log: log("emulator"), outputToLog: true, awaited: true, stopGrace: .seconds(10)))
        processes.append(
            Process(
                name: "auth", executable: "switchboard-auth",
                arguments: [
                    "--accounts-file", data.appendingPathComponent("auth/accounts.json").path, "--service", endpoints.service, "--ingest",
                    endpoints.ingest, "--data-dir", data.appendingPathComponent("auth/state").path, "--ca-file", caFile,
                ] + admin(.auth) + clientKeys("auth"),
                log: log("auth"), outputToLog: true, adminPort: adminPort(.auth), awaited: false, stopGrace: .seconds(10)))
        // The workers, each with its own key, data directory and log; their tokens come from auth.
        for (program, url) in [(AdminPort.filemaker, backends), (.eto, backends + "/API"), (.directory, backends + "/directory")] {
            let name = program.rawValue
            processes.append(
                Process(
                    name: name, executable: "switchboard-\(name)",
                    arguments: [
                        "--groups", endpoints.groups, "--service", endpoints.service, "--ingest", endpoints.ingest, "--url", url,
                        "--ca-file", caFile, "--data-dir", data.appendingPathComponent(name).path,
                    ] + admin(program) + clientKeys(name),
                    log: log(name), outputToLog: true, adminPort: adminPort(program), awaited: false, stopGrace: .seconds(10)))
        }
        processes.append(
            Process(
                name: "monitor", executable: "switchboard-monitor",
                arguments: ["--fanout", endpoints.fanout, "--replay", endpoints.replay, "--from", "1"] + clientKeys("monitor"),
                log: nil, outputToLog: false, awaited: false, stopGrace: .seconds(10)))
        if let interval = options.demoInterval {
            processes.append(
                Process(
                    name: "kiosk", executable: "switchboard-kiosk",
                    arguments: [
                        "demo", "--id", Self.demoKiosk, "--ingest", endpoints.ingest, "--interval", interval, "--outbox",
                        data.appendingPathComponent("kiosk/\(Self.demoKiosk)/outbox.sqlite").path, "--roster",
                        data.appendingPathComponent("kiosk/roster.csv").path,
                    ] + admin(.kiosk) + clientKeys(Self.demoKiosk),
                    log: log("kiosk"), outputToLog: true, adminPort: adminPort(.kiosk), awaited: false, stopGrace: .seconds(10)))
        }
        if let deskPort = options.deskPort {
            // The front desk, as the kiosk desk-1 at the seed's site 101, program 792.
            processes.append(
                Process(
                    name: "desk", executable: "switchboard-kiosk",
                    arguments: [
                        "desk", "--id", Self.deskKiosk, "--data-dir", data.path, "--listen", "127.0.0.1:\(deskPort)", "--site-id", "101",
                        "--program-id", "792",
                    ] + admin(.desk) + clientKeys(Self.deskKiosk),
                    log: log("desk"), outputToLog: true, adminPort: adminPort(.desk), awaited: false, stopGrace: .seconds(10)))
        }
        self.processes = processes
    }

    /// The process named `name`, if this run has it.
    public func process(_ name: String) -> Process? {
        processes.first { $0.name == name }
    }

    /// Every TCP port this run listens on, with who listens there: the broker's five, the
    /// emulators', the desk's and each admin port (0, any free port, left out).
    public var listeningPorts: [(port: Int, owner: String)] {
        var ports: [(port: Int, owner: String)] = (0..<5).map { (options.port + $0, "broker") }
        ports.append((options.emulatorPort, "emulator"))
        if let deskPort = options.deskPort, process("desk") != nil { ports.append((deskPort, "desk")) }
        for process in processes { if let port = process.adminPort, port != 0 { ports.append((port, "\(process.name) admin")) } }
        return ports
    }
}
