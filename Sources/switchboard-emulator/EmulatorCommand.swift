import ArgumentParser
import Configuration
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SwitchboardEmulators
import SwitchboardRuntime
import UnixSignals

@main
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-emulator",
        abstract: "Local stand-ins for ETO, the FileMaker Data API, the Directory and SAP Mobile Services.",
        discussion: """
            One HTTP(S) server, each API under its real path shape; /_emulator/… drives faults, the
            request log, the clock and resets (see Sources/SwitchboardEmulators/README.md).
            When it is listening it prints one line to standard output:
              listening http://HOST:PORT   (https with TLS)
            SIGTERM or SIGINT stops it; with --state the data is saved first.
            """, version: SwitchboardVersion.current)

    // Each option is a key (`tls_generate` is `--tls-generate`), read through the program's
    // ConfigReader, where a flag is the top source; declared for --help and to refuse a misspelt flag.
    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"emulator\" section.") var config: String?
    @Option(help: "Address to listen on (default \(EmulatorCommand.defaultHost)).") var host: String?
    @Option(help: "Port; 0 picks a free one, reported on the listening line (default \(EmulatorCommand.defaultPort)).") var port: String?
    @Option(help: "Serve only this API (eto, filemaker, directory, sap); repeatable, or comma-separated (default: all).")
    var api: [String] = []
    @Option(help: "Seed document (JSON) instead of the bundled one.") var seed: String?
    @Option(help: "Keep the data in this file across restarts (created on first save; default: in memory only).") var state: String?
    @Option(
        name: .customLong("tls-generate"),
        help: "Serve HTTPS with a new test CA and server certificate written to this directory (ca.pem, server.pem, server-key.pem).")
    var tlsGenerate: String?
    @Option(
        name: .customLong("tls-host"),
        help: "A DNS name or address the generated server certificate is for, besides localhost and 127.0.0.1; repeatable.")
    var tlsHost: [String] = []
    @Option(name: .customLong("tls-certificate"), help: "Serve HTTPS with this PEM certificate chain (with --tls-key).") var tlsCertificate:
        String?
    @Option(name: .customLong("tls-key"), help: "The PEM private key for --tls-certificate.") var tlsKey: String?
    @Option(name: .customLong("log-format"), help: "text or json (default text).") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (default info).")
    var logLevel: String?

    static let defaultHost = "127.0.0.1"
    static let defaultPort = 8480
    static let keys = [
        "host", "port", "api", "seed", "state", "tls_generate", "tls_host", "tls_certificate", "tls_key", "log_format", "log_level",
    ]

    func run() async throws {
        // Run Swift concurrency on NIO's event loops: a request then never hops between the
        // event loop and the cooperative pool (measured: 1.4–1.6× the requests per second on two
        // cores, `switchboard-bench --emulator --nio-executor`).
        _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        let (host, port, apis, seed, state, tlsGenerate, tlsHosts, tlsCertificate, tlsKey):
            (String, Int, [String], String?, String?, String?, [String], String?, String?)
        do {
            let configuration = try ProgramConfiguration(
                program: "emulator", keys: Self.keys, arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment,
                shared: ["log_format", "log_level"])
            (host, port, apis, seed, state, tlsGenerate, tlsHosts, tlsCertificate, tlsKey) = try configuration.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader)
                return (
                    try reader.nonEmpty("host") ?? Self.defaultHost, try reader.int("port", default: Self.defaultPort, in: 0...65535),
                    reader.stringArray(forKey: "api")?.filter { !$0.isEmpty } ?? [], try reader.nonEmpty("seed"),
                    try reader.nonEmpty("state"), try reader.nonEmpty("tls_generate"),
                    reader.stringArray(forKey: "tls_host")?.filter { !$0.isEmpty } ?? [], try reader.nonEmpty("tls_certificate"),
                    try reader.nonEmpty("tls_key")
                )
            }
        } catch {
            throw ValidationError("\(error)")
        }
        let logger = Logger(label: "emulator")

        var settings: Emulator.Configuration
        do {
            let loaded = try seed.map { try EmulatorSeed.load(from: URL(fileURLWithPath: $0)) } ?? EmulatorSeed.bundled()
            settings = Emulator.Configuration(seed: loaded)
            settings.host = host
            settings.port = port
            settings.statePath = state
            if !apis.isEmpty {
                settings.apis = Set(
                    try apis.map { name in
                        guard let api = Emulator.API(rawValue: name) else {
                            throw ValidationError(
                                "--api \(name) is not one of \(Emulator.API.allCases.map(\.rawValue).joined(separator: ", "))")
                        }
                        return api
                    })
            }
            switch (tlsGenerate, tlsCertificate, tlsKey) {
            case (nil, nil, nil): break
            case (let directory?, nil, nil):
                let tls = try EmulatorTLS.generate(hosts: ["localhost", "127.0.0.1"] + tlsHosts)
                try tls.write(to: directory)
                settings.tls = tls
                logger.info("test CA written; trust \(directory)/ca.pem to connect with verification on")
            case (nil, let certificate?, let key?):
                settings.tls = try EmulatorTLS.load(certificate: certificate, key: key)
            default:
                throw ValidationError("give either --tls-generate DIR, or both --tls-certificate and --tls-key")
            }
        } catch let error as EmulatorError {
            throw ValidationError(error.message)
        }
        let emulator = try Emulator(configuration: settings, logger: logger)
        let scheme = settings.tls == nil ? "http" : "https"
        let service = EmulatorService(emulator: emulator) { port in
            FileHandle.standardOutput.write(Data("listening \(scheme)://\(host):\(port)\n".utf8))
            ServiceReadiness.notify(
                .ready, .status("listening \(scheme)://\(host):\(port)"), environment: ProcessInfo.processInfo.environment)
        }
        // SIGTERM and SIGINT shut the server down gracefully (connections in hand are answered);
        // it also saves the state file on the way out.
        var runtime = ProcessRuntime(program: "emulator", logger: logger)
        runtime.add(service, name: "emulator")
        try await runtime.run()
    }
}
