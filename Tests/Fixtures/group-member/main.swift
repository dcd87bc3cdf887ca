// A consumer-group member for the process tests (not shipped): joins a group through
// `GroupConsumer`, writes one JSON line per delivery it handled to --log (member, bus_seq,
// key, attempt, wall-clock start and end in nanoseconds, outcome), and acks. --hold keeps every
// delivery unsettled (a member that will be killed holding work); --poison-key nacks that key's
// events; --work-ms spends that long on each event. Runs until killed.

import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import ZeroMQ

func parse(_ list: [String]) -> [String: [String]] {
    var arguments = list[...]
    var options: [String: [String]] = [:]
    while let name = arguments.popFirst() {
        guard name.hasPrefix("--") else { fatalError("unexpected argument \(name)") }
        if name == "--hold" {
            options["hold", default: []].append("1")
        } else if let value = arguments.popFirst() {
            options[String(name.dropFirst(2)), default: []].append(value)
        }
    }
    return options
}
let options = parse(Array(CommandLine.arguments.dropFirst()))
func option(_ name: String) -> String? { options[name]?.last }
guard let endpoint = option("endpoint"), let logPath = option("log") else {
    fatalError(
        "usage: group-member --endpoint E --log FILE [--group G] [--topic P]… [--credit N] [--name N] [--work-ms N] [--hold] [--poison-key K]"
    )
}
let name = option("name") ?? "member-\(getpid())"
let hold = options["hold"] != nil
let poison = option("poison-key")
let work = Duration.milliseconds(Int(option("work-ms") ?? "0") ?? 0)
_ = FileManager.default.createFile(atPath: logPath, contents: nil)
let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
func nanos() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000_000_000) }

var logger = Logger(label: name)
logger.logLevel = .notice
let context = try Context()
let io = try IOThread(context: context)
let consumer = GroupConsumer(
    io: io, endpoint: endpoint,
    settings: .init(
        group: option("group") ?? "filemaker", topics: options["topic"] ?? ["checkin."], credit: Int(option("credit") ?? "8") ?? 8,
        member: name),
    logger: logger)

try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { try await consumer.run() }
    group.addTask {
        for await notice in consumer.notices { FileHandle.standardError.write(Data("\(name): \(notice)\n".utf8)) }
    }
    group.addTask {
        for await delivery in consumer.deliveries {
            let start = nanos()
            if work > .zero { try await Task.sleep(for: work) }
            let outcome = hold ? "held" : (delivery.header.key == poison ? "nack" : "ack")
            let line: [String: Any] = [
                "member": name, "bus_seq": delivery.busSeq, "key": delivery.header.key ?? "", "attempt": delivery.attempt,
                "start": start, "end": nanos(), "outcome": outcome, "event_id": delivery.header.eventID,
            ]
            log.write(try JSONSerialization.data(withJSONObject: line) + Data("\n".utf8))
            do {
                switch outcome {
                case "ack": try await delivery.ack()
                case "nack": try await delivery.nack(code: "poison", message: "this key always fails")
                default: break
                }
            } catch is GroupConsumer.ReplacedConnection {
                // Delivered on a connection since replaced: the broker delivers it again.
            }
        }
    }
    try await group.next()
}
