// What the dashboard shows, gathered from the bus: event counts by type (from the fan-out),
// the broker's groups, dead letters and producers (groups endpoint, every second), services and
// workers (MMI), and recent problems (`security.refused` and `dlq.*` events). Only names of
// types, groups, services and producers, counts and times: never an event's content, so the
// page and its stream carry nothing personal.

public import Foundation
public import SwitchboardBus
import SwitchboardObservability
public import SwitchboardProtocol
import Synchronization

public final class DashboardState: Sendable {
    /// Dead letters the panel lists: the newest, beside the counts of all.
    public static let deadLetterRows = 20

    struct Problem: Sendable {
        var at: String
        var kind: String
        var text: String
    }

    private struct Counts {
        var totals: [String: Int] = [:]
        /// The totals of the last 10 seconds, one a second: rates are differences.
        var history: [[String: Int]] = []
        var head: Int64 = 0
        var lastCheckIn: [String: String] = [:]
        var problems: [Problem] = []
        var groups: [GroupInfo] = []
        /// The newest dead letters waiting, with the counts of all of them.
        var deadLetters = DeadLetterPage(deadLetters: [], total: 0, byCode: [:])
        var producers: [ProducerInfo] = []
        var services: [ServiceDirectory.Service] = []
        var brokerError: String?
        var updated = ""
        /// Rate and lags every 10 s over the last hour, for the charts.
        var hour = DashboardHistory()
        /// The time of the last tick (Unix milliseconds): what "12 s ago" counts from.
        var now: Int64 = 0
    }

    private let state = Mutex(Counts())

    public init() {}

    /// An event seen on the fan-out (or fetched to fill a gap).
    public func record(_ event: FollowedEvent) {
        let header = event.header
        state.withLock { state in
            state.totals[header.type, default: 0] += 1
            state.head = max(state.head, event.busSeq)
            if header.type.hasPrefix("checkin.") { state.lastCheckIn[header.producer] = header.time }
            if header.type == "security.refused", case .object(let fields)? = JSONValue.parse(event.content) {
                func text(_ key: String) -> String? { if case .string(let value)? = fields[key] { value } else { nil } }
                let who = text("principal").map { " \($0)" } ?? ""
                state.problems.append(
                    Problem(
                        at: header.time, kind: "refused: \(text("kind") ?? "?")",
                        text: "\(who) \(text("reason") ?? "")".trimmingCharacters(in: .whitespaces)))
            } else if header.type.hasPrefix("dlq."), case .object(let fields)? = JSONValue.parse(event.content) {
                // The code and the attempts only: the failure message can quote the event.
                var code = "?"
                if case .string(let value)? = fields["code"] { code = value }
                var attempts: Int64 = 0
                if case .integer(let value)? = fields["attempts"] { attempts = value }
                var busSeq: Int64 = 0
                if case .integer(let value)? = fields["bus_seq"] { busSeq = value }
                state.problems.append(
                    Problem(
                        at: header.time, kind: "dead letter",
                        text: "group \(header.type.dropFirst(4)): #\(busSeq) after \(attempts) attempt\(attempts == 1 ? "" : "s"), \(code)")
                )
            }
            if state.problems.count > 20 { state.problems.removeFirst(state.problems.count - 20) }
        }
    }

    public func head(_ head: Int64) { state.withLock { $0.head = max($0.head, head) } }

    /// The broker's tables, read every second; `error` when it did not answer.
    public func broker(
        groups: [GroupInfo]?, deadLetters: DeadLetterPage?, producers: [ProducerInfo]?, services: [ServiceDirectory.Service]?,
        error: String?
    ) {
        state.withLock { state in
            if let groups { state.groups = groups }
            if let deadLetters { state.deadLetters = deadLetters }
            if let producers { state.producers = producers }
            if let services { state.services = services }
            state.brokerError = error
            if let head = groups?.map(\.head).max() { state.head = max(state.head, head) }
        }
    }

    /// Called once a second: closes a second of the rate history, and every 10 s takes a sample
    /// for the hour's charts (`now`: Unix milliseconds).
    public func tick(now: Int64 = Int64((Date().timeIntervalSince1970 * 1000).rounded())) {
        state.withLock { state in
            state.history.append(state.totals)
            if state.history.count > 11 { state.history.removeFirst() }
            state.updated = Timestamp.format(milliseconds: now)
            state.now = now
            state.hour.offer(
                at: now, totalEvents: state.totals.values.reduce(0, +),
                lag: Dictionary(state.groups.map { ($0.name, $0.lag) }, uniquingKeysWith: { a, _ in a }))
        }
    }

    /// The snapshot the page renders, as JSON.
    public func snapshot() -> Data {
        let value = state.withLock { state -> JSONValue in
            let then = state.history.first ?? [:]
            let seconds = max(1, state.history.count - 1)
            let rates: [JSONValue] = state.totals.keys.sorted().map { type in
                let rate = Double((state.totals[type] ?? 0) - (then[type] ?? 0)) / Double(seconds)
                return .object(["type": .string(type), "per_second": .double(rate), "total": .integer(Int64(state.totals[type] ?? 0))])
            }
            let groups: [JSONValue] = state.groups.map { group in
                .object([
                    "name": .string(group.name), "cursor": .integer(group.cursor), "lag": .integer(group.lag),
                    "pending": .integer(Int64(group.pending)), "members": .integer(Int64(group.members.count)),
                    "redeliveries": .integer(Int64(group.redeliveries)), "dead": .integer(Int64(group.deadLetters.dead)),
                ])
            }
            let letters: [JSONValue] = state.deadLetters.deadLetters.map { letter in
                .object([
                    "group": .string(letter.group), "bus_seq": .integer(letter.busSeq), "type": .string(letter.type),
                    "attempts": .integer(Int64(letter.attempts)), "code": .string(letter.code), "at": .string(letter.at),
                    "at_ago": .string(TimeAgo.text(letter.at, now: state.now) ?? letter.at),
                ])
            }
            var kioskNames = Set(state.lastCheckIn.keys)
            for producer in state.producers { kioskNames.insert(producer.name) }
            let byName = Dictionary(state.producers.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let kiosks: [JSONValue] = kioskNames.sorted().map { name in
                var fields: [String: JSONValue] = ["name": .string(name)]
                func time(_ key: String, _ value: String?) {
                    guard let value else { return }
                    fields[key] = .string(value)
                    if let ago = TimeAgo.text(value, now: state.now) { fields[key + "_ago"] = .string(ago) }
                }
                // A kiosk's last check-in, from the fan-out; a producer this dashboard has seen no
                // check-in from since it started (it started after them) shows the broker's time
                // of its last journaled event instead, which the broker keeps for every producer.
                time("last_checkin", state.lastCheckIn[name])
                time("last_event", byName[name]?.lastEvent)
                if let producer = byName[name] {
                    time("last_seen", producer.lastSeen)
                    if let outbox = producer.outbox { fields["outbox"] = .integer(outbox) }
                    time("last_ack", producer.lastAck)
                }
                return .object(fields)
            }
            let services: [JSONValue] = state.services.map { service in
                .object([
                    "name": .string(service.name), "workers": .integer(Int64(service.workers)), "busy": .integer(Int64(service.busy)),
                    "queued": .integer(Int64(service.queued)),
                ])
            }
            let problems: [JSONValue] = state.problems.reversed().map { problem in
                .object([
                    "at": .string(problem.at), "at_ago": .string(TimeAgo.text(problem.at, now: state.now) ?? problem.at),
                    "kind": .string(problem.kind), "text": .string(problem.text),
                ])
            }
            var object: [String: JSONValue] = [
                "updated": .string(state.updated), "head": .integer(state.head), "rates": .array(rates), "groups": .array(groups),
                "dead_letters": .array(letters), "dead_letter_total": .integer(Int64(state.deadLetters.total)),
                "dead_letters_by_code": .object(state.deadLetters.byCode.mapValues { .integer(Int64($0)) }), "kiosks": .array(kiosks),
                "services": .array(services), "problems": .array(problems), "charts": state.hour.charts(),
            ]
            if let error = state.brokerError { object["broker_error"] = .string(error) }
            return .object(object)
        }
        return value.compactData
    }
}
