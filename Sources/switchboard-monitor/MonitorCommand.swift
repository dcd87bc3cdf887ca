import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardMonitor
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

@main
struct MonitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-monitor",
        abstract: "Watch the bus: events live or from the journal (watch, the default), rates (--stats), group lag, dead letters.",
        version: SwitchboardVersion.current,
        subcommands: [WatchCommand.self, LagCommand.self, DeadLettersCommand.self, WebCommand.self],
        defaultSubcommand: WatchCommand.self)
}

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Watch events on the bus: live, or from any point of the journal, with nothing missed.",
        discussion: """
            Gaps in the live stream (a slow or late subscriber, a reconnect) are detected from
            sequence numbers and HEAD heartbeats and filled from the journal; the monitor says so.
            Values of keys that look like secrets are never printed. Personal data (names, date
            of birth, location, notes) is shown as [personal] unless --show-personal-data.
            \(ProgramConfiguration.help(program: "monitor"))
            """)

    @Option(name: .customLong("topic"), help: "Follow event types starting with this prefix (repeatable; default: all).") var topics:
        [String] = []
    @Flag(help: "One JSON object per event (notices go to standard error).") var json = false
    @Flag(
        name: .customLong("show-personal-data"),
        help: "Print names, dates of birth, locations and notes (hidden by default: screens and logs get seen).")
    var showPersonalData = false
    @Flag(help: "Instead of each event: events per second by type and producer (last 10 s) and totals, refreshed every second.")
    var stats = false
    @Option(help: "Replay the journal from this bus sequence number, then follow live.") var from: Int64?
    @Option(help: "Exit after this many events.") var count: Int?
    @OptionGroup var connection: MonitorConnection

    func validate() throws {
        if let from, from < 1 { throw ValidationError("--from must be at least 1") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        for topic in topics where topic.isEmpty || topic.utf8.count > Topic.maximumLength {
            throw ValidationError("--topic must be 1–\(Topic.maximumLength) bytes")
        }
    }

    func run() async throws {
        let broker = try connection.load().connection
        let endpoints = JournalFollower.Endpoints(
            fanout: broker.endpoints.fanout, replay: broker.endpoints.replay, socketOptions: broker.socketOptions)
        let printer = EventPrinter(json: json, showingPersonalData: showPersonalData)
        let (topics, from, count) = (topics, from, count)
        if !json {
            let what = topics.isEmpty ? "all events" : "events of " + topics.joined(separator: ", ")
            printer.notice("watching \(what) on \(endpoints.fanout)\(from.map { ", replaying from #\($0)" } ?? "")")
        }
        if stats {
            try await IOThread.withIOThread { io in
                _ = try await untilInterrupted {
                    try await RateBoard.run(
                        follower: JournalFollower(io: io, endpoints: endpoints, topics: topics, from: from), count: count)
                }
            }
            return
        }
        try await IOThread.withIOThread { io in
            _ = try await untilInterrupted {
                let follower = JournalFollower(io: io, endpoints: endpoints, topics: topics, from: from)
                var seen = 0
                while count.map({ seen < $0 }) ?? true {
                    switch try await follower.next() {
                    case .event(let event):
                        printer.event(event)
                        seen += 1
                    case .gapFilled(let from, let to, let fetched):
                        printer.notice(
                            "gap: #\(from)…#\(to) missed live; \(fetched) event\(fetched == 1 ? "" : "s") fetched from the journal",
                            kind: "gap", fields: ["from": from, "to": to, "fetched": fetched])
                    case .pruned(let from, let to):
                        printer.notice(
                            "#\(from)…#\(to) are no longer in the journal (removed by retention)", kind: "pruned",
                            fields: ["from": from, "to": to])
                    case .welcome(let broker, let head):
                        printer.notice(
                            "connected to broker \(broker), journal head #\(head)", kind: "welcome",
                            fields: ["broker": broker, "head": head])
                    case .newJournal(let broker):
                        printer.notice(
                            "the broker now has a new journal (\(broker)); sequence numbers start over", kind: "new-journal",
                            fields: ["broker": broker])
                    case .replayUnavailable(let reason):
                        printer.notice("replay unavailable: \(reason); will retry", kind: "replay-unavailable", fields: ["reason": reason])
                    }
                }
                await follower.close()
            }
        }
    }
}
