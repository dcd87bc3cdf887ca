import Foundation
import SwitchboardBroker
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

/// The decisions of protocol section 15 that a client written from the spec alone found
/// unstated (issue 31, item 8), held to a live broker.
@Suite("Consumer groups: the decided corners of section 15")
struct GroupDecisionTests {
    static func error(on socket: AsyncSocket) async throws -> ErrorHeader {
        try await GroupWire.next(.error, on: socket).decodeHeader(ErrorHeader.self)
    }

    @Test(
        "a JOIN with 32 topics of 128 bytes and 1000 holding items is answered (the groups endpoint's headers may reach 64 KiB); a bigger header is too-large"
    )
    func bigJoin() async throws {
        let fixture = try await BrokerFixture.start(GroupAdminTests.patient)
        let topics = (0..<32).map { index in "t\(index)." + String(repeating: "x", count: 128 - "t\(index).".utf8.count) }
        let holding = (1...1000).map { HeldDelivery(busSeq: 9_007_199_254_739_992 + Int64($0), attempt: 1_000_000) }
        let member = try await fixture.groupPeer()
        let join = JoinHeader(group: "wide", topics: topics, credit: 1000, member: "wide-1", holding: holding)
        #expect(join.wireJSON().count > 4096)
        let joined = try await GroupWire.joined(join, on: member)
        #expect(joined.group == "wide" && joined.held == [], "nothing of that was the member's to hold")
        // Past 64 KiB: refused before anything else is read.
        var fields = try #require(try JSONSerialization.jsonObject(with: join.wireJSON()) as? [String: Any])
        fields["padding"] = String(repeating: "p", count: 64 * 1024)
        let huge = try JSONSerialization.data(withJSONObject: fields)
        try await member.send(Envelope(command: .join, header: huge).frames())
        #expect(try await Self.error(on: member).code == .tooLarge)
        await member.close()
        await fixture.stop()
    }

    @Test("HEARTBEAT from a connection in no group is answered ERROR not-member, from a member HEAD; a refused LEAVE's ref is the group")
    func heartbeatAndLeave() async throws {
        let fixture = try await BrokerFixture.start(GroupAdminTests.patient)
        let stranger = try await fixture.groupPeer()
        try await stranger.send(Envelope(command: .heartbeat, header: Envelope.emptyObject).frames())
        let refusal = try await Self.error(on: stranger)
        #expect(refusal.code == .notMember && refusal.command == "HEARTBEAT")
        try await stranger.send(Envelope(command: .leave, header: Data(#"{"group":"filemaker"}"#.utf8)).frames())
        let left = try await Self.error(on: stranger)
        #expect(left.code == .notMember && left.ref == "filemaker" && left.command == "LEAVE", "\(left)")
        _ = try await GroupWire.joined(JoinHeader(group: "filemaker", topics: ["checkin."], credit: 1), on: stranger)
        try await stranger.send(Envelope(command: .heartbeat, header: Envelope.emptyObject).frames())
        _ = try await GroupWire.next(.head, on: stranger)
        await stranger.close()
        await fixture.stop()
    }

    @Test(
        "after groups.reset, a delivery in flight comes again under the next attempt: the old attempt's ACK is not-held, the new one's settles"
    )
    func resetKeepsCountingAttempts() async throws {
        let fixture = try await BrokerFixture.start(GroupAdminTests.patient)
        _ = try await GroupAdminTests.publish(fixture, count: 1)
        let member = try await fixture.groupPeer()
        _ = try await GroupWire.joined(JoinHeader(group: "filemaker", topics: ["checkin."], credit: 1, member: "fm-1"), on: member)
        let (first, _) = try await GroupWire.delivery(on: member)
        #expect(first.busSeq == 1 && first.attempt == 1)
        let admin = fixture.groupsClient()
        _ = try await admin.resetGroup("filemaker", start: .earliest)
        let (again, _) = try await GroupWire.delivery(on: member)
        #expect(again.busSeq == 1 && again.attempt == 2, "\(again)")
        try await member.send(GroupWire.settle(SettleHeader(.ack, group: "filemaker", busSeq: 1, attempt: 1)))
        let stale = try await Self.error(on: member)
        #expect(stale.code == .notHeld && stale.ref == "filemaker/1")
        try await member.send(GroupWire.settle(SettleHeader(.ack, group: "filemaker", busSeq: 1, attempt: 2)))
        try await waitUntil("the new delivery is settled") { try await admin.groups().first?.pending == 0 }
        // dlq.list of a group that does not exist: 404, not an empty list.
        let unknown = await #expect(throws: GroupAdminError.self) { _ = try await admin.deadLetters(group: "nosuch") }
        #expect(unknown?.status == 404)
        await member.close()
        await fixture.stop()
    }
}
