import Foundation
import SwitchboardBroker
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("Journal follower")
struct FollowerTests {
    @Test("a follower started late replays from the journal and joins the live stream with no gap or duplicate at the seam")
    func lateStartSeam() async throws {
        let fixture = try await BrokerFixture.start()
        let outbox = try fixture.outbox("kiosk-a")
        try await outbox.enqueue((0..<500).map { .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) })
        // Until the outbox is empty, however long a loaded machine takes: the seam is the point.
        _ = try await fixture.sender(outbox).deliver()

        // More events keep arriving while the follower catches up, until all are delivered
        // (a deadline here once left 94 of them unsent on a loaded machine, and the follower
        // waited for them forever).
        try await outbox.enqueue((500..<1500).map { .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: $0)) })
        let live = Task { try await fixture.sender(outbox, window: 16).deliver() }

        let (seen, fromJournal) = try await within(.seconds(300), "the follower saw fewer than 1,500 events") {
            let follower = JournalFollower(
                io: fixture.io, endpoints: .init(fanout: fixture.endpoints.fanout, replay: fixture.endpoints.replay), from: 1)
            var seen: [Int64] = []
            var fromJournal = 0
            while seen.count < 1500 {
                if case .event(let event) = try await follower.next() {
                    seen.append(event.busSeq)
                    if event.fromJournal { fromJournal += 1 }
                }
            }
            await follower.close()
            return (seen, fromJournal)
        }
        #expect(seen == Array(1...1500))
        #expect(fromJournal >= 500)
        _ = try await live.value
        await fixture.stop()
    }

    @Test("an event missed on the live stream is fetched from the journal, and the gap is reported")
    func liveGapIsFilled() async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        for seq in 1...10 { _ = try await Events.exchange(producer, try Events.frames(seq: Int64(seq)).1) }

        // A stand-in fan-out that drops #5, as a full pipe or a reconnect would.
        let replayClient = try await fixture.replayClient()
        try await replayClient.send(try Envelope(command: .fetch, header: FetchHeader(from: 1, limit: 10)).frames())
        var journaled: [Message] = []
        while journaled.count < 11 { journaled.append(try await replayClient.receive()) }
        let welcome = try Welcome(broker: "stand-in", head: 0, first: 1, heartbeatMilliseconds: 100).frame()
        let lossy = try await fixture.io.open(.xpublisher, linger: 0) { socket in
            try socket.set(.xpubWelcomeMessage(welcome))
            try socket.bind("tcp://127.0.0.1:*")
        }
        let lossyEndpoint = try await lossy.perform { try $0.lastEndpoint() }
        let follower = JournalFollower(io: fixture.io, endpoints: .init(fanout: lossyEndpoint, replay: fixture.endpoints.replay))
        guard case .welcome(_, let head) = try await follower.next() else {
            Issue.record("expected the welcome first")
            return
        }
        #expect(head == 0)
        // Publish only once the follower's subscription has reached the stand-in (an XPUB
        // drops what no subscription matches yet: the slow joiner).
        #expect(try await lossy.receive().frames.first?.first == 1)
        for message in journaled.prefix(10) {
            let header = try Envelope.decode(message.frames).decodeHeader(EventHeader.self)
            if header.busSeq == 5 { continue }
            try await lossy.send([Data(header.type.utf8)] + message.frames)
        }
        var seen: [Int64] = []
        var gaps: [(Int64, Int64, Int)] = []
        while seen.count < 10 {
            switch try await follower.next() {
            case .event(let event): seen.append(event.busSeq)
            case .gapFilled(let from, let to, let fetched): gaps.append((from, to, fetched))
            default: continue
            }
        }
        #expect(seen == Array(1...10))
        #expect(gaps.count == 1)
        #expect(gaps.first.map { $0.0 == 5 && $0.1 == 5 && $0.2 == 1 } == true)
        await follower.close()
        await fixture.stop()
    }

    @Test("HEAD reveals events missed at the end of the stream")
    func headRevealsTrailingGap() async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        for seq in 1...3 { _ = try await Events.exchange(producer, try Events.frames(seq: Int64(seq)).1) }
        let head = try await Events.exchange(
            producer, [Envelope.versionFrame(), Data("HEARTBEAT".utf8), Data("{}".utf8), Data("{}".utf8), Data("{}".utf8), Data("{}".utf8)]
        ).decodeHeader(HeadHeader.self)
        let stand = try await fixture.io.open(.xpublisher, linger: 0) { socket in
            try socket.set(.xpubWelcomeMessage(try Welcome(broker: head.broker, head: 0, first: 1, heartbeatMilliseconds: 100).frame()))
            try socket.bind("tcp://127.0.0.1:*")
        }
        let endpoint = try await stand.perform { try $0.lastEndpoint() }
        let follower = JournalFollower(io: fixture.io, endpoints: .init(fanout: endpoint, replay: fixture.endpoints.replay))
        guard case .welcome = try await follower.next() else {
            Issue.record("expected the welcome first")
            return
        }
        #expect(try await stand.receive().frames.first?.first == 1)
        // Nothing live at all, only a HEAD saying the journal is at #3.
        try await stand.send([Data(Topic.head.utf8)] + (try Envelope(command: .head, header: head).frames()))
        var seen: [Int64] = []
        while seen.count < 3 {
            if case .event(let event) = try await follower.next() {
                #expect(event.fromJournal)
                seen.append(event.busSeq)
            }
        }
        #expect(seen == [1, 2, 3])
        await follower.close()
        await fixture.stop()
    }
}
