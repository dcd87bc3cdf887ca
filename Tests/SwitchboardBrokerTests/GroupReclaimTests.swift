import Foundation
import SwitchboardProtocol
import Testing

@testable import SwitchboardBroker

/// A rejoining member claims the deliveries it still works on (JOIN `holding`), so that after a
/// reconnection or a broker restart an event is never worked on by two members at once.
@Suite("Consumer group reclaim")
struct GroupReclaimTests {
    typealias Instant = ContinuousClock.Instant

    static let t0 = ContinuousClock.now
    func at(_ milliseconds: Int) -> Instant { Self.t0 + .milliseconds(milliseconds) }

    let a = GroupMemberID(Data("m1".utf8))
    let b = GroupMemberID(Data("m2".utf8))
    let a2 = GroupMemberID(Data("m1-again".utf8))

    var settings: ConsumerGroupSettings { Self.settings() }

    static func settings(liveness: Duration = .seconds(3)) -> ConsumerGroupSettings {
        ConsumerGroupSettings(
            ackWait: .seconds(30), maxDeliver: 5, backoff: [.seconds(1)], liveness: liveness, bufferLimit: 100, maxCredit: 1000)
    }

    /// A group as a restarted broker rebuilds it: 5 was delivered once before the crash (the
    /// count is on disk), 6 maybe (none on disk); both unsettled, and the journal's head was 6.
    /// Restored at 0 ms, reclaim window until 3 000 ms.
    func restarted() -> ConsumerGroupState {
        ConsumerGroupState(
            name: "g", settings: settings,
            restoring: GroupSnapshot(cursor: 4, attempts: [5: GroupAttempts(count: 1, lastFailure: nil)]),
            reclaim: (at(3_000), through: 6))
    }

    func candidates(_ numbers: [Int64], key: String? = nil) -> [GroupCandidate] {
        numbers.map { GroupCandidate(busSeq: $0, key: key) }
    }

    func join(
        _ group: inout ConsumerGroupState, _ id: GroupMemberID, name: String, holding: [HeldDelivery] = [], at ms: Int
    ) throws -> (actions: [GroupAction], held: [Int64]) {
        var held: [Int64] = []
        let actions = try group.join(member: id, name: name, credit: 10, holding: holding, held: &held, now: at(ms))
        return (actions, held)
    }

    @Test("after a restart, events journaled before wait for their holder; the holder's claim gets one back without a DELIVER")
    func restartClaim() throws {
        var group = restarted()
        #expect(group.offer(candidates([5, 6, 7]), through: 7, now: at(10)) == [])
        // Another member joins first: it gets 7 (journaled after the restart), not 5 or 6.
        let other = try join(&group, b, name: "w2", at: 100)
        #expect(other.actions == [.deliver(member: b, busSeq: 7, attempt: 1, deadline: at(30_100))])
        #expect(other.held == [])
        #expect(group.status.waiting == 2)
        // The member that had 5 rejoins holding it: it is in flight to it as attempt 1, no DELIVER.
        let holder = try join(&group, a, name: "w1", holding: [HeldDelivery(busSeq: 5, attempt: 1)], at: 900)
        #expect(holder.actions == [])
        #expect(holder.held == [5])
        #expect(group.status.pending == 2)
        #expect(group.status.waiting == 1)
        #expect(group.status.reclaimed == 1)
        // The window's end takes nothing from it, and sends the unclaimed 6 (to a: it has
        // fewer in flight... both have one; a never got a DELIVER, so it is least recent).
        #expect(group.tick(now: at(3_000)) == [.deliver(member: a, busSeq: 6, attempt: 1, deadline: at(33_000))])
        // Its ACK under the claimed attempt settles 5.
        #expect(try group.ack(member: a, busSeq: 5, attempt: 1, now: at(3_100)) == [])
        #expect(try group.ack(member: a, busSeq: 6, attempt: 1, now: at(3_100)) == [])
        #expect(try group.ack(member: b, busSeq: 7, attempt: 1, now: at(3_100)) == [])
        #expect(group.cursor == 7)
        #expect(group.status.redeliveries == 0)
    }

    @Test("an unclaimed event goes out when the reclaim window ends, as the next attempt")
    func unclaimedAfterWindow() throws {
        var group = restarted()
        _ = group.offer(candidates([5, 6]), through: 6, now: at(10))
        _ = try join(&group, b, name: "w2", at: 100)
        #expect(group.nextDeadline == at(3_000))
        #expect(group.tick(now: at(2_999)).isEmpty)
        #expect(
            group.tick(now: at(3_000)) == [
                .deliver(member: b, busSeq: 5, attempt: 2, deadline: at(33_000)),
                .deliver(member: b, busSeq: 6, attempt: 1, deadline: at(33_000)),
            ])
        // Too late to claim: it is in flight to another member now.
        let late = try join(&group, a, name: "w1", holding: [HeldDelivery(busSeq: 5, attempt: 1)], at: 3_100)
        #expect(late.held == [])
        #expect(throws: GroupRefusal.self) { try group.ack(member: a, busSeq: 5, attempt: 1, now: at(3_200)) }
    }

    @Test("a claim that arrives before the journal is read back is honoured when the event is offered")
    func claimBeforeOffer() throws {
        var group = restarted()
        _ = try join(&group, b, name: "w2", at: 5)
        let holder = try join(&group, a, name: "w1", holding: [HeldDelivery(busSeq: 5, attempt: 1)], at: 6)
        #expect(holder.held == [5])
        #expect(
            group.offer(candidates([5, 6, 7]), through: 7, now: at(10)) == [
                .deliver(member: b, busSeq: 7, attempt: 1, deadline: at(30_010))
            ])
        #expect(try group.ack(member: a, busSeq: 5, attempt: 1, now: at(20)) == [])
        // A claim on an event that never came (it did not match) is dropped with the read; one
        // beyond the head at the restart (never delivered before it) is not taken.
        var other = restarted()
        let claimed = try join(
            &other, a, name: "w1", holding: [HeldDelivery(busSeq: 6, attempt: 1), HeldDelivery(busSeq: 9, attempt: 1)], at: 1)
        #expect(claimed.held == [6])
        _ = other.offer(candidates([5]), through: 12, now: at(10))
        #expect(other.claims.isEmpty)
    }

    @Test("a delivery whose count was lost in the crash (none on disk) waits and can be claimed all the same")
    func lostAttemptCount() throws {
        var group = ConsumerGroupState(name: "g", settings: settings, restoring: GroupSnapshot(cursor: 0), reclaim: (at(3_000), through: 2))
        _ = group.offer(candidates([1, 2, 3]), through: 3, now: at(10))
        let holder = try join(&group, a, name: "w1", holding: [HeldDelivery(busSeq: 1, attempt: 3)], at: 20)
        #expect(holder.held == [1])
        #expect(holder.actions == [.deliver(member: a, busSeq: 3, attempt: 1, deadline: at(30_020))])
        // The count follows the claim, so the next delivery after a NACK is attempt 4.
        #expect(
            try group.nack(member: a, busSeq: 1, attempt: 3, delay: .zero, now: at(30))
                == [.deliver(member: a, busSeq: 1, attempt: 4, deadline: at(30_030))])
    }

    @Test("claims that would break the promises are refused: a later delivery made, a NACK's back-off, a key held up, someone else's")
    func refusedClaims() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(liveness: .seconds(3600)))
        _ = try join(&group, a, name: "w1", at: 0)
        _ = group.offer(candidates([1, 2]) + candidates([3, 4], key: "k"), through: 4, now: at(0))
        // 1 is NACKed (backing off), 2 is in flight to a, 3 is in flight, 4 waits behind 3.
        _ = try group.nack(member: a, busSeq: 1, attempt: 1, delay: .seconds(10), now: at(1))
        let b1 = try join(
            &group, b, name: "w2",
            holding: [
                HeldDelivery(busSeq: 1, attempt: 1),  // backing off after a NACK
                HeldDelivery(busSeq: 2, attempt: 1),  // in flight to a member of another name
                HeldDelivery(busSeq: 4, attempt: 1),  // its key's earlier event is in flight
                HeldDelivery(busSeq: 7, attempt: 1),  // never offered, and no restart
            ], at: 2)
        #expect(b1.held == [])
        #expect(group.status.reclaimed == 0)
        // A stale attempt: 3 was taken back (ack time-out) and delivered again as attempt 2.
        _ = group.tick(now: at(30_001))
        #expect(group.entries[3].map { if case .inFlight(let h) = $0.phase { h.attempt } else { 0 } } == 2)
        let stale = try join(&group, a2, name: "w1", holding: [HeldDelivery(busSeq: 3, attempt: 1)], at: 30_002)
        #expect(stale.held == [])
    }

    @Test("a member's new connection (same name) takes over what its old connection holds; the old one's settles are refused")
    func sameNameTakesOver() throws {
        var group = ConsumerGroupState(name: "g", settings: settings)
        _ = try join(&group, a, name: "w1", at: 0)
        _ = group.offer(candidates([1, 2]), through: 2, now: at(0))
        let again = try join(&group, a2, name: "w1", holding: [HeldDelivery(busSeq: 1, attempt: 1)], at: 1_000)
        #expect(again.held == [1])
        #expect(group.status.members.map(\.inFlight) == [1, 1])
        #expect(throws: GroupRefusal.self) { try group.ack(member: a, busSeq: 1, attempt: 1, now: at(1_001)) }
        #expect(try group.ack(member: a2, busSeq: 1, attempt: 1, now: at(1_002)) == [])
        // The old connection (last heard at its refused ACK) expires holding only 2, which goes
        // to the new one as attempt 2.
        let expired = group.tick(now: at(4_001))
        #expect(expired.contains(.memberExpired(a)))
        #expect(expired.contains(.deliver(member: a2, busSeq: 2, attempt: 2, deadline: at(34_001))))
        #expect(group.cursor == 1)
    }

    @Test(
        "a member whose connection is found gone gets nothing new and keeps what it holds for its liveness: its new connection claims it, or others get it after"
    )
    func unreachableKeepsItsDeliveries() throws {
        var group = ConsumerGroupState(name: "g", settings: settings)
        _ = try join(&group, a, name: "w1", at: 0)
        _ = try join(&group, b, name: "w2", at: 0)
        let first = group.offer(candidates([1, 2]), through: 2, now: at(0)).compactMap(\.delivery)
        #expect(first.map(\.member).sorted { $0.description < $1.description } == [a, b])
        let heldByA = try #require(first.first { $0.member == a }).busSeq
        // A HEAD could not be routed to a: nothing is taken back, nothing new goes to it.
        let foundGone = group.unreachable(member: a)
        let foundGoneAgain = group.unreachable(member: a)
        #expect(foundGone && !foundGoneAgain)
        group.heard(from: b, now: at(1_000))
        let later = group.offer(candidates([3, 4]), through: 4, now: at(1_000)).compactMap(\.delivery)
        #expect(later.allSatisfy { $0.member == b })
        #expect(group.status.members.first { $0.name == "w1" }?.inFlight == 1)
        // Its process lives and joins again on a new connection within the liveness: it claims
        // what it was working on and gets it back, not a second copy at w2.
        let again = try join(&group, a2, name: "w1", holding: [HeldDelivery(busSeq: heldByA, attempt: 1)], at: 2_000)
        #expect(again.held == [heldByA])
        #expect(try group.ack(member: a2, busSeq: heldByA, attempt: 1, now: at(2_001)) == [])
        #expect(group.tick(now: at(3_000)).contains(.memberExpired(a)))
        #expect(group.entries[heldByA] == nil || group.entries[heldByA]?.attempts == 1)
    }

    @Test("a member found gone that never comes back loses what it holds after its liveness, as member-lost")
    func unreachableExpires() throws {
        var group = ConsumerGroupState(name: "g", settings: settings)
        _ = try join(&group, a, name: "w1", at: 0)
        _ = group.offer(candidates([1]), through: 1, now: at(0))
        _ = try join(&group, b, name: "w2", at: 0)
        let foundGone = group.unreachable(member: a)
        #expect(foundGone)
        group.heard(from: b, now: at(2_900))
        #expect(group.tick(now: at(2_999)).isEmpty)
        let actions = group.tick(now: at(3_000))
        #expect(actions.first == .memberExpired(a))
        #expect(actions.compactMap(\.delivery) == [GroupAction.Delivery(member: b, busSeq: 1, attempt: 2, deadline: at(33_000))])
        #expect(group.entries[1]?.lastFailure?.code == "member-lost")
    }

    @Test("a restored replay that was delivered before waits for its claim too")
    func restoredReplay() throws {
        var group = ConsumerGroupState(
            name: "g", settings: settings,
            restoring: GroupSnapshot(
                cursor: 10, attempts: [3: GroupAttempts(count: 2, lastFailure: nil)], replays: [GroupCandidate(busSeq: 3, key: nil)]),
            reclaim: (at(3_000), through: 10))
        let other = try join(&group, b, name: "w2", at: 0)
        #expect(other.actions == [])
        let holder = try join(&group, a, name: "w1", holding: [HeldDelivery(busSeq: 3, attempt: 2)], at: 10)
        #expect(holder.held == [3])
        #expect(try group.ack(member: a, busSeq: 3, attempt: 2, now: at(20)) == [])
        #expect(group.status.replays == 0)
    }
}
