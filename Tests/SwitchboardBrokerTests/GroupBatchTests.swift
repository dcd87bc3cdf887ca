import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// Several deliveries per DELIVER (protocol 1.3, section 15.2), held to a live broker by a raw
/// member, and the broker's gathering of them (`DeliverBatches`).
@Suite("Consumer groups: several deliveries per DELIVER")
struct GroupBatchTests {
    static let quiet = Logger(label: "test.batch") { _ in SwiftLogNoOpLogHandler() }

    /// Waits until `group`'s committed cursor is at the journal's last event.
    static func settled(_ fixture: BrokerFixture, group: String) async throws {
        let last = try #require(try fixture.journalRows().map(\.busSeq).max())
        let journal = fixture.directory.path("broker/journal.sqlite")
        try await waitUntil("group \(group)'s cursor reaches \(last)", timeout: .seconds(10)) {
            (try JournalFile.groupCursor(at: journal, group: group) ?? 0) >= last
        }
    }

    /// `count` check-ins journaled, no key (so all may be in flight at once).
    static func publish(_ fixture: BrokerFixture, count: Int) async throws {
        let outbox = try fixture.outbox("batch-kiosk")
        try await outbox.enqueue(
            (0..<count).map { i in .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: i), key: nil) })
        #expect(try await fixture.sender(outbox).deliver(until: .now + .seconds(60)).delivered == count)
    }

    /// Every message on `socket` until `count` deliveries came: the deliveries of each DELIVER.
    static func deliveries(
        _ count: Int, on socket: AsyncSocket
    ) async throws -> [(version: ProtocolVersion, frames: Int, headers: [DeliverHeader])] {
        var messages: [(version: ProtocolVersion, frames: Int, headers: [DeliverHeader])] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while messages.reduce(0, { $0 + $1.headers.count }) < count {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero, let message = try await socket.receive(timeout: remaining) else {
                throw WaitTimedOut(description: "\(count) deliveries did not come")
            }
            let envelopes = try Envelope.decodeDeliveries(message.frames)
            guard envelopes.first?.command == .deliver else { continue }
            messages.append((envelopes[0].version, message.frames.count, try envelopes.map { try DeliverHeader(wire: $0.header) }))
        }
        return messages
    }

    @Test(
        "a JOIN written as 1.3 with batch 8 gets DELIVERs of up to 8 deliveries (1.3, 2 + 4n frames) and JOINED batch 8; ACKS settles them all"
    )
    func batchedDeliveries() async throws {
        let fixture = try await BrokerFixture.start(GroupAdminTests.patient)
        try await Self.publish(fixture, count: 40)
        let member = try await fixture.groupPeer()
        let join = JoinHeader(group: "batched", topics: ["checkin."], credit: 40, member: "batched-1", batch: 8)
        #expect(try await GroupWire.joined(join, on: member).batch == 8)
        let messages = try await Self.deliveries(40, on: member)
        let headers = messages.flatMap(\.headers)
        #expect(Set(headers.map(\.busSeq)).count == 40, "every event once")
        #expect(headers.map(\.busSeq) == headers.map(\.busSeq).sorted(), "in dispatch order")
        #expect(messages.allSatisfy { $0.headers.count <= 8 && $0.frames == 2 + 4 * $0.headers.count })
        #expect(messages.contains { $0.headers.count > 1 }, "40 ready at once come several to a DELIVER: \(messages.map(\.headers.count))")
        #expect(messages.allSatisfy { $0.version == .deliverBatches })
        let acks = GroupAcks(group: "batched", deliveries: headers.map { HeldDelivery(busSeq: $0.busSeq, attempt: $0.attempt) })
        try await member.send(acks.envelope().frames())
        try await Self.settled(fixture, group: "batched")
        await member.close()
        await fixture.stop()
    }

    @Test("a JOIN below 1.3 asking for batch 8 gets JOINED batch 1 and a DELIVER of 6 frames per delivery")
    func olderJoinGetsOneEach() async throws {
        let fixture = try await BrokerFixture.start(GroupAdminTests.patient)
        try await Self.publish(fixture, count: 12)
        let member = try await fixture.groupPeer()
        let join = JoinHeader(group: "single", topics: ["checkin."], credit: 12, batch: 8)
        #expect(try await GroupWire.joined(join, version: .current, on: member).batch == 1)
        let messages = try await Self.deliveries(12, on: member)
        #expect(messages.count == 12 && messages.allSatisfy { $0.frames == 6 && $0.version == .current })
        await member.close()
        await fixture.stop()
    }

    @Test("a member that joins again changes its batch, and a JOIN below 1.3 sets it back to 1")
    func rejoinChangesBatch() async throws {
        let fixture = try await BrokerFixture.start(GroupAdminTests.patient)
        let member = try await fixture.groupPeer()
        for (batch, version, expected) in [(8, ProtocolVersion.deliverBatches, 8), (2, .deliverBatches, 2), (8, .current, 1)] {
            let join = JoinHeader(group: "again", topics: ["checkin."], credit: 10, batch: batch)
            #expect(try await GroupWire.joined(join, version: version, on: member).batch == expected)
        }
        await member.close()
        await fixture.stop()
    }

    @Test("GroupConsumer takes DELIVERs of several deliveries and hands each on once, in order")
    func consumerReadsBatches() async throws {
        let fixture = try await BrokerFixture.start(GroupAdminTests.patient)
        try await Self.publish(fixture, count: 30)
        let consumer = GroupConsumer(
            io: fixture.io, endpoint: fixture.endpoints.groups,
            settings: .init(group: "library", topics: ["checkin."], credit: 30, batch: 10), logger: Self.quiet)
        let running = Task { try await consumer.run() }
        var seen: [Int64] = []
        for await delivery in consumer.deliveries {
            seen.append(delivery.busSeq)
            try await delivery.ack()
            if seen.count == 30 { break }
        }
        #expect(seen == seen.sorted() && Set(seen).count == 30)
        try await Self.settled(fixture, group: "library")
        running.cancel()
        _ = await running.result
        await fixture.stop()
    }

    @Test("a member's DELIVER goes out at its batch, or before one more delivery would pass the message limit; the rest when drained")
    func gathering() {
        let a = GroupMemberID(Data([0, 1, 2, 3, 4]))
        let b = GroupMemberID(Data([0, 9, 9, 9, 9]))
        func delivery(_ bytes: Int) -> [Data] { [Data(count: 10), Data(count: bytes), Data(count: 2), Data(count: 2)] }
        var batches = DeliverBatches(limit: DeliverBatches.fixedBytes + 100)
        let slotA = batches.slot(of: a) { 3 }
        let slotB = batches.slot(of: b) { 3 }
        #expect(batches.slot(of: a) { 9 } == slotA && batches.batch(at: slotA) == 3, "looked up once")
        #expect(batches.add(at: slotA, delivery(6)) == nil)
        #expect(batches.add(at: slotB, delivery(6)) == nil)
        #expect(batches.add(at: slotA, delivery(6)) == nil)
        #expect(batches.add(at: slotA, delivery(6))?.count == 3 + 12, "a's third: full")
        // 20 bytes owed to b; 80 more make 100, the limit; 81 would pass it: what b is owed goes
        // first, alone.
        let first = batches.add(at: slotB, delivery(67))
        #expect(first?.count == 3 + 4 && first?.first == b.rawValue && first?[1] == Envelope.versionFrame(.deliverBatches))
        #expect(batches.add(at: slotA, delivery(6)) == nil)
        let rest = batches.drain()
        #expect(rest.map(\.first) == [a.rawValue, b.rawValue] && rest.map(\.count) == [7, 7], "first owed, first sent")
        #expect(batches.drain().isEmpty)
        // Past a handful of members, places are found through a dictionary: the same slots.
        var many = DeliverBatches(limit: 1 << 20)
        let members = (0..<20).map { GroupMemberID(Data([0, UInt8($0), 1, 2, 3])) }
        let slots = members.map { member in many.slot(of: member) { 2 } }
        #expect(slots == Array(0..<20))
        #expect(members.map { member in many.slot(of: member) { 5 } } == slots)
        for index in members.indices.reversed() { #expect(many.add(at: slots[index], delivery(1)) == nil) }
        #expect(many.add(at: slots[13], delivery(1))?[0] == members[13].rawValue)
        #expect(many.drain().count == 19)
    }
}
