import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

/// `switchboard status`: the live services and workers, from the broker's `mmi.workers`.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the services registered with the broker, their workers and queues.",
        discussion: """
            Asks the broker's service endpoint (MMI, mmi.workers). The endpoint is --service, else
            SWITCHBOARD_SERVICE, else the one a local broker wrote to <data-dir>/broker/endpoints.json,
            else tcp://127.0.0.1:5563. Exits 1 if the broker does not answer within --timeout.
            """)

    @Option(help: "The broker's service endpoint.") var service: String?
    @Option(name: .customLong("data-dir"), help: "Where `switchboard up` keeps its state.") var dataDirectory = ".switchboard"
    @Option(help: "How long to wait for the broker.") var timeout = "3s"
    @Flag(help: "Print the broker's answer as JSON.") var json = false
    @Option(help: "A secret certificate (or SWITCHBOARD_CERTIFICATE), for a broker that runs CURVE.") var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's .cert file or public key (or SWITCHBOARD_BROKER_KEY).")
    var brokerKey: String?

    func validate() throws {
        do {
            _ = try ClientCredentials.load(certificate: certificate, brokerKey: brokerKey)
        } catch let failure as Certificate.Failure {
            throw ValidationError(failure.description)
        }
        guard DurationText.parse(timeout) != nil else { throw ValidationError("--timeout: '\(timeout)' is not a duration") }
    }

    /// From the flags or environment; else the operator key `switchboard up` made, if any.
    func credentials() throws -> ClientCredentials? {
        if let given = try ClientCredentials.load(certificate: certificate, brokerKey: brokerKey) { return given }
        let secrets = URL(fileURLWithPath: dataDirectory).appendingPathComponent("keys/secrets")
        let operatorSecret = secrets.appendingPathComponent("operator.secret").path
        let brokerCertificate = secrets.appendingPathComponent("broker.cert").path
        guard FileManager.default.fileExists(atPath: operatorSecret), FileManager.default.fileExists(atPath: brokerCertificate) else {
            return nil
        }
        return try ClientCredentials.load(certificate: operatorSecret, brokerKey: brokerCertificate, environment: [:])
    }

    var endpoint: String {
        if let service { return service }
        if let fromEnvironment = ProcessInfo.processInfo.environment["SWITCHBOARD_SERVICE"] { return fromEnvironment }
        let file = URL(fileURLWithPath: dataDirectory).appendingPathComponent("broker/endpoints.json").path
        if let endpoints = try? JSONDecoder().decode([String: String].self, from: Data(contentsOf: URL(fileURLWithPath: file))),
            let service = endpoints["service"]
        {
            return service
        }
        return "tcp://127.0.0.1:5563"
    }

    func run() async throws {
        var logger = Logger(label: "status")
        logger.logLevel = .error
        let context = try Context()
        let io = try IOThread(context: context)
        var settings = ServiceClient.Settings()
        settings.socketOptions = try credentials()?.socketOptions ?? []
        let client = ServiceClient(io: io, endpoint: endpoint, settings: settings, logger: logger)
        let result: Result<ServiceDirectory, ServiceClientError>
        do {
            result = .success(try await client.directory(timeout: DurationText.parse(timeout)))
        } catch {
            result = .failure(error)
        }
        await client.close()
        await io.shutdown()
        context.terminate()

        switch result {
        case .failure(.timeout):
            FileHandle.standardError.write(Data("switchboard status: no answer from the broker at \(endpoint) within \(timeout)\n".utf8))
            throw ExitCode(1)
        case .failure(let error):
            FileHandle.standardError.write(Data("switchboard status: \(error)\n".utf8))
            throw ExitCode(1)
        case .success(let directory):
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(directory), as: UTF8.self))
            } else {
                print(Self.table(directory, endpoint: endpoint), terminator: "")
            }
        }
    }

    /// The readable form: one row per service, columns aligned.
    static func table(_ directory: ServiceDirectory, endpoint: String) -> String {
        var text = "Broker \(endpoint): \(directory.workers) worker\(directory.workers == 1 ? "" : "s"), "
        text += "heartbeat \(directory.heartbeatMilliseconds) ms × \(directory.liveness)\n"
        if directory.curve == false {
            text += "WARNING: this broker runs WITHOUT CURVE: anyone who reaches its endpoints can connect (--insecure use only)\n"
        }
        guard !directory.services.isEmpty else { return text + "No services registered.\n" }
        let header = ["SERVICE", "WORKERS", "IDLE", "BUSY", "QUEUED", "OLDEST WAIT", "PROTOCOLS"]
        let rows = directory.services.map { service in
            [
                service.name, String(service.workers), String(service.idle), String(service.busy), String(service.queued),
                service.queued == 0 ? "-" : "\(service.oldestQueuedMilliseconds) ms",
                service.protocols.isEmpty ? "-" : service.protocols.joined(separator: ", "),
            ]
        }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        for row in [header] + rows {
            let cells = row.enumerated().map { column, cell in
                cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            text += cells.joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        }
        return text
    }
}
