import Foundation
import SwitchboardProtocol

/// Per-event CPU cost of each step the broker's ingest takes, in microseconds (release build).
func codecCost(iterations: Int = 20_000) -> [(String, Double)] {
    let events = (0..<iterations).map { Sample.event(producer: "c", seq: Int64($0 + 1)) }
    var results: [(String, Double)] = []
    func time(_ name: String, _ body: ([Data]) throws -> Void) {
        let start = ContinuousClock.now
        for frames in events { try? body(frames) }
        let micros =
            Double(start.duration(to: .now).components.attoseconds) / 1e12 + Double(start.duration(to: .now).components.seconds) * 1e6
        results.append((name, micros / Double(iterations)))
    }
    time("JSONValue.parse header") { _ = JSONValue.parse($0[2]) }
    time("JSONValue.parse content") { _ = JSONValue.parse($0[5]) }
    time("Envelope.parse (all checks, JSON parsed)") { _ = try Envelope.parse($0) }
    let parsed = events.map { try! Envelope.parse($0) }
    var index = 0
    time("EventHeader(wire:)") { _ in
        _ = try EventHeader(wire: parsed[index % parsed.count].header)
        index += 1
    }
    let header = try! EventHeader(wire: parsed[0].header)
    time("EventHeader.validate") { _ in try header.validate() }
    time("CheckIn(wire:) + validate") { _ in try CheckIn(wire: parsed[0].content).validate() }
    time("checkedEvent (header + payload)") { _ in _ = try parsed[0].checkedEvent() }
    time("EventHeader.wireJSON") { _ in _ = header.wireJSON() }
    time("AckHeader.wireJSON") { _ in
        _ = AckHeader(eventID: header.eventID, producer: "c", producerSeq: 1, busSeq: 1, duplicate: false).wireJSON()
    }
    return results
}
