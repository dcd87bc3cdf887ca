// What an operator works from besides the event stream: event rates by type and producer
// (`--stats`), each consumer group's lag (`lag`) and the dead letters (`dlq`). Counts, names of
// groups, types and producers only: no event content, so nothing personal.

import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import Synchronization
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
        try connection.bootstrapLogging()
        let settings = try connection.settings()
        let endpoint = settings.endpoints.groups
        let options = settings.socketOptions
        let context = try Context()
        let io = try IOThread(context: context)
        let client = GroupAdminClient(io: io, endpoint: endpoint, settings: .init(socketOptions: options))
        do {
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
        } catch {
            await io.shutdown()
            await context.terminate()
            throw error
        }
        await io.shutdown()
        await context.terminate()
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

/// Events per second by type and producer over the last 10 seconds, and totals since start.
enum RateBoard {
    struct Key: Hashable, Comparable {
        var type: String
        var producer: String
        static func < (a: Key, b: Key) -> Bool { (a.type, a.producer) < (b.type, b.producer) }
    }

    /// The counts so far, shared by the follower and the renderer.
    final class Totals: Sendable {
        let counts = Mutex<[Key: Int]>([:])
    }

    static func run(follower: JournalFollower, count: Int?) async throws {
        let totals = Totals()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // The totals of the last 10 seconds, one per second: a rate is the difference.
                var history: [[Key: Int]] = []
                while true {
                    try await Task.sleep(for: .seconds(1))
                    let now = totals.counts.withLock { $0 }
                    history.append(now)
                    if history.count > 11 { history.removeFirst() }
                    let then = history.first ?? [:]
                    let seconds = max(1, history.count - 1)
                    let rows = now.keys.sorted().map { key -> [String] in
                        let rate = Double((now[key] ?? 0) - (then[key] ?? 0)) / Double(seconds)
                        return [key.type, key.producer, String(format: "%.1f", rate), "\(now[key] ?? 0)"]
                    }
                    let table = Table.render(["type", "producer", "per second", "total"], rows, empty: "No events yet.")
                    Table.emit("\(Timestamp.now())  events per second over the last \(seconds) s\n" + table, clearing: true)
                }
            }
            var seen = 0
            while count.map({ seen < $0 }) ?? true {
                if case .event(let event) = try await follower.next() {
                    totals.counts.withLock { $0[Key(type: event.header.type, producer: event.header.producer), default: 0] += 1 }
                    seen += 1
                }
            }
            await follower.close()
            group.cancelAll()
            // The last word: the totals the stream ended with.
            let final = totals.counts.withLock { $0 }
            let rows = final.keys.sorted().map { [$0.type, $0.producer, "\(final[$0] ?? 0)"] }
            Table.emit(
                "\(Timestamp.now())  totals\n" + Table.render(["type", "producer", "total"], rows, empty: "No events."), clearing: false)
        }
    }
}

enum Table {
    /// Writes at once (a pipe reader sees it); on a terminal, `clearing` redraws in place.
    static func emit(_ text: String, clearing: Bool) {
        let clear = clearing && isatty(STDOUT_FILENO) == 1 ? "\u{1B}[H\u{1B}[2J" : ""
        FileHandle.standardOutput.write(Data((clear + text + (text.hasSuffix("\n") ? "" : "\n")).utf8))
    }

    /// Left-aligned columns, two spaces apart.
    static func render(_ header: [String], _ rows: [[String]], empty: String) -> String {
        guard !rows.isEmpty else { return empty + "\n" }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces)
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n") + "\n"
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
