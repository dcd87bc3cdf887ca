import Foundation
import SwitchboardBroker
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("Broker fan-out, replay and retention")
struct FanoutReplayTests {
    @Test("a subscriber gets the welcome, then each event under its type as topic, then HEAD")
    func fanout() async throws {
        let fixture = try await BrokerFixture.start()
        let subscriber = try await fixture.io.open(.subscriber, linger: 0) { [endpoints = fixture.endpoints] socket in
            try socket.set(.subscribe(Data("checkin.".utf8)))
            try socket.set(.subscribe(Data("$sys.".utf8)))
            try socket.connect(endpoints.fanout)
        }
        let welcomeMessage = try await subscriber.receive()
        #expect(welcomeMessage.frames.count == 1)
        let welcome = try Welcome.parse(welcomeMessage.frames[0])
        #expect(welcome.head == 0)
        #expect(welcome.version == "1.0")

        let producer = try await fixture.producer()
        let (header, frames) = try Events.frames(seq: 1)
        _ = try await Events.exchange(producer, frames)
        // Another type the subscriber did not ask for: it must not arrive.
        _ = try await Events.exchange(
            producer,
            try Events.frames(seq: 2, type: "shelter.bed.assigned", schema: "shelter.bed.assigned/1", content: Data(#"{"bed":"B-1"}"#.utf8))
                .1)

        var sawEvent = false
        var sawHeadAfter = false
        while !sawHeadAfter {
            let message = try await subscriber.receive()
            let topic = String(decoding: message.frames[0], as: UTF8.self)
            let envelope = try Envelope.decode(message.frames.dropFirst())
            switch envelope.command {
            case .event:
                #expect(topic == "checkin.recorded")
                let got = try envelope.decodeHeader(EventHeader.self)
                #expect(got.eventID == header.eventID)
                #expect(got.busSeq == 1)
                sawEvent = true
            case .head:
                #expect(topic == Topic.head)
                let head = try envelope.decodeHeader(HeadHeader.self)
                if head.head == 2 { sawHeadAfter = true }
                #expect(head.broker == welcome.broker)
            default:
                Issue.record("unexpected \(envelope.command)")
            }
        }
        #expect(sawEvent)
        await fixture.stop()
    }

    @Test("FETCH serves bounded batches in order, filters by topic, and says what is covered")
    func replay() async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        for seq in 1...30 {
            let odd = seq % 2 == 1
            let (_, frames) = try Events.frames(
                seq: Int64(seq), type: odd ? CheckIn.type : "person.updated", schema: odd ? CheckIn.schema : "person.updated/1",
                content: odd ? nil : Data(#"{"person":"x"}"#.utf8))
            _ = try await Events.exchange(producer, frames)
        }
        let client = try await fixture.replayClient()

        func fetch(_ header: FetchHeader) async throws -> (events: [EventHeader], end: EndHeader) {
            try await client.send(try Envelope(command: .fetch, header: header).frames())
            var events: [EventHeader] = []
            while true {
                let envelope = try Envelope.decode(try await client.receive().frames)
                if envelope.command == .end { return (events, try envelope.decodeHeader(EndHeader.self)) }
                #expect(envelope.command == .event)
                events.append(try envelope.decodeHeader(EventHeader.self))
            }
        }

        let firstBatch = try await fetch(FetchHeader(from: 1, limit: 10))
        #expect(firstBatch.events.map { $0.busSeq! } == Array(1...10))
        #expect(firstBatch.end.through == 10)
        #expect(firstBatch.end.more)
        #expect(firstBatch.end.head == 30)

        let rest = try await fetch(FetchHeader(from: 11, limit: 1000))
        #expect(rest.events.count == 20)
        #expect(rest.end.more == false)

        let checkins = try await fetch(FetchHeader(from: 1, to: 20, topics: ["checkin."], limit: 1000))
        #expect(checkins.events.allSatisfy { $0.type == CheckIn.type })
        #expect(checkins.events.count == 10)
        #expect(checkins.end.through == 20)
        #expect(checkins.end.more == false)

        let beyond = try await fetch(FetchHeader(from: 31, limit: 10))
        #expect(beyond.events.isEmpty)
        #expect(beyond.end.more == false)

        // A bad FETCH and a command the replay endpoint does not take: ERROR, and it keeps serving.
        let bad = try await Events.exchange(client, try Envelope(command: .fetch, header: FetchHeader(from: 5, to: 2)).frames())
        #expect(try bad.decodeHeader(ErrorHeader.self).code == .invalidHeader)
        let wrong = try await Events.exchange(client, try Events.frames(seq: 99).1)
        #expect(try wrong.decodeHeader(ErrorHeader.self).code == .unknownCommand)
        let huge = try await Events.exchange(
            client, try Envelope(command: .fetch, header: FetchHeader(from: Int64.max, limit: 10)).frames())
        #expect(try huge.decodeHeader(ErrorHeader.self).code == .invalidHeader)
        let farAhead = try await fetch(FetchHeader(from: 1 << 52, limit: 10))
        #expect(farAhead.events.isEmpty)
        #expect(farAhead.end.more == false)
        let still = try await fetch(FetchHeader(from: 30, limit: 1))
        #expect(still.events.count == 1)
        await fixture.stop()
    }

    @Test("retention by size deletes the oldest events and replay reports them as gone")
    func retentionBySize() async throws {
        let fixture = try await BrokerFixture.start {
            $0.retentionMaxBytes = 20_000
            $0.retentionInterval = .milliseconds(50)
        }
        let producer = try await fixture.producer()
        for seq in 1...200 { _ = try await Events.exchange(producer, try Events.frames(seq: Int64(seq)).1) }
        try await waitUntil("retention brings the journal under its bound") {
            let statistics = fixture.broker.statistics
            return statistics.head == 200 && statistics.journalBytes <= 20_000
        }
        let rows = try fixture.journalRows()
        #expect(rows.last?.busSeq == 200)
        #expect(rows.count < 200)
        let first = fixture.broker.statistics.first
        #expect(rows.first?.busSeq == first)

        let client = try await fixture.replayClient()
        let answer = try await Events.exchange(client, try Envelope(command: .fetch, header: FetchHeader(from: 1, limit: 1)).frames())
        #expect(answer.command == .event)
        #expect(try answer.decodeHeader(EventHeader.self).busSeq == first)
        let end = try Envelope.decode(try await client.receive().frames).decodeHeader(EndHeader.self)
        #expect(end.first == first)
        await fixture.stop()
    }

    @Test("retention by age deletes what is older than the limit")
    func retentionByAge() async throws {
        let fixture = try await BrokerFixture.start {
            $0.retentionMaxAge = .milliseconds(1)
            $0.retentionInterval = .milliseconds(50)
        }
        let producer = try await fixture.producer()
        for seq in 1...20 { _ = try await Events.exchange(producer, try Events.frames(seq: Int64(seq)).1) }
        try await waitUntil("every event ages out") { fixture.broker.statistics.first == 21 }
        #expect(try fixture.journalRows().isEmpty)
        // Numbering goes on after an emptied journal.
        let ack = try await Events.exchange(producer, try Events.frames(seq: 21).1).decodeHeader(AckHeader.self)
        #expect(ack.busSeq == 21)
        await fixture.stop()
    }
}
