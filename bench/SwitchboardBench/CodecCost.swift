import Foundation
import SwitchboardProtocol

/// Per-event CPU cost of each step the broker's ingest takes, in microseconds (release build).
func codecCost(iterations: Int = 20_000) -> [(String, Double)] {
    let events = (0..<iterations).map { Sample.event(producer: "c", seq: Int64($0 + 1)) }
    var results: [(String, Double)] = []
    func time(_ name: String, _ body: ([Data]) throws -> Void) {
        let start = ContinuousClock.now
        for frames in events { try? body(frames) }
        let micros = Double(start.duration(to: .now).components.attoseconds) / 1e12 + Double(start.duration(to: .now).components.seconds) * 1e6
        results.append((name, micros / Double(iterations)))
    }
    time("Envelope.decode") { _ = try Envelope.decode($0) }
    time("decode EventHeader") { _ = try JSONDecoder().decode(EventHeader.self, from: $0[2]) }
    time("EventHeader.validate") { try JSONDecoder().decode(EventHeader.self, from: $0[2]).validate() }
    time("Payloads.validate (checkin)") { try Payloads.validate(schema: CheckIn.schema, type: CheckIn.type, content: $0[5]) }
    let header = try! JSONDecoder().decode(EventHeader.self, from: events[0][2])
    time("encode stored header") { _ in _ = try WireJSON.encode(header) }
    time("encode ACK") { _ in _ = try Envelope(command: .ack, header: AckHeader(eventID: header.eventID, producer: "c", producerSeq: 1, busSeq: 1, duplicate: false)).frames() }
    return results
}
