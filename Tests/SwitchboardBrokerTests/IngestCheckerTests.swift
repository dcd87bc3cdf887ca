import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

@Suite("Ingest checks on their own thread")
struct IngestCheckerTests {
    /// What an item says, comparable: its kind, its sender, and its event id or error code.
    static func summary(_ item: IngestItem) -> String {
        switch item {
        case .event(let identity, let event):
            "event \(String(decoding: identity, as: UTF8.self)) \(event.header.eventID) \(event.header.producerSeq)"
        case .heartbeat(let identity, let report, _, _): "heartbeat \(String(decoding: identity, as: UTF8.self)) \(report.producer ?? "-")"
        case .refused(let identity, let error, let command, let ref):
            "refused \(String(decoding: identity, as: UTF8.self)) \(error.code.rawValue) \(command ?? "-") \(ref ?? "-") \(error.message)"
        }
    }

    @Test(
        "every envelope vector and good events, in batches on the checker's thread, come back in order as the broker thread's own check makes them"
    )
    func sameAnswersInOrder() throws {
        var messages: [Message] = []
        for (index, vector) in try Vectors.envelopes().enumerated() {
            messages.append(Message(frames: [Data("v\(index)".utf8)] + vector.frames))
            let (_, frames) = try Events.frames(seq: Int64(index + 1))
            messages.append(Message(frames: [Data("good".utf8)] + frames))
        }
        // A routing frame alone, and a message with no frame at all (nothing to answer).
        messages.append(Message(frames: [Data("alone".utf8)]))
        messages.append(Message(frames: []))
        let check = IngestCheck(minimumVersion: .current, security: nil)
        let items = messages.compactMap { check($0, receivedAt: 1) }
        #expect(items.count == messages.count - 1)
        #expect(items.map(Self.summary).filter { $0.hasPrefix("event good") }.count == messages.count / 2 - 1)
        #expect(items.map(Self.summary).contains { $0.hasPrefix("refused") })

        let checker = IngestChecker(check: check)
        var got: [String] = []
        var expected: [String] = []
        var start = 0
        for size in [1, 7, 64, 3] + Array(repeating: 50, count: messages.count / 50 + 1) where start < messages.count {
            let batch = Array(messages[start..<min(start + size, messages.count)])
            start += batch.count
            checker.submit(batch, receivedAt: 1)
            // Each batch as the broker thread commits it: its other messages in order, then its
            // events in order, each with its sender.
            got += Self.summaries(checker.collect())
            expected += Self.summaries(CheckedBatch(batch.compactMap { check($0, receivedAt: 1) }))
        }
        checker.stop()
        #expect(start == messages.count)
        #expect(got == expected)
        #expect(expected.count == items.count)
    }

    static func summaries(_ batch: CheckedBatch) -> [String] {
        batch.others.map(summary) + zip(batch.senders, batch.events).map { summary(.event(identity: $0, $1)) }
    }
}

@Suite("ACKS of one commit")
struct BatchedAcksTests {
    @Test("one ACKS per connection and producer, in the order sent, and a new one after every 4096 events")
    func splitAtTheLimit() {
        var batched = BrokerCore.BatchedAcks()
        let a = Data("a".utf8)
        let b = Data("b".utf8)
        func header(_ producer: String, _ seq: Int64) -> EventHeader {
            EventHeader(
                eventID: UUIDv7.string(), type: CheckIn.type, producer: producer, producerSeq: seq, schema: CheckIn.schema, session: "s")
        }
        for seq in Int64(1)...5000 {
            batched.add(a, header("kiosk-1", seq), busSeq: seq * 2, duplicate: false)
            if seq <= 3 { batched.add(b, header("kiosk-2", seq), busSeq: seq * 2 + 1, duplicate: seq == 2) }
        }
        batched.add(a, header("kiosk-3", 1), busSeq: 20_001, duplicate: false)
        let shapes = batched.all.map { ($0.identity, $0.acks.producer, $0.acks.entries.count) }
        #expect(shapes.map(\.0) == [a, b, a, a])
        #expect(shapes.map(\.1) == ["kiosk-1", "kiosk-2", "kiosk-1", "kiosk-3"])
        #expect(shapes.map(\.2) == [4096, 3, 904, 1])
        let kiosk1 = batched.all.filter { $0.acks.producer == "kiosk-1" }.flatMap(\.acks.entries)
        #expect(kiosk1.map(\.producerSeq) == Array(1...5000))
        #expect(batched.all[1].acks.entries.map(\.duplicate) == [false, true, false])
    }
}
