// What the dashboard shows, gathered from the bus: event counts by type (from the fan-out),
// the broker's groups, dead letters and producers (groups endpoint, every second), services and
// workers (MMI), and recent problems (`security.refused` and `dlq.*` events). Only names of
// types, groups, services and producers, counts and times: never an event's content, so the
// page and its stream carry nothing personal.

import Foundation
import SwitchboardBus
import SwitchboardProtocol
import Synchronization

final class DashboardState: Sendable {
    /// Dead letters the panel lists: the newest, beside the counts of all.
    static let deadLetterRows = 20

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
    }

    private let state = Mutex(Counts())

    /// An event seen on the fan-out (or fetched to fill a gap).
    func record(_ event: FollowedEvent) {
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

    func head(_ head: Int64) { state.withLock { $0.head = max($0.head, head) } }

    /// The broker's tables, read every second; `error` when it did not answer.
    func broker(
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

    /// Called once a second: closes a second of the rate history.
    func tick() {
        state.withLock { state in
            state.history.append(state.totals)
            if state.history.count > 11 { state.history.removeFirst() }
            state.updated = Timestamp.now()
        }
    }

    /// The snapshot the page renders, as JSON.
    func snapshot() -> Data {
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
                ])
            }
            var kioskNames = Set(state.lastCheckIn.keys)
            for producer in state.producers { kioskNames.insert(producer.name) }
            let byName = Dictionary(state.producers.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            let kiosks: [JSONValue] = kioskNames.sorted().map { name in
                var fields: [String: JSONValue] = ["name": .string(name)]
                if let checkIn = state.lastCheckIn[name] { fields["last_checkin"] = .string(checkIn) }
                if let producer = byName[name] {
                    fields["last_seen"] = .string(producer.lastSeen)
                    if let outbox = producer.outbox { fields["outbox"] = .integer(outbox) }
                    if let at = producer.lastAck { fields["last_ack"] = .string(at) }
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
                .object(["at": .string(problem.at), "kind": .string(problem.kind), "text": .string(problem.text)])
            }
            var object: [String: JSONValue] = [
                "updated": .string(state.updated), "head": .integer(state.head), "rates": .array(rates), "groups": .array(groups),
                "dead_letters": .array(letters), "dead_letter_total": .integer(Int64(state.deadLetters.total)),
                "dead_letters_by_code": .object(state.deadLetters.byCode.mapValues { .integer(Int64($0)) }), "kiosks": .array(kiosks),
                "services": .array(services), "problems": .array(problems),
            ]
            if let error = state.brokerError { object["broker_error"] = .string(error) }
            return .object(object)
        }
        return value.compactData
    }
}
