// What `switchboard-monitor watch` prints: one line per event or notice, as text or as one JSON
// object. Secrets never show; personal data only when the operator asks (see Redaction). The
// lines are built by functions tests call directly; `event` and `notice` only write them.

import Foundation
public import SwitchboardBus
public import SwitchboardProtocol

/// Writes events and notices, one line each.
public struct EventPrinter: Sendable {
    public let json: Bool
    public let showingPersonalData: Bool

    public init(json: Bool, showingPersonalData: Bool) {
        self.json = json
        self.showingPersonalData = showingPersonalData
    }

    /// Prints the event's line on standard output.
    public func event(_ event: FollowedEvent) {
        Self.write(line(for: event), to: .standardOutput)
    }

    /// Prints a notice: with `json`, as an object on standard error (standard output carries
    /// only events then); else as a `-- ` line on standard output.
    public func notice(_ text: String, kind: String = "info", fields: [String: any Sendable] = [:]) {
        Self.write(noticeLine(text, kind: kind, fields: fields), to: json ? .standardError : .standardOutput)
    }

    /// The event's line, without the newline: `today` (`YYYY-MM-DD`, UTC) is left out of times.
    public func line(for event: FollowedEvent, today: String = String(Timestamp.now().prefix(10))) -> String {
        let h = event.header
        let summary = Payloads.summary(schema: h.schema, content: event.content, showingPersonalData: showingPersonalData)
        if json {
            var object: [String: Any] = [
                "bus_seq": event.busSeq, "event_id": h.eventID, "type": h.type, "producer": h.producer,
                "producer_seq": h.producerSeq, "time": h.time, "schema": h.schema,
                "source": event.fromJournal ? "journal" : "live",
                "content": Redaction.redactedJSON(event.content, showingPersonalData: showingPersonalData),
            ]
            if let summary { object["summary"] = summary }
            return Self.object(object)
        }
        let source = event.fromJournal ? " (journal)" : ""
        return
            "#\(event.busSeq)  \(h.type)  \(h.producer)  made \(Self.madeAt(h.time, today: today))  \(summary ?? compact(event.content))\(source)"
    }

    /// A notice's line, without the newline.
    public func noticeLine(_ text: String, kind: String = "info", fields: [String: any Sendable] = [:]) -> String {
        guard json else { return "-- \(text)" }
        var object: [String: Any] = ["notice": kind, "message": text]
        for (key, value) in fields { object[key] = value }
        return Self.object(object)
    }

    /// The event's own `time`, labelled as such. Lines come in journal order (`#bus_seq`, first
    /// on the line), but `time` is each producer's clock when it made the event: a kiosk that
    /// was offline, a resent event or a clock that is off makes it go backwards from one line to
    /// the next. The header carries no journaling time, so the monitor shows the producer's,
    /// named `made`, after the sequence number that orders the lines. The date is left out only
    /// when it is today's (UTC), as on a live screen.
    public static func madeAt(_ time: String, today: String = String(Timestamp.now().prefix(10))) -> String {
        guard time.count >= 23, time.dropFirst(10).first == "T" else { return time }
        let clock = String(time.dropFirst(11).prefix(12))
        return time.hasPrefix(today) ? clock : "\(time.prefix(10)) \(clock)"
    }

    /// The whole content, redacted, as one JSON object whose identifiers come first (`event_id`,
    /// `record_id` and every other `…_id`, then `bus_seq`), then the rest by name. Nothing is
    /// cut short of `limit` characters, and the fields an operator looks for come first, so they
    /// show even then: a monitor line is where an operator finds the record an event was written
    /// to (`filemaker.record.written`). A narrow terminal wraps the line rather than losing them.
    func compact(_ content: Data, limit: Int = 2000) -> String {
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

    private static func object(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Unbuffered, so a pipe reader (a test, `tail`) sees each line at once.
    private static func write(_ line: String, to handle: FileHandle) {
        handle.write(Data((line + "\n").utf8))
    }
}
