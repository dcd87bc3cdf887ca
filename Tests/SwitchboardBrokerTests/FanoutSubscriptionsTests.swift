import Foundation
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

@Suite("Fan-out: events go out only where a subscription matches")
struct FanoutSubscriptionsTests {
    private static func subscribe(_ prefix: String) -> Data { Data([1]) + Data(prefix.utf8) }
    private static func unsubscribe(_ prefix: String) -> Data { Data([0]) + Data(prefix.utf8) }

    @Test("prefixes are counted, matched as bytes, and the empty prefix matches everything")
    func counts() {
        var subscriptions = FanoutSubscriptions()
        let checkIn = Data("checkin.recorded".utf8)
        #expect(!subscriptions.wants(checkIn))
        subscriptions.apply(Self.subscribe("checkin."))
        subscriptions.apply(Self.subscribe("checkin."))
        subscriptions.apply(Self.subscribe("person."))
        #expect(subscriptions.total == 3)
        #expect(subscriptions.wants(checkIn))
        #expect(!subscriptions.wants(Data("checkin".utf8)))  // shorter than the prefix
        #expect(!subscriptions.wants(Data("shelter.bed.assigned".utf8)))
        // One of the two "checkin." goes: the other still wants it.
        subscriptions.apply(Self.unsubscribe("checkin."))
        #expect(subscriptions.wants(checkIn))
        subscriptions.apply(Self.unsubscribe("checkin."))
        #expect(!subscriptions.wants(checkIn))
        // An unsubscription of a prefix not held changes nothing.
        let generation = subscriptions.generation
        subscriptions.apply(Self.unsubscribe("checkin."))
        #expect(subscriptions.total == 1)
        #expect(subscriptions.counts == [Data("person.".utf8): 1])
        #expect(subscriptions.generation != generation)
        subscriptions.apply(Self.subscribe(""))
        #expect(subscriptions.wants(checkIn))
        #expect(subscriptions.wants(Data()))
        // Anything else the XPUB hands up is not a subscription.
        let empty = subscriptions.apply(Data())
        #expect(!empty)
        let other = subscriptions.apply(Data([2]) + Data("checkin.".utf8))
        #expect(!other)
        #expect(subscriptions.total == 2)
    }

    /// Sends check-ins one at a time (each waits for its ACK, so each is a step of the broker's
    /// loop) until `subscriber` receives one, at most `attempts`; returns the bus_seqs it got.
    private func publishUntilReceived(
        _ fixture: BrokerFixture, _ producer: AsyncSocket, from seq: inout Int64, by subscriber: AsyncSocket, attempts: Int = 50
    ) async throws -> Int64? {
        for _ in 0..<attempts {
            seq += 1
            _ = try await Events.exchange(producer, try Events.frames(seq: seq).1)
            while let message = try await subscriber.receive(timeout: .milliseconds(20)) {
                let envelope = try Envelope.decode(message.frames.dropFirst())
                if envelope.command == .event { return try envelope.decodeHeader(EventHeader.self).busSeq }
            }
        }
        return nil
    }

    @Test("a subscription made after events went unsent gets the events after it")
    func lateSubscriber() async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        var seq: Int64 = 0
        // Nobody subscribes: these are journaled and not sent.
        for _ in 0..<3 {
            seq += 1
            _ = try await Events.exchange(producer, try Events.frames(seq: seq).1)
        }
        let subscriber = try await fixture.io.open(.subscriber, linger: 0) { [endpoints = fixture.endpoints] socket in
            try socket.set(.subscribe(Data("checkin.".utf8)))
            try socket.connect(endpoints.fanout)
        }
        let got = try await publishUntilReceived(fixture, producer, from: &seq, by: subscriber)
        #expect(got != nil && got! > 3)
        await fixture.stop()
    }

    @Test("an unsubscription from a peer that never subscribed, or from one that goes, leaves the others their events")
    func othersKeepTheirs() async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        var seq: Int64 = 0
        let subscriber = try await fixture.io.open(.subscriber, linger: 0) { [endpoints = fixture.endpoints] socket in
            try socket.set(.subscribe(Data("checkin.".utf8)))
            try socket.connect(endpoints.fanout)
        }
        #expect(try await publishUntilReceived(fixture, producer, from: &seq, by: subscriber) != nil)

        // A raw XSUB unsubscribes from "checkin." without having subscribed, then subscribes to
        // "$sys.": the HEAD it then gets says the broker's XPUB read the unsubscription before.
        let stray = try await fixture.io.open(.xsubscriber, linger: 0) { [endpoints = fixture.endpoints] socket in
            try socket.connect(endpoints.fanout)
        }
        try await stray.send([Self.unsubscribe("checkin.")])
        try await stray.send([Self.subscribe("$sys.")])
        var sawHead = false
        for _ in 0..<50 where !sawHead {
            if let message = try await stray.receive(timeout: .milliseconds(100)),
                String(decoding: message.frames[0], as: UTF8.self) == Topic.head
            {
                sawHead = true
            }
        }
        #expect(sawHead)
        // A second subscriber to "checkin." comes and goes: its unsubscription is passed up.
        let passing = try await fixture.io.open(.subscriber, linger: 0) { [endpoints = fixture.endpoints] socket in
            try socket.set(.subscribe(Data("checkin.".utf8)))
            try socket.connect(endpoints.fanout)
        }
        #expect(try await publishUntilReceived(fixture, producer, from: &seq, by: passing) != nil)
        await passing.close()

        // The first subscriber still gets every check-in from here: several steps of the loop,
        // each after the broker read what the XPUB handed up.
        while try await subscriber.receive(timeout: .milliseconds(50)) != nil {}
        let from = seq + 1
        for _ in 0..<10 {
            seq += 1
            _ = try await Events.exchange(producer, try Events.frames(seq: seq).1)
        }
        var received: [Int64] = []
        while received.count < 10, let message = try await subscriber.receive(timeout: .seconds(5)) {
            let envelope = try Envelope.decode(message.frames.dropFirst())
            if envelope.command == .event { received.append(try envelope.decodeHeader(EventHeader.self).producerSeq) }
        }
        #expect(received == Array(from...seq))
        await fixture.stop()
    }
}
