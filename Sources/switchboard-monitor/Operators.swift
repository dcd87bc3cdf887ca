// What an operator works from besides the event stream: each consumer group's lag (`lag`) and
// the dead letters (`dlq`); event rates (`--stats`) are SwitchboardMonitor's RateBoard. Counts, names of
// groups, types and producers only: no event content, so nothing personal.

import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardMonitor
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

/// Where the groups endpoint is and who we are there.
struct GroupEndpointOptions: ParsableArguments {
    @OptionGroup var connection: MonitorConnection
    @Flag(help: "One JSON document instead of a table.") var json = false
    @Option(help: "Show it again this often until interrupted, e.g. 5s (at least 1s).") var every: String?

    func validate() throws {
        if let every, (DurationText.parse(every) ?? .zero) < .seconds(1) {
            throw ValidationError("--every must be a duration of at least 1s, got '\(every)'")
        }
    }

    /// Runs `body` with a client of the groups endpoint, once or every `--every`.
    func repeating(_ body: @escaping @Sendable (GroupAdminClient) async throws -> String) async throws {
        let broker = try connection.load().connection
        let endpoint = broker.endpoints.groups
        let options = broker.socketOptions
        let every = every
        try await IOThread.withIOThread { io in
            let client = GroupAdminClient(io: io, endpoint: endpoint, settings: .init(socketOptions: options))
            _ = try await untilInterrupted {
                while true {
                    let text: String
                    do {
                        text = try await body(client)
                    } catch let error as GroupAdminError {
                        throw ValidationError("\(endpoint): \(error)")
                    }
                    Table.emit(text, clearing: every != nil)
                    guard let every = every.flatMap(DurationText.parse) else { return }
                    try await Task.sleep(for: every)
                }
            }
        }
    }
}

struct LagCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lag", abstract: "Each consumer group's cursor, lag, deliveries in flight, members and dead letters.")

    @OptionGroup var options: GroupEndpointOptions

    func run() async throws {
        let json = options.json
        try await options.repeating { client in
            let groups = try await client.groups()
            if json { return String(decoding: try JSONEncoder.sorted.encode(["groups": groups]), as: UTF8.self) }
            return Table.render(
                ["group", "cursor", "head", "lag", "pending", "waiting", "members", "redelivered", "dead"],
                groups.map { group in
                    [
                        group.name, "\(group.cursor)", "\(group.head)", "\(group.lag)", "\(group.pending)", "\(group.waiting)",
                        group.members.map { "\($0.name) (\($0.inFlight)/\($0.credit))" }.joined(separator: ", ").ifEmpty("none"),
                        "\(group.redeliveries)", "\(group.deadLetters.dead)",
                    ]
                }, empty: "No consumer groups.")
        }
    }
}

struct DeadLettersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dlq",
        abstract: "The dead letters waiting for an operator (replay or drop them with `switchboard dlq`).",
        discussion: "The failure message can quote the event; it is shown only with --show-personal-data.")

    @OptionGroup var options: GroupEndpointOptions
    @Option(help: "Only this group's.") var group: String?
    @Flag(name: .customLong("show-personal-data"), help: "Show each failure's message.") var showPersonalData = false

    func run() async throws {
        let (json, group, showMessage) = (options.json, group, showPersonalData)
        try await options.repeating { client in
            var page = try await client.deadLetterPage(group: group, newest: true, limit: 50)
            if !showMessage {
                page.deadLetters = page.deadLetters.map {
                    var letter = $0; letter.message = "[personal]"; return letter
                }
            }
            page.next = nil
            if json { return String(decoding: try JSONEncoder.sorted.encode(page), as: UTF8.self) }
            let letters = page.deadLetters
            let more =
                page.total > letters.count
                ? "\(page.total) waiting; the newest \(letters.count) shown (switchboard dlq list --all lists every one)\n" : ""
            return more
                + Table.render(
                    ["group", "bus_seq", "type", "attempts", "code", "at"] + (showMessage ? ["message"] : []),
                    letters.map { letter in
                        [letter.group, "\(letter.busSeq)", letter.type, "\(letter.attempts)", letter.code, letter.at]
                            + (showMessage ? [String(letter.message.prefix(80))] : [])
                    }, empty: "No dead letters.")
        }
    }
}

extension String {
    func ifEmpty(_ other: String) -> String { isEmpty ? other : self }
}

extension JSONEncoder {
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
