import Foundation
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// What producers report in HEARTBEAT (protocol section 6) and what `producers.list` shows.
@Suite("Producer health: HEARTBEAT reports and producers.list")
struct ProducerHealthTests {
    static func heartbeat(_ fields: String) -> [Data] {
        [
            Envelope.versionFrame(), Data("HEARTBEAT".utf8), Data(fields.utf8), Envelope.emptyObject, Envelope.emptyObject,
            Envelope.emptyObject,
        ]
    }

    @Test("a HEARTBEAT's outbox and last ACK, and a producer's last event, reach producers.list; {} still gets HEAD")
    func reports() async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        let admin = fixture.groupsClient()
        #expect(try await Events.exchange(producer, Self.heartbeat("{}")).command == .head)
        #expect(try await admin.producers().isEmpty, "an empty HEARTBEAT names no producer")

        let answer = try await Events.exchange(
            producer, Self.heartbeat(#"{"producer":"riverside-1","outbox":7,"last_ack":"2026-11-24T07:30:00.120Z"}"#))
        #expect(answer.command == .head)
        var listed = try await admin.producers()
        #expect(listed.count == 1)
        #expect(listed.first?.name == "riverside-1" && listed.first?.outbox == 7 && listed.first?.lastAck == "2026-11-24T07:30:00.120Z")
        #expect(listed.first?.lastEvent == nil)

        let (_, frames) = try Events.frames(producer: "riverside-1", seq: 1)
        #expect(try await Events.exchange(producer, frames).command == .ack)
        listed = try await admin.producers()
        #expect(listed.first?.lastEvent != nil, "\(listed)")
        #expect(listed.first?.outbox == 7, "an EVENT keeps the last reported depth")
        await producer.close()
        await fixture.stop()
    }

    @Test(
        "a HEARTBEAT with a bad field gets ERROR invalid-header naming it, and the broker serves on",
        arguments: [
            (#"{"producer":"riverside-1","outbox":-1}"#, "outbox"), (#"{"producer":"riverside-1","outbox":"3"}"#, "outbox"),
            (#"{"producer":"river side","outbox":1}"#, "producer"), (#"{"outbox":2}"#, "producer"),
            (#"{"producer":"riverside-1","last_ack":"yesterday"}"#, "last_ack"),
        ])
    func refused(_ header: String, _ field: String) async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        let answer = try await Events.exchange(producer, Self.heartbeat(header))
        #expect(answer.command == .error)
        let error = try answer.decodeHeader(ErrorHeader.self)
        #expect(error.code == .invalidHeader && error.message.contains("'\(field)'"), "\(error)")
        #expect(try await Events.exchange(producer, Self.heartbeat("{}")).command == .head)
        #expect(try await fixture.groupsClient().producers().isEmpty)
        await producer.close()
        await fixture.stop()
    }

    @Test("the table forgets the producer heard from longest ago when it is full")
    func bounded() {
        var table = ProducerTable()
        let start = Date(timeIntervalSince1970: 1_000_000)
        for index in 0..<ProducerTable.limit {
            table.heartbeat("p\(index)", outbox: 0, lastDelivery: nil, at: start.addingTimeInterval(Double(index)))
        }
        table.sawEvents("p0", at: start.addingTimeInterval(1e6))
        table.heartbeat("new", outbox: 1, lastDelivery: nil, at: start.addingTimeInterval(2e6))
        #expect(table.entries.count == ProducerTable.limit)
        #expect(table.entries["p1"] == nil, "p1 was heard from longest ago")
        #expect(table.entries["p0"] != nil && table.entries["new"]?.outbox == 1)
    }
}
