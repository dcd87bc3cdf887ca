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
            """)

    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"emulator\" section.") var config: String?
    @Option(help: "Address to listen on (default 127.0.0.1).") var host: String?
    @Option(help: "Port (default 8480; 0 picks a free one, reported on the listening line).") var port: Int?
    @Option(name: .customLong("api"), help: "Serve only this API (eto, filemaker, directory, sap); repeat for several. Default: all.")
    var apis: [String] = []
    @Option(help: "Seed document (JSON) instead of the bundled one.") var seed: String?
    @Option(help: "Keep the data in this file across restarts (created on first save).") var state: String?
    @Option(
        name: .customLong("tls-generate"),
        help: "Serve HTTPS with a new test CA and server certificate written to this directory (ca.pem, server.pem, server-key.pem).")
    var tlsGenerate: String?
    @Option(
        name: .customLong("tls-host"),
        help: "A DNS name or address the generated server certificate is for, besides localhost and 127.0.0.1; repeatable (key tls_hosts).")
    var tlsHosts: [String] = []
    @Option(name: .customLong("tls-certificate"), help: "Serve HTTPS with this PEM certificate chain (with --tls-key).") var tlsCertificate:
        String?
    @Option(name: .customLong("tls-key"), help: "The PEM private key for --tls-certificate.") var tlsKey: String?
    @Option(name: .customLong("log-format"), help: "text or json.") var logFormat: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel: String?

    static let flagNames = [
        "host": "--host", "port": "--port", "api": "--api", "seed": "--seed", "state": "--state", "tls_generate": "--tls-generate",
        "tls_hosts": "--tls-host",
        "tls_certificate": "--tls-certificate", "tls_key": "--tls-key", "log_format": "--log-format", "log_level": "--log-level",
    ]

    func run() async throws {
        // Run Swift concurrency on NIO's event loops: a request then never hops between the
        // event loop and the cooperative pool (measured: 1.4–1.6× the requests per second on two
        // cores, `switchboard-bench --emulator --nio-executor`).
        _ = NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        let (host, port, apis, seed, state, tlsGenerate, tlsHosts, tlsCertificate, tlsKey):
            (String, Int, [String], String?, String?, String?, [String], String?, String?)
        do {
            let given: [String: String?] = [
                "host": self.host, "port": self.port.map(String.init), "api": self.apis.isEmpty ? nil : self.apis.joined(separator: ","),
                "seed": self.seed, "state": self.state, "tls_generate": self.tlsGenerate,
                "tls_hosts": self.tlsHosts.isEmpty ? nil : self.tlsHosts.joined(separator: ","), "tls_certificate": self.tlsCertificate,
                "tls_key": self.tlsKey, "log_format": logFormat, "log_level": logLevel,
            ]
            let layers = try ConfigurationLayers(
                program: "emulator", file: config, keys: Array(Self.flagNames.keys), flags: given.compactMapValues { $0 },
                flagNames: Self.flagNames, shared: ["log_format", "log_level"])
            host = try layers.nonEmpty("host") ?? "127.0.0.1"
            port = try layers.integer("port", default: 8480, in: 0...65535)
            apis = try layers.list("api") ?? []
            seed = try layers.nonEmpty("seed")
            state = try layers.nonEmpty("state")
            tlsGenerate = try layers.nonEmpty("tls_generate")
            tlsHosts = try layers.list("tls_hosts") ?? []
            tlsCertificate = try layers.nonEmpty("tls_certificate")
            tlsKey = try layers.nonEmpty("tls_key")
            try StructuredLogHandler.bootstrap(
                formatOption: try layers.nonEmpty("log_format"), levelOption: try layers.nonEmpty("log_level"))
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
            ServiceReadiness.notify(.ready, .status("listening \(scheme)://\(host):\(port)"))
        }
        // SIGTERM and SIGINT shut the server down gracefully (connections in hand are answered);
        // it also saves the state file on the way out.
        var runtime = ProcessRuntime(program: "emulator", logger: logger)
        runtime.add(service, name: "emulator")
        try await runtime.run()
    }
}
