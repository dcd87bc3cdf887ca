import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
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
        try connection.bootstrapLogging()
        let settings = try connection.settings()
        let endpoints = JournalFollower.Endpoints(
            fanout: settings.endpoints.fanout, replay: settings.endpoints.replay, socketOptions: settings.socketOptions)
        let context = try Context()
        let io = try IOThread(context: context)
        let printer = EventPrinter(json: json, showingPersonalData: showPersonalData)
        let (topics, from, count) = (topics, from, count)
        if !json {
            let what = topics.isEmpty ? "all events" : "events of " + topics.joined(separator: ", ")
            printer.notice("watching \(what) on \(endpoints.fanout)\(from.map { ", replaying from #\($0)" } ?? "")")
        }
        if stats {
            _ = try await untilInterrupted {
                try await RateBoard.run(follower: JournalFollower(io: io, endpoints: endpoints, topics: topics, from: from), count: count)
            }
            await io.shutdown()
            await context.terminate()
            return
        }
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
                        "connected to broker \(broker), journal head #\(head)", kind: "welcome", fields: ["broker": broker, "head": head])
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
        await io.shutdown()
        await context.terminate()
    }
}

/// Writes events and notices, one line each.
struct EventPrinter: Sendable {
    let json: Bool
    let showingPersonalData: Bool

    func event(_ event: FollowedEvent) {
        let h = event.header
        if json {
            var object: [String: Any] = [
                "bus_seq": event.busSeq, "event_id": h.eventID, "type": h.type, "producer": h.producer,
                "producer_seq": h.producerSeq, "time": h.time, "schema": h.schema,
                "source": event.fromJournal ? "journal" : "live",
                "content": Redaction.redactedJSON(event.content, showingPersonalData: showingPersonalData),
            ]
            if let summary = Payloads.summary(schema: h.schema, content: event.content, showingPersonalData: showingPersonalData) {
                object["summary"] = summary
            }
            write(object, to: .standardOutput)
        } else {
            let summary =
                Payloads.summary(schema: h.schema, content: event.content, showingPersonalData: showingPersonalData)
                ?? compact(event.content)
            let source = event.fromJournal ? " (journal)" : ""
            line("#\(event.busSeq)  \(h.type)  \(h.producer)  made \(Self.madeAt(h.time))  \(summary)\(source)")
        }
    }

    /// The event's own `time`, labelled as such. Lines come in journal order (`#bus_seq`, first
    /// on the line), but `time` is each producer's clock when it made the event: a kiosk that
    /// was offline, a resent event or a clock that is off makes it go backwards from one line to
    /// the next. The header carries no journaling time, so the monitor shows the producer's,
    /// named `made`, after the sequence number that orders the lines. The date is left out only
    /// when it is today's (UTC), as on a live screen.
    static func madeAt(_ time: String, today: String = String(Timestamp.now().prefix(10))) -> String {
        guard time.count >= 23, time.dropFirst(10).first == "T" else { return time }
        let clock = String(time.dropFirst(11).prefix(12))
        return time.hasPrefix(today) ? clock : "\(time.prefix(10)) \(clock)"
    }

    func notice(_ text: String, kind: String = "info", fields: [String: any Sendable] = [:]) {
        if json {
            var object: [String: Any] = ["notice": kind, "message": text]
            for (key, value) in fields { object[key] = value }
            write(object, to: .standardError)
        } else {
            line("-- \(text)")
        }
    }

    /// Unbuffered, so a pipe reader (a test, `tail`) sees each line at once.
    private func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// The whole content, redacted, as one JSON object whose identifiers come first (`event_id`,
    /// `record_id` and every other `…_id`, then `bus_seq`), then the rest by name. Nothing is
    /// cut short of `limit` characters, and the fields an operator looks for come first, so they
    /// show even then: a monitor line is where an operator finds the record an event was written
    /// to (`filemaker.record.written`). A narrow terminal wraps the line rather than losing them.
    private func compact(_ content: Data, limit: Int = 2000) -> String {
        let value = Redaction.redactedJSON(content, showingPersonalData: showingPersonalData)
        let text: String
        if let object = value as? [String: Any] {
            func rank(_ key: String) -> Int { key == "id" || key.hasSuffix("_id") ? 0 : key == "bus_seq" ? 1 : 2 }
            let keys = object.keys.sorted { (rank($0), $0) < (rank($1), $1) }
            let fields = keys.map { key in Self.json(key) + ":" + Self.json(object[key] ?? NSNull()) }
            text = "{" + fields.joined(separator: ",") + "}"
        } else {
            text = Self.json(value)
        }
        return text.count > limit ? String(text.prefix(limit - 1)) + "… (--json shows all)" : text
    }

    private static func json(_ value: Any) -> String {
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        else { return "\(value)" }
        return String(decoding: data, as: UTF8.self)
    }

    private func write(_ object: [String: Any], to handle: FileHandle) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return
        }
        handle.write(data + Data("\n".utf8))
    }
}
