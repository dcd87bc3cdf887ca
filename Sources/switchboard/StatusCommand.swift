import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

/// `switchboard status`: the live services and workers, from the broker's `mmi.workers`, and
/// the consumer groups, from its groups endpoint.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the services registered with the broker, their workers and queues, and its consumer groups.",
        discussion: """
            Asks the broker's service endpoint (MMI, mmi.workers) and its groups endpoint \
            (groups.list) at once. The service endpoint is --service, else SWITCHBOARD_SERVICE, else \
            the one a local broker wrote to <data-dir>/broker/endpoints.json, else \
            tcp://127.0.0.1:5563; the groups endpoint is found the same way (--groups, \
            SWITCHBOARD_GROUPS, endpoints.json, tcp://127.0.0.1:5564). Exits 1 if either does not \
            answer within --timeout (what did answer is still printed).
            """)

    @Option(
        help: "The broker's service endpoint (default: <data-dir>/broker/endpoints.json's, else tcp://<broker-host>:5563).")
    var service: String?
    @Flag(help: "Print the broker's answer as JSON (mmi.workers' fields, and `groups` as `switchboard groups --json` lists them).")
    var json = false
    @OptionGroup(title: "Broker connection") var broker: BrokerOptions

    func run() async throws {
        var logger = Logger(label: "status")
        logger.logLevel = .error
        let connection = try broker.load().connection
        let options = connection.socketOptions
        let wait = broker.wait
        var settings = ServiceClient.Settings()
        settings.socketOptions = options
        let (endpoint, groupsEndpoint) = (connection.endpoints.service, connection.endpoints.groups)
        let (result, groups) = try await IOThread.withIOThread { io in
            let client = ServiceClient(io: io, endpoint: endpoint, settings: settings, logger: logger)
            let groupsClient = GroupAdminClient(io: io, endpoint: groupsEndpoint, settings: .init(timeout: wait, socketOptions: options))
            async let directoryAnswer = Self.directory(client, timeout: wait)
            async let groupsAnswer = Self.groups(groupsClient)
            let answers = await (directoryAnswer, groupsAnswer)
            await client.close()
            return answers
        }

        let directory: ServiceDirectory
        switch result {
        case .failure(.timeout):
            FileHandle.standardError.write(
                Data("switchboard status: no answer from the broker at \(endpoint) within \(broker.timeout)\n".utf8))
            throw ExitCode(1)
        case .failure(.unreachable):
            FileHandle.standardError.write(
                Data(
                    "switchboard status: no connection to the broker at \(endpoint) within \(broker.timeout): it is down or unreachable, or it refused this program's key (is its certificate on the broker's allow-list?)\n"
                        .utf8))
            throw ExitCode(1)
        case .failure(let error):
            FileHandle.standardError.write(Data("switchboard status: \(error)\n".utf8))
            throw ExitCode(1)
        case .success(let answer):
            directory = answer
        }
        if json {
            try printJSON(Report(directory: directory, groups: try? groups.get()))
        } else {
            var text = Self.table(directory, endpoint: endpoint)
            if case .success(let groups) = groups { text += "\n" + GroupsCommand.table(groups) }
            print(text, terminator: "")
        }
        if case .failure(let error) = groups {
            FileHandle.standardError.write(
                Data("switchboard status: consumer groups: \(BrokerOptions.explain(error, usedKeys: !options.isEmpty))\n".utf8))
            throw ExitCode(1)
        }
    }

    static func directory(_ client: ServiceClient, timeout: Duration) async -> Result<ServiceDirectory, ServiceClientError> {
        do {
            return .success(try await client.directory(timeout: timeout))
        } catch {
            return .failure(error)
        }
    }

    static func groups(_ client: GroupAdminClient) async -> Result<[GroupInfo], GroupAdminError> {
        do {
            return .success(try await client.groups())
        } catch {
            return .failure(error)
        }
    }

    /// `mmi.workers`' answer with the groups beside it, under `groups` (absent when the groups
    /// endpoint did not answer).
    struct Report: Encodable {
        var directory: ServiceDirectory
        var groups: [GroupInfo]?

        enum CodingKeys: String, CodingKey { case groups }

        func encode(to encoder: any Encoder) throws {
            // The directory's own keys first, then `groups` into the same JSON object.
            try directory.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(groups, forKey: .groups)
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
        return text + TextTable.render(header, rows)
    }
}
