// `switchboard-emulator`'s settings, from the "emulator" section of its configuration, as an
// `Emulator.Configuration`. Reading them loads the seed and the TLS material they name, and with
// `tls_generate` makes a test CA and writes it out, so that a refusal names the key at fault.

public import Configuration
import Foundation
public import SwitchboardRuntime

extension Emulator.Configuration {
    /// Every key of the "emulator" section.
    public static let keys = [
        "host", "port", "api", "seed", "state", "tls_generate", "tls_host", "tls_certificate", "tls_key", "log_format", "log_level",
    ]

    /// `host` when not given: loopback.
    public static let defaultHost = "127.0.0.1"
    /// `port` when not given.
    public static let defaultPort = 8480

    /// The emulator's configuration: the "emulator" section, `SWITCHBOARD_EMULATOR_*`, and of the
    /// shared keys only logging's.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(
            program: "emulator", keys: keys, arguments: arguments, environment: environment, shared: ["log_format", "log_level"])
    }

    /// Reads the emulator's settings, loads its seed and its TLS material.
    ///
    /// Keys read: `host` (the address to listen on; default 127.0.0.1); `port` (0–65535, 0 picks
    /// a free one; default 8480); `api` (the APIs to serve, a list of `eto`, `filemaker`,
    /// `directory`, `sap`; default all); `seed` (a seed document, JSON; default the bundled one);
    /// `state` (a file that keeps the data across restarts; default none: in memory only); TLS,
    /// one way or none (default plain HTTP): `tls_generate` (a directory where a new test CA and
    /// server certificate are written, `ca.pem`, `server.pem`, `server-key.pem`) with `tls_host`
    /// (names or addresses the certificate is for besides localhost and 127.0.0.1, a list), or
    /// `tls_certificate` and `tls_key` (a PEM chain and its key). Logging (`log_format`,
    /// `log_level`) is `StructuredLogHandler.bootstrap(reader:)`'s.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        let seedPath = try reader.nonEmpty("seed")
        do {
            self.init(seed: try seedPath.map { try EmulatorSeed.load(from: URL(fileURLWithPath: $0)) } ?? EmulatorSeed.bundled())
        } catch {
            throw ConfigurationError(key: seedPath == nil ? nil : "seed", "\(error)")
        }
        host = try reader.nonEmpty("host") ?? Self.defaultHost
        port = try reader.int("port", default: Self.defaultPort, in: 0...65535)
        statePath = try reader.nonEmpty("state")
        let names = reader.stringArray(forKey: "api")?.filter { !$0.isEmpty } ?? []
        if !names.isEmpty {
            var apis: Set<Emulator.API> = []
            for name in names {
                guard let api = Emulator.API(rawValue: name) else {
                    throw ConfigurationError(
                        key: "api", "'\(name)' is not one of \(Emulator.API.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                apis.insert(api)
            }
            self.apis = apis
        }
        let hosts = reader.stringArray(forKey: "tls_host")?.filter { !$0.isEmpty } ?? []
        switch (try reader.nonEmpty("tls_generate"), try reader.nonEmpty("tls_certificate"), try reader.nonEmpty("tls_key")) {
        case (nil, nil, nil):
            break
        case (let directory?, nil, nil):
            do {
                let tls = try EmulatorTLS.generate(hosts: ["localhost", "127.0.0.1"] + hosts)
                try tls.write(to: directory)
                self.tls = tls
                generatedTLSDirectory = directory
            } catch {
                throw ConfigurationError(key: "tls_generate", "\(error)")
            }
        case (nil, let certificate?, let key?):
            do {
                tls = try EmulatorTLS.load(certificate: certificate, key: key)
            } catch {
                throw ConfigurationError(key: "tls_certificate", "\(error)")
            }
        default:
            throw ConfigurationError(
                "give either tls_generate (--tls-generate DIR), or both tls_certificate and tls_key (--tls-certificate, --tls-key)")
        }
    }
}
