import Foundation
import SwitchboardBroker
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("Outbox and sender")
struct OutboxTests {
    @Test("an outbox keeps entries across reopening, numbers them without reuse, and is private to its producer")
    func persistence() async throws {
        let directory = try TemporaryDirectory("outbox")
        defer { directory.remove() }
        let path = directory.path("k/outbox.sqlite")
        var outbox = try Outbox(path: path, producer: "kiosk-1")
        let first = try await outbox.enqueue([.init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn())])
        #expect(first[0].producerSeq == 1)
        try await outbox.acknowledge([1])
        outbox = try Outbox(path: path, producer: "kiosk-1")
        let second = try await outbox.enqueue([.init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn())])
        #expect(second[0].producerSeq == 2, "a delivered sequence number is never reused")
        let counts = try await outbox.counts()
        #expect(counts.pending == 1 && counts.rejected == 0 && counts.delivered == 1)
        let header = try JSONDecoder().decode(EventHeader.self, from: second[0].header)
        #expect(header.producer == "kiosk-1")
        #expect(header.busSeq == nil)
        try header.validate()

        #expect(throws: Outbox.Failure.self) { try Outbox(path: path, producer: "kiosk-2") }
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let directoryMode = try FileManager.default.attributesOfItem(atPath: directory.path("k"))[.posixPermissions] as? Int
        #expect(directoryMode == 0o700)
    }

    @Test("200 concurrent shared enqueues: each on disk when it returns, numbered 1–200 without a gap, with its own event id")
    func sharedEnqueues() async throws {
        let directory = try TemporaryDirectory("outbox-shared")
        defer { directory.remove() }
        let path = directory.path("w/outbox.sqlite")
        let outbox = try Outbox(path: path, producer: "filemaker-worker-1")
        let entries = try await withThrowingTaskGroup(of: OutboxEntry.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let content = Data(#"{"n":\#(index)}"#.utf8)
                    let entry = try await outbox.enqueue(
                        shared: .init(type: "filemaker.record.written", schema: "test/1", content: content))
                    #expect(entry.content == content)
                    return entry
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(entries.map(\.producerSeq).sorted() == Array(1...200))
        #expect(Set(entries.map(\.eventID)).count == 200)
        // Reopened, as after a crash: all 200 are there, in the order they were numbered.
        let reopened = try Outbox(path: path, producer: "filemaker-worker-1")
        let pending = try await reopened.pending(limit: 1000)
        #expect(pending.map(\.producerSeq) == Array(1...200))
        #expect(
            Dictionary(uniqueKeysWithValues: pending.map { ($0.producerSeq, $0.content) })
                == Dictionary(uniqueKeysWithValues: entries.map { ($0.producerSeq, $0.content) }))
        // And one more after the burst still works (the commit loop ended and starts again).
        let last = try await reopened.enqueue(shared: .init(type: "filemaker.record.written", schema: "test/1", content: Data("{}".utf8)))
        #expect(last.producerSeq == 201)
    }

    @Test("an import is all-or-nothing and the same file is not imported twice")
    func importOnce() async throws {
        let directory = try TemporaryDirectory("outbox")
        defer { directory.remove() }
        let outbox = try Outbox(path: directory.path("outbox.sqlite"), producer: "kiosk-1")
        let events = (0..<3).map { Outbox.NewEvent(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) }
        try await outbox.enqueue(events, importDigest: ("abc", "day.csv"))
        await #expect(throws: Outbox.Failure.self) { try await outbox.enqueue(events, importDigest: ("abc", "day.csv")) }
        #expect(try await outbox.counts().pending == 3)
    }

    @Test("with the broker down, check-ins wait in the outbox; when it is back, they are delivered once")
    func brokerOutage() async throws {
        let directory = try TemporaryDirectory("outage")
        // A fixed port below the ephemeral range: the broker comes back on it (a port picked
        // for `*` may be another test's outgoing connection by then).
        let port = try freePort()
        var fixture = try await BrokerFixture.start(directory: directory) { $0.ingestEndpoint = "tcp://127.0.0.1:\(port)" }
        let ingest = fixture.endpoints.ingest
        let outbox = try fixture.outbox("kiosk-9")
        await fixture.broker.stop()
        // Held while the broker is down (connections are refused, as by no broker at all), so
        // no other test's server takes it meanwhile (one did: "Address already in use").
        let held = try RefusingPort(port: port)
        try await outbox.enqueue((0..<100).map { .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) })
        // Long enough for two rounds of resends into the dead connection; the rules for when
        // they fall due are OutboxDeliveryTests'.
        let down = try await fixture.sender(outbox, resendAfter: .milliseconds(100)).deliver(until: .now + .milliseconds(300))
        #expect(down.pending == 100)
        #expect(down.brokerAnswered == false)
        #expect(down.delivered == 0)
        await fixture.stop(remove: false)

        // The same endpoint again (the port the first broker had).
        held.release()
        fixture = try await BrokerFixture.start(directory: directory) { $0.ingestEndpoint = ingest }
        let up = try await fixture.sender(outbox).deliver(until: .now + .seconds(30))
        #expect(up.pending == 0)
        #expect(up.delivered == 100)
        #expect(try fixture.journalRows().count == 100)
        await fixture.stop()
    }

    @Test("events journaled before their ACKs were lost are ACKed as duplicates and leave the outbox; the journal keeps one copy")
    func brokerDeduplicates() async throws {
        let fixture = try await BrokerFixture.start()
        let outbox = try fixture.outbox("kiosk-d")
        let entries = try await outbox.enqueue(
            (0..<3).map { .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) })
        // An earlier run sent #1 and #2 and ended before their ACKs came back.
        let earlier = try await fixture.producer()
        for entry in entries.prefix(2) {
            let frames = [
                Envelope.versionFrame(), Data("EVENT".utf8), entry.header, Envelope.emptyObject, Envelope.emptyObject, entry.content,
            ]
            #expect(try await Events.exchange(earlier, frames).command == .ack)
        }
        await earlier.close()

        let report = try await fixture.sender(outbox).deliver(until: .now + .seconds(10))
        #expect(report.duplicates == 2)
        #expect(report.delivered == 1)
        #expect(report.pending == 0)
        #expect(report.lastBusSeq == 3)
        let rows = try fixture.journalRows()
        #expect(rows.map(\.producerSeq) == [1, 2, 3])
        #expect(rows.map(\.eventID) == entries.map(\.eventID))
        await fixture.stop()
    }

    @Test(
        "an outbox put back from a backup: what it still held is ACKed as a duplicate, and what is recorded after the restore is numbered again above the journal's head and journaled once"
    )
    func restoredBackup() async throws {
        let fixture = try await BrokerFixture.start()
        let live = fixture.directory.path("kiosk-b/outbox.sqlite")
        let outbox = try Outbox(path: live, producer: "kiosk-b")
        let checkIn = { (index: Int) in Outbox.NewEvent(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: index)) }
        let saved = try await outbox.enqueue([checkIn(0), checkIn(1)])
        // The operator's copy of the kiosk's files, with nothing being written to them.
        let backup = fixture.directory.path("backup")
        try FileManager.default.createDirectory(atPath: backup, withIntermediateDirectories: true)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: live + suffix) {
            try FileManager.default.copyItem(atPath: live + suffix, toPath: backup + "/outbox.sqlite" + suffix)
        }
        try await outbox.enqueue([checkIn(2), checkIn(3), checkIn(4)])
        #expect(try await fixture.sender(outbox).deliver(until: .now + .seconds(60)).delivered == 5)

        // The backup put back: its two entries again, its counter at 3 (3, 4 and 5 are journaled).
        let restored = try Outbox(path: backup + "/outbox.sqlite", producer: "kiosk-b")
        let after = try await restored.enqueue([checkIn(5), checkIn(6)])
        #expect(after.map(\.producerSeq) == [3, 4])
        let report = try await fixture.sender(restored).deliver(until: .now + .seconds(60))
        #expect(report.duplicates == 2)
        #expect(report.delivered == 2)
        #expect(report.renumbered == 2)
        #expect(report.rejected == 0)
        #expect(report.pending == 0)
        let rows = try fixture.journalRows()
        #expect(rows.count == 7)
        #expect(Set(rows.map(\.eventID)).count == 7, "each event once")
        #expect(rows.filter { $0.eventID == saved[0].eventID }.map(\.producerSeq) == [1])
        let renumbered = rows.filter { row in after.contains { $0.eventID == row.eventID } }.map(\.producerSeq).sorted()
        #expect(renumbered == [6, 7], "numbered past the journal's 5, with their own event ids")
        // The counter went past the journal's numbers: the next check-in is accepted at once.
        let next = try await restored.enqueue([checkIn(7)])
        #expect(next[0].producerSeq == 8)
        let last = try await fixture.sender(restored).deliver(until: .now + .seconds(60))
        #expect(last.delivered == 1 && last.renumbered == 0)
        // Numbering an entry that is gone, or already numbered again, does nothing.
        #expect(try await restored.renumber(3, eventID: after[0].eventID, above: 5) == nil)
        await fixture.stop()
    }

    @Test("an event the broker refuses for good is kept, marked, and not resent")
    func rejectedStays() async throws {
        let fixture = try await BrokerFixture.start()
        let outbox = try fixture.outbox("kiosk-r")
        // A check-in the broker's schema check refuses (site 0), slipped past the form.
        var bad = try JSONSerialization.jsonObject(with: Events.checkIn()) as! [String: Any]
        bad["site_id"] = 0
        try await outbox.enqueue([
            .init(type: CheckIn.type, schema: CheckIn.schema, content: try JSONSerialization.data(withJSONObject: bad)),
            .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn()),
        ])
        let report = try await fixture.sender(outbox).deliver(until: .now + .seconds(10))
        #expect(report.rejected == 1)
        #expect(report.delivered == 1)
        #expect(report.pending == 0)
        let rejected = try await outbox.rejected()
        #expect(rejected.count == 1)
        #expect(rejected[0].reason.contains("site_id"))
        await fixture.stop()
    }
}
