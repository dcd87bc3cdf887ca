import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

/// `switchboard auth`: questions for the auth/token manager, through the broker.
struct AuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth", abstract: "Ask switchboard-auth about its back-end accounts.", subcommands: [AuthCheckCommand.self])
}

/// `switchboard auth check`: whether each account in auth's accounts file works now.
struct AuthCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Log in to each back end through switchboard-auth and say, per account, whether it works.",
        discussion: """
            Asks the `auth` service's `check` operation (protocol section 14.1) through the broker's \
            service endpoint, with an admin's key (the operator key `switchboard up` made, or \
            --certificate). auth logs in afresh to ETO, FileMaker (then logs out) and the Directory, \
            and asks SAP Mobile Services whether it still knows auth's registration (registering \
            again only when it does not). Each account is answered as working, refused (the back end \
            refused the credentials, or the account is misconfigured) or unreachable (the back end \
            did not answer, failed, or auth's refresh limit held the log-in back). No secret is \
            printed. Exits 1 when an account does not work or auth does not answer.
            """)

    @Option(help: "Check only this back end's accounts (eto, filemaker, directory, sap; default: every account).") var backend: String?
    @Option(
        help: "The broker's service endpoint (default: <data-dir>/broker/endpoints.json's, else tcp://<broker-host>:5563).")
    var service: String?
    @Flag(help: "Print auth's answer as JSON.") var json = false
    @OptionGroup(title: "Broker connection") var broker: BrokerOptions

    struct Reply: Codable {
        struct Account: Codable {
            var backend: String
            var account: String
            var result: String
            var code: String?
            var detail: String
        }
        var accounts: [Account]
        var checkedAt: String

        enum CodingKeys: String, CodingKey {
            case accounts
            case checkedAt = "checked_at"
        }
    }

    func validate() throws {
        if let backend, !["eto", "filemaker", "directory", "sap"].contains(backend) {
            throw ValidationError("--backend: '\(backend.prefix(40))' is not one of eto, filemaker, directory, sap")
        }
    }

    func run() async throws {
        var logger = Logger(label: "auth-check")
        logger.logLevel = .error
        let connection = try broker.load().connection
        let endpoint = connection.endpoints.service
        var settings = ServiceClient.Settings()
        settings.socketOptions = connection.socketOptions
        let content = try JSONSerialization.data(withJSONObject: backend.map { ["backend": $0] } ?? [:])
        // Each back end's log-in may take its HTTP time-outs: at least 30 s.
        let wait = max(broker.wait, .seconds(30))
        let result = try await IOThread.withIOThread { io -> Result<ServiceReply, ServiceClientError> in
            let client = ServiceClient(io: io, endpoint: endpoint, settings: settings, logger: logger)
            let result: Result<ServiceReply, ServiceClientError>
            do throws(ServiceClientError) {
                result = .success(try await client.request(service: "auth", operation: "check", content: content, timeout: wait))
            } catch {
                result = .failure(error)
            }
            await client.close()
            return result
        }

        let reply: ServiceReply
        switch result {
        case .failure(.timeout):
            fail("no answer from auth through the broker at \(endpoint) within \(wait): is switchboard-auth running and registered?")
        case .failure(.serviceError(let status, let failure)):
            fail("auth answered \(status) \(failure)")
        case .failure(let error):
            fail("\(error)")
        case .success(let answer):
            reply = answer
        }
        let answer = try JSONDecoder().decode(Reply.self, from: reply.content)
        if json {
            try printJSON(answer)
        } else {
            print(Self.table(answer), terminator: "")
        }
        if answer.accounts.isEmpty || answer.accounts.contains(where: { $0.result != "working" }) { throw ExitCode(1) }
    }

    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("switchboard auth check: \(message)\n".utf8))
        Foundation.exit(1)
    }

    static func table(_ reply: Reply) -> String {
        guard !reply.accounts.isEmpty else { return "auth holds no account of that back end.\n" }
        let rows = [["BACKEND", "ACCOUNT", "RESULT", "DETAIL"]] + reply.accounts.map { [$0.backend, $0.account, $0.result, $0.detail] }
        let widths = (0..<3).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            (0..<3).map { row[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ") + "  " + row[3]
        }.joined(separator: "\n") + "\n"
    }
}
