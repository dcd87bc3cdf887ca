import Foundation
import SwitchboardProtocol
import Testing

@testable import SwitchboardBroker

/// DELIVER's `first` (protocol section 15.2): the broker calls a delivery the event's first only
/// when no member can have been given it before. Driven by hand, as `GroupStateTests`.
@Suite("Consumer group first deliveries")
struct GroupFirstDeliveryTests {
    typealias Tests = GroupStateTests
    func at(_ milliseconds: Int) -> ContinuousClock.Instant { Tests.at(milliseconds) }
    let a = Tests.member(1)
    let b = Tests.member(2)

    /// `isFirstDelivery` on a copy: `#expect`'s closures cannot call a mutating method.
    func first(_ group: ConsumerGroupState, _ busSeq: Int64, attempt: Int) -> Bool {
        var group = group
        return group.isFirstDelivery(busSeq, attempt: attempt)
    }

    @Test("attempt 1 of an event journaled after the machine was made is first; the delivery after a NACK or a lost member is not")
    func firstThenRedelivered() throws {
        var group = ConsumerGroupState(name: "g", settings: Tests.settings(backoff: []), earlierThrough: 0)
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        let delivered = group.offer(Tests.events(1...2), through: 2, now: at(1))
        #expect(delivered.count == 2)
        #expect(first(group, 1, attempt: 1) && first(group, 2, attempt: 1))
        // What the broker asks of a batch of actions says the same, false for what is no delivery.
        let firsts = group.firstDeliveries(in: delivered + [.memberExpired(a)])
        #expect(firsts == [true, true, false])
        // NACKed with no back-off: delivered again at once, as attempt 2, and not first.
        let again = try group.nack(member: a, busSeq: 1, attempt: 1, now: at(2))
        #expect(again == [.deliver(member: a, busSeq: 1, attempt: 2, deadline: at(30_002))])
        #expect(!first(group, 1, attempt: 2))
        let againFirst = group.firstDeliveries(in: again)
        #expect(againFirst == [false])
        // A member leaving: its delivery goes to the other member counting on, never first.
        _ = try group.join(member: b, name: "b", credit: 10, now: at(3))
        let moved = group.leave(member: a, now: at(4))
        #expect(moved.contains(.deliver(member: b, busSeq: 2, attempt: 2, deadline: at(30_004))), "\(moved)")
        #expect(!first(group, 2, attempt: 2))
        #expect(!first(group, 99, attempt: 1), "an event the machine does not hold")
    }

    @Test("events journaled before the machine was made (a restart, a reset, a group made again) are never first, even as attempt 1")
    func journaledBefore() throws {
        // A broker restarting with the journal's head at 5: a delivery made just before a crash
        // may have lost its count, so attempt 1 of 1…5 proves nothing.
        var group = ConsumerGroupState(name: "g", settings: Tests.settings(), earlierThrough: 5)
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        let actions = group.offer(Tests.events(4...7), through: 7, now: at(1))
        #expect(actions.count == 4)
        #expect(!first(group, 4, attempt: 1) && !first(group, 5, attempt: 1))
        #expect(first(group, 6, attempt: 1) && first(group, 7, attempt: 1))
        // Without a head (the default), nothing is first.
        var unknown = ConsumerGroupState(name: "g", settings: Tests.settings())
        _ = try unknown.join(member: a, name: "a", credit: 10, now: at(0))
        _ = unknown.offer(Tests.events(1...1), through: 1, now: at(1))
        #expect(!first(unknown, 1, attempt: 1))
    }

    @Test("a dead letter replayed (below the cursor) or reopened (above it) counts from attempt 1 again and is not first")
    func replayedAndReopened() throws {
        var group = ConsumerGroupState(name: "g", settings: Tests.settings(), earlierThrough: 0)
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        _ = group.offer(Tests.events(1...3), through: 3, now: at(1))
        _ = try group.term(member: a, busSeq: 1, attempt: 1, now: at(2))
        _ = try group.term(member: a, busSeq: 3, attempt: 1, now: at(2))
        _ = try group.ack(member: a, busSeq: 2, attempt: 1, now: at(2))
        #expect(group.cursor == 3)
        let replay = group.reopen(busSeq: 1, key: nil, now: at(3))
        #expect(replay == [.deliver(member: a, busSeq: 1, attempt: 1, deadline: at(30_003))])
        #expect(!first(group, 1, attempt: 1), "a replay")

        var above = ConsumerGroupState(name: "g", settings: Tests.settings(), earlierThrough: 0)
        _ = try above.join(member: a, name: "a", credit: 10, now: at(0))
        _ = above.offer(Tests.events(1...2), through: 2, now: at(1))
        _ = try above.term(member: a, busSeq: 2, attempt: 1, now: at(2))
        #expect(above.cursor == 0, "1 is still unsettled")
        let reopened = above.reopen(busSeq: 2, key: nil, now: at(3))
        #expect(reopened == [.deliver(member: a, busSeq: 2, attempt: 1, deadline: at(30_003))])
        #expect(!first(above, 2, attempt: 1), "reopened above the cursor")
        #expect(first(above, 1, attempt: 1))
    }
}
