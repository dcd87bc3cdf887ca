import ArgumentParser
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
    @Option(help: "Address to listen on (default \(Emulator.Configuration.defaultHost)).") var host: String?
    @Option(help: "Port; 0 picks a free one, reported on the listening line (default \(Emulator.Configuration.defaultPort)).") var port:
        String?
    @Option(help: "Serve only this API (eto, filemaker, directory, sap); repeatable, or comma-separated (default: all).")
    var api: [String] = []
    @Option(help: "Seed document (JSON) instead of the bundled one (default: the bundled one).") var seed: String?
    @Option(help: "Keep the data in this file across restarts (created on first save; default: in memory only).") var state: String?
    @Option(
        name: .customLong("tls-generate"),
        help:
            "Serve HTTPS with a new test CA and server certificate written to this directory (ca.pem, server.pem, server-key.pem; default: plain HTTP)."
    )
    var tlsGenerate: String?
    @Option(
        name: .customLong("tls-host"),
        help: "A DNS name or address the generated server certificate is for, besides localhost and 127.0.0.1; repeatable (default: none).")
    var tlsHost: [String] = []
    @Option(name: .customLong("tls-certificate"), help: "Serve HTTPS with this PEM certificate chain (with --tls-key; default: none).")
    var tlsCertificate: String?
    @Option(name: .customLong("tls-key"), help: "The PEM private key for --tls-certificate (default: none).") var tlsKey: String?
    @Option(name: .customLong("log-format"), help: "text or json (default text).") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (default info).")
    var logLevel: String?

    func run() async throws {
        // Run Swift concurrency on NIO's event loops: a request then never hops between the
        // event loop and the cooperative pool (measured: 1.4–1.6× the requests per second on two
        // cores, `switchboard-bench --emulator --nio-executor`).
        _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        let settings: Emulator.Configuration
        do {
            let configuration = try Emulator.Configuration.programConfiguration(
                arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            settings = try configuration.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader)
                return try Emulator.Configuration(reader: reader)
            }
        } catch {
            throw ValidationError("\(error)")
        }
        let logger = Logger(label: "emulator")
        if let directory = settings.generatedTLSDirectory {
            logger.info("test CA written; trust \(directory)/ca.pem to connect with verification on")
        }
        let host = settings.host
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
