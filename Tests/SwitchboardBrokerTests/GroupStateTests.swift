import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

/// The consumer-group machine driven by hand: a manual clock (`at(ms)`), no I/O, no sleeps.
@Suite("Consumer group state")
struct GroupStateTests {
    typealias Instant = ContinuousClock.Instant

    /// The origin of every test's manual clock. Read once; the machine never reads a clock.
    static let t0 = ContinuousClock.now

    static func at(_ milliseconds: Int) -> Instant { t0 + .milliseconds(milliseconds) }
    func at(_ milliseconds: Int) -> Instant { Self.at(milliseconds) }

    static func member(_ number: Int) -> GroupMemberID { GroupMemberID(Data("m\(number)".utf8)) }
    let a = member(1)
    let b = member(2)
    let c = member(3)

    /// Settings where members never expire and NACKs back off a little, unless a test says otherwise.
    static func settings(
        ackWait: Duration = .seconds(30), maxDeliver: Int = 5,
        backoff: [Duration] = [.seconds(1), .seconds(5), .seconds(30), .seconds(120)],
        liveness: Duration = .seconds(3600), bufferLimit: Int = 10_000, maxCredit: Int = 1000
    ) -> ConsumerGroupSettings {
        ConsumerGroupSettings(
            ackWait: ackWait, maxDeliver: maxDeliver, backoff: backoff, liveness: liveness, bufferLimit: bufferLimit, maxCredit: maxCredit)
    }

    static func events(_ range: ClosedRange<Int64>, key: String? = nil) -> [GroupCandidate] {
        range.map { GroupCandidate(busSeq: $0, key: key) }
    }

    // MARK: - Delivery, ACK, refusals

    @Test("defaults are the documented ones")
    func defaults() {
        let settings = ConsumerGroupSettings()
        #expect(settings.ackWait == .seconds(30))
        #expect(settings.maxDeliver == 5)
        #expect(settings.backoff == [.seconds(1), .seconds(5), .seconds(30), .seconds(120)])
        #expect(settings.liveness == .seconds(3))
        #expect(settings.bufferLimit == 10_000)
        #expect(settings.maxCredit == 1000)
        #expect(settings.backoff(afterAttempt: 1) == .seconds(1))
        #expect(settings.backoff(afterAttempt: 4) == .seconds(120))
        #expect(settings.backoff(afterAttempt: 9) == .seconds(120))
        #expect(ConsumerGroupSettings(backoff: []).backoff(afterAttempt: 3) == .zero)
    }

    @Test("first deliveries carry attempt 1 and the ack deadline; acked events are never delivered again")
    func deliverAndAck() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        #expect(group.wantsEvents == 1)
        #expect(try group.join(member: a, name: "a", credit: 10, now: at(0)) == [])
        let actions = group.offer(Self.events(1...3), through: 5, now: at(10))
        #expect(actions == (1...3).map { .deliver(member: a, busSeq: $0, attempt: 1, deadline: at(30_010)) })
        #expect(group.readThrough == 5)
        #expect(group.cursor == 0)
        #expect(group.nextDeadline == at(30_010))

        #expect(try group.ack(member: a, busSeq: 2, attempt: 1, now: at(20)) == [])
        #expect(group.cursor == 0)
        #expect(try group.ack(member: a, busSeq: 1, attempt: 1, now: at(20)) == [])
        #expect(group.cursor == 2)
        #expect(try group.ack(member: a, busSeq: 3, attempt: 1, now: at(20)) == [])
        // Nothing unsettled: the cursor is at readThrough (4 and 5 did not match).
        #expect(group.cursor == 5)
        #expect(group.nextDeadline == at(20 + 3_600_000))
        #expect(group.tick(now: at(1_000_000)) == [])
        #expect(group.status.redeliveries == 0)
        #expect(group.takeChanges() == GroupChanges(cursor: 5))
        #expect(group.takeChanges().isEmpty)
    }

    @Test("an ACK from another member, with a stale attempt or for an unknown bus_seq is refused and changes nothing")
    func refusedAcks() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(ackWait: .seconds(1)))
        _ = try group.join(member: a, name: "a", credit: 1, now: at(0))
        _ = try group.join(member: b, name: "b", credit: 1, now: at(0))
        #expect(group.offer(Self.events(1...1), through: 1, now: at(0)) == [.deliver(member: a, busSeq: 1, attempt: 1, deadline: at(1000))])
        // Time-out: redelivered to b as attempt 2; a's attempt 1 is now stale.
        #expect(group.tick(now: at(1000)) == [.deliver(member: b, busSeq: 1, attempt: 2, deadline: at(2000))])
        _ = group.takeChanges()
        let status = group.status
        let deadline = group.nextDeadline

        func expectRefused(_ code: GroupRefusal.Code, _ body: (inout ConsumerGroupState) throws(GroupRefusal) -> [GroupAction]) {
            do {
                _ = try body(&group)
                Issue.record("expected \(code)")
            } catch {
                #expect(error.code == code)
                #expect(error.message.contains("bus_seq"))
            }
            #expect(group.status == status)
            #expect(group.nextDeadline == deadline)
            #expect(group.takeChanges().isEmpty)
        }
        expectRefused(.notHeld) { (g) throws(GroupRefusal) in try g.ack(member: a, busSeq: 1, attempt: 1, now: at(1100)) }
        expectRefused(.notHeld) { (g) throws(GroupRefusal) in try g.ack(member: a, busSeq: 1, attempt: 2, now: at(1100)) }
        expectRefused(.notHeld) { (g) throws(GroupRefusal) in try g.ack(member: b, busSeq: 1, attempt: 1, now: at(1100)) }
        expectRefused(.notHeld) { (g) throws(GroupRefusal) in try g.ack(member: b, busSeq: 99, attempt: 1, now: at(1100)) }
        expectRefused(.notHeld) { (g) throws(GroupRefusal) in try g.nack(member: a, busSeq: 1, attempt: 1, now: at(1100)) }
        expectRefused(.notHeld) { (g) throws(GroupRefusal) in try g.term(member: a, busSeq: 1, attempt: 1, now: at(1100)) }
        expectRefused(.notHeld) { (g) throws(GroupRefusal) in try g.inProgress(member: a, busSeq: 1, attempt: 1, now: at(1100)) }
        expectRefused(.notMember) { (g) throws(GroupRefusal) in try g.ack(member: Self.member(9), busSeq: 1, attempt: 2, now: at(1100)) }
        #expect(throws: GroupRefusal.self) { try group.join(member: c, name: "c", credit: 0, now: at(1100)) }
        #expect(throws: GroupRefusal.self) { try group.join(member: c, name: "c", credit: 1001, now: at(1100)) }
        #expect(group.status == status)

        // The holder is unaffected.
        #expect(try group.ack(member: b, busSeq: 1, attempt: 2, now: at(1200)) == [])
        #expect(group.cursor == 1)
        #expect(group.status.redeliveries == 1)
    }

    @Test("a refused input still counts as a sign of life")
    func refusalIsSignOfLife() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(liveness: .seconds(3)))
        _ = try group.join(member: a, name: "a", credit: 1, now: at(0))
        _ = try group.join(member: b, name: "b", credit: 1, now: at(0))
        #expect(throws: GroupRefusal.self) { try group.ack(member: a, busSeq: 7, attempt: 1, now: at(2000)) }
        #expect(throws: GroupRefusal.self) { try group.join(member: b, name: "b", credit: 0, now: at(2500)) }
        #expect(group.nextDeadline == at(5000))
        #expect(group.tick(now: at(3000)) == [])
        #expect(group.tick(now: at(5000)) == [.memberExpired(a)])
        #expect(group.tick(now: at(5500)) == [.memberExpired(b)])
        #expect(group.status.members.isEmpty)
    }

    // MARK: - NACK, TERM, IN-PROGRESS, time-outs

    @Test("NACKs without a delay back off 1 s, 5 s, 30 s, 120 s, 120 s; the NACK of the last delivery makes a dead letter")
    func nackBackoff() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(maxDeliver: 6))
        _ = try group.join(member: a, name: "a", credit: 5, now: at(0))
        _ = group.offer([GroupCandidate(busSeq: 1, key: "k"), GroupCandidate(busSeq: 2, key: "k")], through: 2, now: at(0))
        var now = 0
        for (attempt, wait) in [(1, 1000), (2, 5000), (3, 30_000), (4, 120_000), (5, 120_000)] {
            now += 100
            #expect(try group.nack(member: a, busSeq: 1, attempt: attempt, now: at(now)) == [])
            #expect(group.status.waiting == 1)
            // Event 2 waits behind its key's lowest event through the back-off.
            #expect(group.nextDeadline == at(now + wait))
            #expect(group.tick(now: at(now + wait - 1)) == [])
            now += wait
            #expect(group.tick(now: at(now)) == [.deliver(member: a, busSeq: 1, attempt: attempt + 1, deadline: at(now + 30_000))])
        }
        let actions = try group.nack(member: a, busSeq: 1, attempt: 6, code: "bad-row", message: "row 7 refused", now: at(now + 1))
        #expect(
            actions == [
                .deadLetter(DeadLetter(busSeq: 1, key: "k", attempts: 6, code: "bad-row", message: "row 7 refused")),
                .deliver(member: a, busSeq: 2, attempt: 1, deadline: at(now + 30_001)),
            ])
        #expect(group.cursor == 1)
        #expect(group.status.deadLetters == 1)
        #expect(group.status.redeliveries == 5)
    }

    @Test("a NACK's own delay wins; negative means none, and it is cut to maxNackDelay")
    func nackDelay() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 5, now: at(0))
        _ = group.offer(Self.events(1...1), through: 1, now: at(0))
        #expect(try group.nack(member: a, busSeq: 1, attempt: 1, delay: .milliseconds(250), now: at(10)) == [])
        #expect(group.tick(now: at(259)) == [])
        #expect(group.tick(now: at(260)) == [.deliver(member: a, busSeq: 1, attempt: 2, deadline: at(30_260))])
        #expect(
            try group.nack(member: a, busSeq: 1, attempt: 2, delay: .milliseconds(-5), now: at(300))
                == [.deliver(member: a, busSeq: 1, attempt: 3, deadline: at(30_300))])
        #expect(try group.nack(member: a, busSeq: 1, attempt: 3, delay: .seconds(86_400), now: at(400)) == [])
        #expect(group.nextDeadline == at(400 + 3_600_000))
    }

    @Test("a NACK with the default code names the member and attempt in the dead letter")
    func nackDefaultCode() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(maxDeliver: 1))
        _ = try group.join(member: a, name: "worker-a", credit: 5, now: at(0))
        _ = group.offer(Self.events(1...1), through: 1, now: at(0))
        let actions = try group.nack(member: a, busSeq: 1, attempt: 1, now: at(10))
        #expect(
            actions == [
                .deadLetter(DeadLetter(busSeq: 1, key: nil, attempts: 1, code: "nacked", message: "member worker-a NACKed attempt 1"))
            ])
    }

    @Test("TERM makes a dead letter at once, whatever the count, and releases the key")
    func term() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 5, now: at(0))
        _ = group.offer([GroupCandidate(busSeq: 1, key: "k"), GroupCandidate(busSeq: 2, key: "k")], through: 2, now: at(0))
        let actions = try group.term(member: a, busSeq: 1, attempt: 1, code: "invalid", message: "no such person", now: at(5))
        #expect(
            actions == [
                .deadLetter(DeadLetter(busSeq: 1, key: "k", attempts: 1, code: "invalid", message: "no such person")),
                .deliver(member: a, busSeq: 2, attempt: 1, deadline: at(30_005)),
            ])
        let second = try group.term(member: a, busSeq: 2, attempt: 1, now: at(6))
        #expect(
            second == [
                .deadLetter(DeadLetter(busSeq: 2, key: "k", attempts: 1, code: "terminated", message: "member a terminated attempt 1"))
            ])
        #expect(group.cursor == 2)
        let changes = group.takeChanges()
        #expect(changes.cursor == 2)
        #expect(changes.attempts.isEmpty && changes.settledAdded.isEmpty)
    }

    @Test("IN-PROGRESS moves the ack deadline to now + ackWait, as often as it is sent")
    func inProgress() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(ackWait: .seconds(1)))
        _ = try group.join(member: a, name: "a", credit: 5, now: at(0))
        _ = group.offer(Self.events(1...1), through: 1, now: at(0))
        #expect(try group.inProgress(member: a, busSeq: 1, attempt: 1, now: at(800)) == [])
        #expect(group.nextDeadline == at(1800))
        #expect(group.tick(now: at(1000)) == [])
        #expect(try group.inProgress(member: a, busSeq: 1, attempt: 1, now: at(1700)) == [])
        #expect(group.tick(now: at(1800)) == [])
        #expect(group.nextDeadline == at(2700))
        #expect(group.tick(now: at(2700)) == [.deliver(member: a, busSeq: 1, attempt: 2, deadline: at(3700))])
        #expect(group.entries[1]?.lastFailure?.code == "ack-timeout")
    }

    @Test("an ACK time-out takes the event back and gives it to another member; the late ACK is refused")
    func ackTimeoutRedelivers() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(ackWait: .seconds(1)))
        _ = try group.join(member: a, name: "a", credit: 1, now: at(0))
        _ = try group.join(member: b, name: "b", credit: 1, now: at(0))
        #expect(group.offer(Self.events(1...1), through: 1, now: at(0)) == [.deliver(member: a, busSeq: 1, attempt: 1, deadline: at(1000))])
        #expect(group.tick(now: at(999)) == [])
        // a and b hold nothing; b is preferred because it has not had a delivery yet.
        #expect(group.tick(now: at(1000)) == [.deliver(member: b, busSeq: 1, attempt: 2, deadline: at(2000))])
        #expect(group.entries[1]?.lastFailure?.code == "ack-timeout")
        #expect(throws: GroupRefusal.self) { try group.ack(member: a, busSeq: 1, attempt: 1, now: at(1001)) }
        #expect(try group.ack(member: b, busSeq: 1, attempt: 2, now: at(1002)) == [])
        #expect(group.cursor == 1)
    }

    @Test("after the last allowed delivery times out, the event is a dead letter with the last error ack-timeout")
    func maxDeliverAfterTimeouts() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(ackWait: .seconds(1), maxDeliver: 2))
        _ = try group.join(member: a, name: "a", credit: 1, now: at(0))
        _ = group.offer([GroupCandidate(busSeq: 1, key: "k"), GroupCandidate(busSeq: 2, key: "k")], through: 2, now: at(0))
        #expect(group.tick(now: at(1000)) == [.deliver(member: a, busSeq: 1, attempt: 2, deadline: at(2000))])
        let actions = group.tick(now: at(2000))
        #expect(actions.count == 2)
        guard case .deadLetter(let letter) = actions.first else {
            Issue.record("expected a dead letter first: \(actions)")
            return
        }
        #expect(letter.busSeq == 1 && letter.attempts == 2 && letter.code == "ack-timeout")
        #expect(letter.message.contains("attempt 2"))
        #expect(actions.last == .deliver(member: a, busSeq: 2, attempt: 1, deadline: at(3000)))
        #expect(group.cursor == 1)
    }

    @Test("restored counts that reached maxDeliver dead-letter before delivery, with the last error or max-deliver")
    func maxDeliverAtDispatch() throws {
        let snapshot = GroupSnapshot(
            cursor: 0,
            attempts: [
                1: GroupAttempts(count: 3, lastFailure: GroupFailure(code: "member-lost", message: "x")), 2: GroupAttempts(count: 3),
            ])
        var group = ConsumerGroupState(name: "g", settings: Self.settings(maxDeliver: 3), restoring: snapshot)
        _ = try group.join(member: a, name: "a", credit: 1, now: at(0))
        let actions = group.offer(Self.events(1...3), through: 3, now: at(0))
        #expect(
            actions == [
                .deadLetter(DeadLetter(busSeq: 1, key: nil, attempts: 3, code: "member-lost", message: "x")),
                .deadLetter(
                    DeadLetter(
                        busSeq: 2, key: nil, attempts: 3, code: "max-deliver", message: "bus_seq 2 was delivered 3 times (maxDeliver 3)")),
                .deliver(member: a, busSeq: 3, attempt: 1, deadline: at(30_000)),
            ])
        #expect(group.cursor == 2)
    }

    // MARK: - Members

    @Test("a silent member's 100 deliveries go to the other members at the liveness tick")
    func silentMember() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(liveness: .seconds(3)))
        _ = try group.join(member: a, name: "a", credit: 100, now: at(0))
        #expect(group.offer(Self.events(1...100), through: 100, now: at(0)).count == 100)
        _ = try group.join(member: b, name: "b", credit: 100, now: at(10))
        _ = try group.join(member: c, name: "c", credit: 100, now: at(10))
        group.heard(from: b, now: at(2500))
        group.heard(from: c, now: at(2500))
        #expect(group.nextDeadline == at(3000))
        #expect(group.tick(now: at(2999)) == [])
        let actions = group.tick(now: at(3000))
        #expect(actions.first == .memberExpired(a))
        let deliveries = actions.dropFirst().compactMap(\.delivery)
        #expect(deliveries.count == 100)
        #expect(deliveries.map(\.busSeq) == Array(1...100))
        #expect(deliveries.allSatisfy { $0.attempt == 2 && $0.deadline == at(33_000) })
        #expect(deliveries.filter { $0.member == b }.count == 50)
        #expect(deliveries.filter { $0.member == c }.count == 50)
        #expect(group.entries[1]?.lastFailure?.code == "member-lost")
        #expect(group.status.members.map(\.name) == ["b", "c"])
        #expect(throws: GroupRefusal.self) { try group.ack(member: a, busSeq: 1, attempt: 1, now: at(3001)) }
    }

    @Test("a graceful leave gives back what the member held at once, keeping counts")
    func leave() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 2, now: at(0))
        _ = group.offer(Self.events(1...2), through: 2, now: at(0))
        _ = try group.join(member: b, name: "b", credit: 5, now: at(1))
        #expect(
            group.leave(member: a, now: at(5)) == [
                .deliver(member: b, busSeq: 1, attempt: 2, deadline: at(30_005)),
                .deliver(member: b, busSeq: 2, attempt: 2, deadline: at(30_005)),
            ])
        #expect(group.entries[1]?.lastFailure?.code == "member-left")
        #expect(group.leave(member: a, now: at(6)) == [])
        #expect(throws: GroupRefusal.self) { try group.ack(member: a, busSeq: 1, attempt: 1, now: at(7)) }
    }

    @Test("credit bounds what a member holds; joining again changes it; work goes to the least loaded member")
    func credit() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 2, now: at(0))
        #expect(group.offer(Self.events(1...6), through: 6, now: at(0)).compactMap(\.delivery).map(\.busSeq) == [1, 2])
        #expect(group.status.ready == 4)
        #expect(try group.ack(member: a, busSeq: 1, attempt: 1, now: at(1)).compactMap(\.delivery).map(\.busSeq) == [3])
        #expect(try group.join(member: a, name: "a2", credit: 3, now: at(2)).compactMap(\.delivery).map(\.busSeq) == [4])
        #expect(group.status.members == [GroupStatus.Member(id: a, name: "a2", credit: 3, inFlight: 3)])
        // A new member gets the rest, one at a time while it holds fewer.
        let deliveries = try group.join(member: b, name: "b", credit: 3, now: at(3)).compactMap(\.delivery)
        #expect(deliveries.map(\.member) == [b, b])
        // Lowering credit takes nothing back but stops deliveries.
        _ = try group.join(member: a, name: "a", credit: 1, now: at(4))
        #expect(try group.ack(member: a, busSeq: 2, attempt: 1, now: at(5)) == [])
        #expect(group.status.members.first?.inFlight == 2)
    }

    @Test("ties between members go to the one that least recently got a delivery")
    func fairness() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        _ = try group.join(member: b, name: "b", credit: 10, now: at(0))
        _ = try group.join(member: c, name: "c", credit: 10, now: at(0))
        let first = group.offer(Self.events(1...5), through: 5, now: at(0)).compactMap(\.delivery).map(\.member)
        #expect(first == [a, b, c, a, b])
        _ = try group.ack(member: b, busSeq: 2, attempt: 1, now: at(1))
        _ = try group.ack(member: b, busSeq: 5, attempt: 1, now: at(1))
        _ = try group.ack(member: c, busSeq: 3, attempt: 1, now: at(1))
        // b and c hold nothing; c had its last delivery (3) before b (5), so it goes first
        // although b joined earlier.
        #expect(group.offer(Self.events(6...7), through: 7, now: at(2)).compactMap(\.delivery).map(\.member) == [c, b])
    }

    // MARK: - Keys

    @Test("a key's events go one at a time in bus_seq order; nil keys and other keys are not held up")
    func keyOrdering() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        _ = try group.join(member: b, name: "b", credit: 10, now: at(0))
        let offered = [
            GroupCandidate(busSeq: 1, key: "p1"), GroupCandidate(busSeq: 2, key: "p1"), GroupCandidate(busSeq: 3),
            GroupCandidate(busSeq: 4, key: "p2"), GroupCandidate(busSeq: 5, key: "p1"), GroupCandidate(busSeq: 6),
        ]
        #expect(group.offer(offered, through: 6, now: at(0)).compactMap(\.delivery).map(\.busSeq) == [1, 3, 4, 6])
        // 1 backs off: 2 still waits for it.
        #expect(try group.nack(member: a, busSeq: 1, attempt: 1, now: at(10)) == [])
        #expect(group.tick(now: at(500)) == [])
        #expect(group.tick(now: at(1010)).compactMap(\.delivery).map(\.busSeq) == [1])
        let holder = group.entries[1].flatMap { if case .inFlight(let h) = $0.phase { h.member } else { nil } }!
        #expect(try group.ack(member: holder, busSeq: 1, attempt: 2, now: at(1020)).compactMap(\.delivery).map(\.busSeq) == [2])
        // A dead letter releases the key too.
        let second = group.entries[2].flatMap { if case .inFlight(let h) = $0.phase { h.member } else { nil } }!
        let actions = try group.term(member: second, busSeq: 2, attempt: 1, now: at(1030))
        #expect(actions.compactMap(\.delivery).map(\.busSeq) == [5])
        #expect(group.cursor == 2)
    }

    @Test("a dead letter never blocks other keys, and the cursor passes settled events")
    func deadLetterDoesNotBlock() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(maxDeliver: 1))
        _ = try group.join(member: a, name: "a", credit: 1, now: at(0))
        _ = group.offer([GroupCandidate(busSeq: 1, key: "x"), GroupCandidate(busSeq: 2, key: "y")], through: 2, now: at(0))
        let actions = try group.nack(member: a, busSeq: 1, attempt: 1, now: at(1))
        #expect(actions.first.flatMap(\.deadLetter)?.busSeq == 1)
        #expect(actions.last == .deliver(member: a, busSeq: 2, attempt: 1, deadline: at(30_001)))
        #expect(group.cursor == 1)
        _ = try group.ack(member: a, busSeq: 2, attempt: 1, now: at(2))
        #expect(group.cursor == 2)
    }

    // MARK: - Buffer, persistence, replays

    @Test("the broker reads while the buffer has room, and only then")
    func bufferRefill() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(bufferLimit: 3))
        _ = try group.join(member: a, name: "a", credit: 1, now: at(0))
        #expect(group.wantsEvents == 1 && group.room == 3)
        _ = group.offer(Self.events(2...4), through: 10, now: at(0))
        #expect(group.wantsEvents == nil && group.room == 0)
        #expect(group.readThrough == 10)
        #expect(group.cursor == 1)
        _ = try group.ack(member: a, busSeq: 2, attempt: 1, now: at(1))
        #expect(group.wantsEvents == 11 && group.room == 1)
        _ = group.offer([], through: 20, now: at(2))
        #expect(group.wantsEvents == 21)
        _ = try group.ack(member: a, busSeq: 3, attempt: 1, now: at(3))
        _ = try group.ack(member: a, busSeq: 4, attempt: 1, now: at(4))
        #expect(group.cursor == 20)
        #expect(group.room == 3)
    }

    @Test("changes name the cursor, out-of-order settled numbers, attempt rows and replays, each once")
    func changes() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(ackWait: .seconds(1)))
        _ = try group.join(member: a, name: "a", credit: 5, now: at(0))
        _ = group.offer(Self.events(1...4), through: 4, now: at(0))
        _ = try group.ack(member: a, busSeq: 3, attempt: 1, now: at(1))
        _ = try group.nack(member: a, busSeq: 2, attempt: 1, code: "busy", message: "later", now: at(1))
        var changes = group.takeChanges()
        #expect(changes.cursor == nil)
        #expect(changes.settledAdded == [3])
        #expect(
            changes.attempts == [
                1: GroupAttempts(count: 1), 2: GroupAttempts(count: 1, lastFailure: GroupFailure(code: "busy", message: "later")),
                4: GroupAttempts(count: 1),
            ])
        _ = try group.ack(member: a, busSeq: 1, attempt: 1, now: at(2))
        _ = try group.term(member: a, busSeq: 4, attempt: 1, now: at(2))
        changes = group.takeChanges()
        #expect(changes.cursor == 1)
        #expect(changes.settledAdded == [4])
        #expect(changes.attemptsRemoved == [1, 4])
        #expect(changes.attempts.isEmpty)
        // The dead letter 4 is reopened above the cursor: its settled row goes.
        _ = group.reopen(busSeq: 4, key: nil, now: at(3))
        changes = group.takeChanges()
        #expect(changes.settledRemoved == [4])
        #expect(changes.attempts == [4: GroupAttempts(count: 1)])
        _ = group.tick(now: at(1001))
        _ = try group.ack(member: a, busSeq: 2, attempt: 2, now: at(1002))
        _ = try group.ack(member: a, busSeq: 4, attempt: 1, now: at(1003))
        changes = group.takeChanges()
        #expect(changes.cursor == 4)
        #expect(changes.attemptsRemoved == [2, 4])
        #expect(changes.settledAdded.isEmpty)
    }

    @Test("restoring: nothing in flight, settled numbers skipped, counts and last errors kept, replays delivered first")
    func restore() throws {
        let lost = GroupFailure(code: "member-lost", message: "gone")
        let snapshot = GroupSnapshot(
            cursor: 5, settled: [7, 3],
            attempts: [6: GroupAttempts(count: 2, lastFailure: lost), 9: GroupAttempts(count: 1), 2: GroupAttempts(count: 1)],
            replays: [GroupCandidate(busSeq: 4, key: "k")])
        var group = ConsumerGroupState(name: "g", settings: Self.settings(), restoring: snapshot)
        #expect(group.cursor == 5 && group.readThrough == 5)
        #expect(group.wantsEvents == 6)
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        #expect(group.status.pending == 1)
        let actions = group.offer(
            [GroupCandidate(busSeq: 6, key: "k"), GroupCandidate(busSeq: 7), GroupCandidate(busSeq: 8), GroupCandidate(busSeq: 9)],
            through: 12, now: at(1))
        // 6 waits for the replay of its key, 7 was settled.
        #expect(
            actions == [
                .deliver(member: a, busSeq: 8, attempt: 1, deadline: at(30_001)),
                .deliver(member: a, busSeq: 9, attempt: 2, deadline: at(30_001)),
            ])
        #expect(group.entries[6]?.lastFailure == lost)
        #expect(
            try group.ack(member: a, busSeq: 4, attempt: 1, now: at(2)) == [
                .deliver(member: a, busSeq: 6, attempt: 3, deadline: at(30_002))
            ])
        let changes = group.takeChanges()
        // 2 is a stale attempts row (at or below the cursor, no replay): it is deleted.
        #expect(changes.attemptsRemoved == [2])
        #expect(changes.replaysRemoved == [4])
        #expect(group.cursor == 5)
    }

    @Test("reopen below the cursor: a replay from attempt 0 that never moves the cursor and respects its key")
    func reopenReplay() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(maxDeliver: 1))
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        _ = group.offer(
            [GroupCandidate(busSeq: 1, key: "k"), GroupCandidate(busSeq: 2, key: "k"), GroupCandidate(busSeq: 3, key: "k")], through: 3,
            now: at(0))
        _ = try group.term(member: a, busSeq: 1, attempt: 1, now: at(1))
        #expect(group.cursor == 1)
        _ = group.takeChanges()
        // 2 is in flight: the replay of 1 waits for it, then goes before 3.
        #expect(group.reopen(busSeq: 1, key: "k", now: at(2)) == [])
        #expect(group.reopen(busSeq: 1, key: "k", now: at(2)) == [])
        #expect(group.status.replays == 1)
        #expect(group.takeChanges().replaysAdded == [GroupCandidate(busSeq: 1, key: "k")])
        #expect(
            try group.ack(member: a, busSeq: 2, attempt: 1, now: at(3)) == [
                .deliver(member: a, busSeq: 1, attempt: 1, deadline: at(30_003))
            ])
        #expect(group.cursor == 2)
        #expect(
            try group.ack(member: a, busSeq: 1, attempt: 1, now: at(4)) == [
                .deliver(member: a, busSeq: 3, attempt: 1, deadline: at(30_004))
            ])
        #expect(group.cursor == 2)
        let changes = group.takeChanges()
        #expect(changes.replaysRemoved == [1])
        // 2's row was written before; the replay of 1 was delivered and acked between two calls.
        #expect(changes.attemptsRemoved == [2])
        #expect(changes.attempts == [3: GroupAttempts(count: 1)])
        // A replay that fails again is a dead letter again.
        _ = group.reopen(busSeq: 2, key: "k", now: at(5))
        _ = try group.ack(member: a, busSeq: 3, attempt: 1, now: at(6))
        let again = try group.nack(member: a, busSeq: 2, attempt: 1, now: at(7))
        #expect(again.first.flatMap(\.deadLetter)?.busSeq == 2)
        #expect(group.cursor == 3)
        #expect(group.entries.isEmpty)
        // Reopening what is not a settled event of the group changes nothing.
        #expect(group.reopen(busSeq: 50, key: nil, now: at(8)) == [])
        #expect(group.entries.isEmpty)
    }

    @Test("reopen above the cursor: the event is unsettled again and holds the cursor back")
    func reopenAbove() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        _ = group.offer(Self.events(1...3), through: 3, now: at(0))
        _ = try group.term(member: a, busSeq: 2, attempt: 1, now: at(1))
        #expect(group.settledAbove == [2])
        #expect(group.reopen(busSeq: 2, key: nil, now: at(2)) == [.deliver(member: a, busSeq: 2, attempt: 1, deadline: at(30_002))])
        _ = try group.ack(member: a, busSeq: 1, attempt: 1, now: at(3))
        _ = try group.ack(member: a, busSeq: 3, attempt: 1, now: at(3))
        #expect(group.cursor == 1)
        _ = try group.ack(member: a, busSeq: 2, attempt: 1, now: at(4))
        #expect(group.cursor == 3)
    }

    @Test("nextDeadline is the earliest of ack deadlines, back-off ends and member liveness")
    func nextDeadline() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings(ackWait: .seconds(10), liveness: .seconds(3)))
        #expect(group.nextDeadline == nil)
        _ = try group.join(member: a, name: "a", credit: 10, now: at(0))
        #expect(group.nextDeadline == at(3000))
        _ = group.offer(Self.events(1...2), through: 2, now: at(0))
        group.heard(from: a, now: at(9000))
        #expect(group.nextDeadline == at(10_000))
        _ = try group.nack(member: a, busSeq: 1, attempt: 1, delay: .milliseconds(100), now: at(9000))
        #expect(group.nextDeadline == at(9100))
        _ = try group.ack(member: a, busSeq: 2, attempt: 1, now: at(9050))
        #expect(group.nextDeadline == at(9100))
        _ = group.tick(now: at(9100))
        #expect(group.nextDeadline == at(12_050))
    }

    // MARK: - Randomized

    @Test("random scenarios keep every promise", arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func simulation(seed: UInt64) async throws {
        var simulation = Simulation(seed: seed)
        for round in 0..<1500 {
            await yieldNowAndThen(round, every: 50)
            try simulation.step()
        }
        try simulation.drain()
        simulation.expectEverySettledOnce()
    }

    @Test(
        "changes written and loaded again give a machine that delivers exactly the unsettled events",
        arguments: [11, 12, 13, 14, 15, 16] as [UInt64])
    func snapshotEquivalence(seed: UInt64) async throws {
        var simulation = Simulation(seed: seed, reopens: true)
        var store = Store()
        let stop = 200 + Int(simulation.rng.next() % 1200)
        for step in 0..<stop {
            await yieldNowAndThen(step, every: 50)
            try simulation.step()
            // A group commit now and then.
            if step % 7 == 0 { store.apply(simulation.group.takeChanges()) }
        }
        store.apply(simulation.group.takeChanges())
        let original = simulation.group
        #expect(store.cursor == original.cursor)
        #expect(store.settled == original.settledAbove)
        #expect(
            store.attempts
                == original.entries.filter { $0.value.attempts > 0 || $0.value.lastFailure != nil }.mapValues {
                    GroupAttempts(count: $0.attempts, lastFailure: $0.lastFailure)
                })
        #expect(Set(store.replays.keys) == Set(original.entries.filter(\.value.isReplay).keys))

        var restored = ConsumerGroupState(name: "sim", settings: original.settings, restoring: store.snapshot)
        #expect(restored.cursor == original.cursor)
        #expect(restored.status.pending == 0)
        // The broker reads again from cursor + 1 to where the original had read, as far as the
        // buffer lets it: the original may hold more than `bufferLimit` (a reopen above the
        // cursor joins the buffer whatever its size), and the rest is read as the buffer drains.
        func readAgain() -> [GroupAction] {
            var actions: [GroupAction] = []
            while let from = restored.wantsEvents, from <= original.readThrough {
                let batch = simulation.journal.filter { $0.busSeq >= from && $0.busSeq <= original.readThrough }.prefix(restored.room)
                let through = batch.count == restored.room ? batch.last!.busSeq : original.readThrough
                actions += restored.offer(Array(batch), through: through, now: at(0))
            }
            return actions
        }
        _ = readAgain()
        if original.bufferedCount <= original.settings.bufferLimit {
            #expect(restored.unsettled == original.unsettled)
        } else {
            #expect(Set(restored.unsettled).isSubset(of: original.unsettled))
        }
        var delivered: [Int64: Int] = [:]
        var deadLettered: Set<Int64> = []
        let drainer = Self.member(99)
        var actions = try restored.join(member: drainer, name: "drainer", credit: original.settings.maxCredit, now: at(0))
        actions += readAgain()
        while !actions.isEmpty {
            var next: [GroupAction] = []
            for action in actions {
                switch action {
                case .deliver(_, let busSeq, let attempt, _):
                    #expect(delivered[busSeq] == nil)
                    delivered[busSeq] = attempt
                    next += try restored.ack(member: drainer, busSeq: busSeq, attempt: attempt, now: at(0))
                case .deadLetter(let letter): deadLettered.insert(letter.busSeq)
                case .memberExpired: Issue.record("no member expires here")
                }
            }
            actions = next + readAgain()
        }
        #expect(Set(delivered.keys).union(deadLettered) == Set(original.unsettled))
        #expect(Set(delivered.keys).isDisjoint(with: deadLettered))
        for (busSeq, attempt) in delivered { #expect(attempt == original.entries[busSeq]!.attempts + 1) }
        for busSeq in deadLettered { #expect(original.entries[busSeq]!.attempts >= original.settings.maxDeliver) }
        #expect(restored.cursor == original.readThrough)
    }

    // MARK: - Cost

    @Test("100 000 events through 4 members and 1 000 keys, all acked")
    func hundredThousand() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        let members = (1...4).map(Self.member)
        for (index, member) in members.enumerated() { _ = try group.join(member: member, name: "w\(index)", credit: 100, now: at(0)) }
        let total: Int64 = 100_000
        var next: Int64 = 1
        var queue: [(GroupMemberID, Int64, Int)] = []
        var head = 0
        var acked = 0
        var now = 0
        func take(_ actions: [GroupAction]) {
            for action in actions {
                if case .deliver(let member, let busSeq, let attempt, _) = action { queue.append((member, busSeq, attempt)) }
            }
        }
        while acked < total {
            if let from = group.wantsEvents, from <= total {
                let upTo = min(total, from + Int64(group.room) - 1)
                take(group.offer((from...upTo).map { GroupCandidate(busSeq: $0, key: "person-\($0 % 1000)") }, through: upTo, now: at(now)))
                next = upTo + 1
            }
            guard head < queue.count else {
                Issue.record("stalled with \(acked) acked")
                return
            }
            let (member, busSeq, attempt) = queue[head]
            head += 1
            take(try group.ack(member: member, busSeq: busSeq, attempt: attempt, now: at(now)))
            acked += 1
            if acked % 1000 == 0 { now += 1 }
        }
        #expect(next == total + 1)
        #expect(group.cursor == total)
        #expect(group.entries.isEmpty && group.keys.isEmpty)
        #expect(group.status.redeliveries == 0)
        // Each delivery took a bounded number of looks at candidates, never a buffer scan.
        #expect(group.dispatchExaminations <= 2 * Int(total))
    }

    @Test("10 000 buffered events behind three keys: dispatch work stays proportional to deliveries")
    func blockedKeysAreCheap() throws {
        var group = ConsumerGroupState(name: "g", settings: Self.settings())
        _ = try group.join(member: a, name: "a", credit: 1000, now: at(0))
        let events = (1...10_000 as ClosedRange<Int64>).map { GroupCandidate(busSeq: $0, key: "k\($0 % 3)") }
        var inFlight = group.offer(events, through: 10_000, now: at(0)).compactMap(\.delivery)
        #expect(inFlight.count == 3)
        var deliveries = 3
        var ticks = 0
        while let delivery = inFlight.popLast() {
            // Ticks with nothing due cost nothing, however much is buffered.
            _ = group.tick(now: at(1))
            ticks += 1
            let more = try group.ack(member: a, busSeq: delivery.busSeq, attempt: 1, now: at(1)).compactMap(\.delivery)
            deliveries += more.count
            inFlight += more
        }
        #expect(deliveries == 10_000)
        #expect(group.cursor == 10_000)
        #expect(group.dispatchExaminations <= 2 * deliveries + ticks)
    }
}

// MARK: - Helpers

extension GroupAction {
    struct Delivery: Equatable {
        var member: GroupMemberID
        var busSeq: Int64
        var attempt: Int
        var deadline: ContinuousClock.Instant
    }

    var delivery: Delivery? {
        guard case .deliver(let member, let busSeq, let attempt, let deadline) = self else { return nil }
        return Delivery(member: member, busSeq: busSeq, attempt: attempt, deadline: deadline)
    }

    var deadLetter: DeadLetter? {
        guard case .deadLetter(let letter) = self else { return nil }
        return letter
    }
}

/// The rows a broker would keep for a group, written by applying `GroupChanges` as documented.
struct Store {
    var cursor: Int64 = 0
    var settled: Set<Int64> = []
    var attempts: [Int64: GroupAttempts] = [:]
    var replays: [Int64: GroupCandidate] = [:]

    mutating func apply(_ changes: GroupChanges) {
        #expect(changes.settledAdded.isDisjoint(with: changes.settledRemoved))
        #expect(changes.attemptsRemoved.isDisjoint(with: changes.attempts.keys))
        #expect(changes.replaysRemoved.isDisjoint(with: changes.replaysAdded.map(\.busSeq)))
        if let moved = changes.cursor {
            #expect(moved > cursor)
            cursor = moved
            settled = settled.filter { $0 > moved }
        }
        settled.subtract(changes.settledRemoved)
        settled.formUnion(changes.settledAdded)
        for busSeq in changes.attemptsRemoved { attempts[busSeq] = nil }
        attempts.merge(changes.attempts) { $1 }
        for busSeq in changes.replaysRemoved { replays[busSeq] = nil }
        for replay in changes.replaysAdded { replays[replay.busSeq] = replay }
    }

    var snapshot: GroupSnapshot {
        GroupSnapshot(cursor: cursor, settled: settled, attempts: attempts, replays: Array(replays.values))
    }
}

/// A random life of one group: members join, leave, die and answer at random, time passes,
/// the broker reads the journal when asked. Every step checks the promises against a model
/// kept from the actions alone.
struct Simulation {
    typealias Instant = ContinuousClock.Instant

    var rng: SeededGenerator
    var group: ConsumerGroupState
    /// The matching events of the journal (bus_seqs with gaps: the others do not match).
    let journal: [GroupCandidate]
    let lastBusSeq: Int64
    let reopens: Bool
    var now = 0
    var nextMember = 100
    /// Members that answer and heartbeat; the dead ones are in the machine until it expires them.
    var alive: [GroupMemberID: Int] = [:]
    var dead: Set<GroupMemberID> = []
    /// Deliveries a member has not answered yet, as it sees them.
    var held: [GroupMemberID: [(busSeq: Int64, attempt: Int)]] = [:]
    /// The model: what was offered and not settled, per key and in all; settlements per event.
    var offeredUnsettled: Set<Int64> = []
    var keyPending: [String: [Int64]] = [:]
    var keyOf: [Int64: String?] = [:]
    var settlements: [Int64: Int] = [:]
    var deliveriesOf: [Int64: Int] = [:]
    var deadLetters: [DeadLetter] = []
    var lastCursor: Int64 = 0

    init(seed: UInt64, reopens: Bool = false) {
        rng = SeededGenerator(seed: seed)
        self.reopens = reopens
        let settings = ConsumerGroupSettings(
            ackWait: .milliseconds(1500), maxDeliver: 4, backoff: [.milliseconds(100), .milliseconds(300), .seconds(1)],
            liveness: .seconds(2), bufferLimit: 40, maxCredit: 8)
        group = ConsumerGroupState(name: "sim", settings: settings)
        var journal: [GroupCandidate] = []
        var rng = SeededGenerator(seed: seed ^ 0xABCD)
        for busSeq in Int64(1)...600 where rng.next() % 3 != 0 {
            let key: String? = rng.next() % 4 == 0 ? nil : "k\(rng.next() % 6)"
            journal.append(GroupCandidate(busSeq: busSeq, key: key))
        }
        self.journal = journal
        lastBusSeq = 600
    }

    func at(_ milliseconds: Int) -> Instant { GroupStateTests.at(milliseconds) }

    mutating func random(_ range: Range<Int>) -> Int { Int.random(in: range, using: &rng) }

    /// One random input, then the checks.
    mutating func step() throws {
        switch random(0..<100) {
        case 0..<10: read()
        case 10..<14 where alive.count + dead.count < 5:
            let id = GroupStateTests.member(nextMember)
            nextMember += 1
            alive[id] = nextMember
            apply(try group.join(member: id, name: "m\(nextMember)", credit: random(1..<6), now: at(now)))
        case 14..<16:
            guard let id = alive.keys.sorted(by: { $0.description < $1.description }).randomElement(using: &rng) else { break }
            alive[id] = nil
            held[id] = nil
            apply(group.leave(member: id, now: at(now)))
        case 16..<18:
            guard let id = alive.keys.sorted(by: { $0.description < $1.description }).randomElement(using: &rng) else { break }
            alive[id] = nil
            dead.insert(id)
            held[id] = nil
        case 18..<24 where reopens:
            guard let letter = deadLetters.randomElement(using: &rng) else { break }
            reopenModel(letter)
            apply(group.reopen(busSeq: letter.busSeq, key: letter.key, now: at(now)))
        case 24..<70: try answer()
        case 70..<74: try reconnect()
        default:
            now += random(0..<700)
            for id in alive.keys where random(0..<10) != 0 { group.heard(from: id, now: at(now)) }
            apply(group.tick(now: at(now)))
        }
        check()
    }

    /// The broker reads what the machine asks for, a random amount of it.
    mutating func read() {
        guard let from = group.wantsEvents, from <= lastBusSeq else { return }
        let want = min(group.room, random(1..<15))
        let batch = journal.filter { $0.busSeq >= from }.prefix(want)
        let through = batch.count == want ? batch.last!.busSeq : lastBusSeq
        for event in batch {
            offeredUnsettled.insert(event.busSeq)
            keyOf[event.busSeq] = event.key
            if let key = event.key { keyPending[key, default: []].append(event.busSeq) }
        }
        apply(group.offer(Array(batch), through: through, now: at(now)))
    }

    /// A live member answers one of its deliveries at random.
    mutating func answer() throws {
        let members = held.keys.filter { alive[$0] != nil && !(held[$0]?.isEmpty ?? true) }.sorted { $0.description < $1.description }
        guard let id = members.randomElement(using: &rng) else { return }
        let index = random(0..<held[id]!.count)
        let (busSeq, attempt) = held[id]![index]
        let choice = random(0..<100)
        let inFlight = isInFlight(busSeq, to: id, attempt: attempt)
        if choice >= 10 || !inFlight { held[id]!.remove(at: index) }
        do {
            switch choice {
            case 0..<10: apply(try group.inProgress(member: id, busSeq: busSeq, attempt: attempt, now: at(now)))
            case 10..<65:
                let actions = try group.ack(member: id, busSeq: busSeq, attempt: attempt, now: at(now))
                settle(busSeq)
                apply(actions)
            case 65..<85:
                let delay: Duration? = random(0..<2) == 0 ? nil : .milliseconds(random(0..<400))
                apply(try group.nack(member: id, busSeq: busSeq, attempt: attempt, delay: delay, now: at(now)))
            case 85..<90: apply(try group.term(member: id, busSeq: busSeq, attempt: attempt, now: at(now)))
            default: break  // dropped: the ack deadline will take it back
            }
            #expect(inFlight || choice >= 90, "an answer to a delivery not in flight was accepted")
        } catch {
            #expect(!inFlight, "refused \(error)")
            #expect(error.code == .notHeld)
        }
    }

    /// A live member's connection is replaced: the new one joins under the same name and credit,
    /// claiming what the member still holds; the old one falls silent (the machine expires it).
    /// A claim is granted only for what no one else has: in flight to the old connection under
    /// that attempt, or waiting and free by its key.
    mutating func reconnect() throws {
        guard let old = alive.keys.sorted(by: { $0.description < $1.description }).randomElement(using: &rng),
            let member = group.members[old]
        else { return }
        // As a consumer keeps them: the latest delivery of each event it still works on.
        var latest: [Int64: Int] = [:]
        for (busSeq, attempt) in held[old] ?? [] { latest[busSeq] = max(latest[busSeq] ?? 0, attempt) }
        let holding = latest.sorted { $0.key < $1.key }.map { HeldDelivery(busSeq: $0.key, attempt: $0.value) }
        let before = Dictionary(holding.map { ($0.busSeq, group.entries[$0.busSeq]?.phase) }, uniquingKeysWith: { first, _ in first })
        let new = GroupStateTests.member(nextMember)
        nextMember += 1
        var granted: [Int64] = []
        let actions = try group.join(member: new, name: member.name, credit: member.credit, holding: holding, held: &granted, now: at(now))
        for claim in holding {
            let isGranted = granted.contains(claim.busSeq)
            #expect(isGranted == isInFlight(claim.busSeq, to: new, attempt: claim.attempt), "claim of \(claim.busSeq)")
            if isGranted, case .inFlight(let holder)? = before[claim.busSeq] {
                #expect(holder.member == old, "bus_seq \(claim.busSeq) was taken from another member")
            }
        }
        #expect(group.members[new]!.inFlight.count <= member.credit)
        held[new] = holding.filter { granted.contains($0.busSeq) }.map { ($0.busSeq, $0.attempt) }
        held[old] = nil
        alive[old] = nil
        dead.insert(old)
        alive[new] = nextMember
        apply(actions)
    }

    func isInFlight(_ busSeq: Int64, to member: GroupMemberID, attempt: Int) -> Bool {
        guard case .inFlight(let holder) = group.entries[busSeq]?.phase else { return false }
        return holder.member == member && holder.attempt == attempt
    }

    mutating func settle(_ busSeq: Int64) {
        settlements[busSeq, default: 0] += 1
        if offeredUnsettled.remove(busSeq) != nil, let key = keyOf[busSeq] ?? nil {
            keyPending[key]!.removeAll { $0 == busSeq }
        }
    }

    mutating func reopenModel(_ letter: DeadLetter) {
        guard group.entries[letter.busSeq] == nil, letter.busSeq <= group.readThrough else { return }
        if letter.busSeq > group.cursor, !group.settledAbove.contains(letter.busSeq) { return }
        settlements[letter.busSeq, default: 0] -= 1
        deliveriesOf[letter.busSeq] = 0
        offeredUnsettled.insert(letter.busSeq)
        if let key = letter.key {
            keyPending[key, default: []].append(letter.busSeq)
            keyPending[key]!.sort()
        }
    }

    /// Checks every action against the model.
    mutating func apply(_ actions: [GroupAction]) {
        for action in actions {
            switch action {
            case .deliver(let member, let busSeq, let attempt, let deadline):
                #expect(offeredUnsettled.contains(busSeq), "delivered \(busSeq), which is settled or was never offered")
                #expect(attempt == (deliveriesOf[busSeq] ?? 0) + 1, "attempts of \(busSeq) counted wrong")
                #expect(attempt <= group.settings.maxDeliver)
                #expect(deadline == at(now) + group.settings.ackWait)
                deliveriesOf[busSeq] = attempt
                // A key's events go in bus_seq order: this is its lowest unsettled event.
                if let key = keyOf[busSeq] ?? nil {
                    #expect(keyPending[key]?.first == busSeq, "bus_seq \(busSeq) of \(key) overtook \(keyPending[key] ?? [])")
                }
                #expect(group.members[member] != nil)
                if alive[member] != nil { held[member, default: []].append((busSeq, attempt)) }
            case .deadLetter(let letter):
                #expect(offeredUnsettled.contains(letter.busSeq))
                deadLetters.append(letter)
                settle(letter.busSeq)
            case .memberExpired(let member):
                #expect(dead.contains(member) || alive[member] != nil)
                dead.remove(member)
                if alive[member] != nil {
                    // A live member whose heartbeats happened to lapse: it is gone, it joins again.
                    alive[member] = nil
                    held[member] = nil
                }
            }
        }
    }

    /// The machine-wide promises, after every step.
    mutating func check() {
        var keysInFlight: [String: Int] = [:]
        for entry in group.entries.values {
            if case .inFlight(let holder) = entry.phase {
                if let key = entry.key { keysInFlight[key, default: 0] += 1 }
                #expect(group.members[holder.member]?.inFlight.contains(entry.busSeq) == true)
            }
        }
        #expect(keysInFlight.values.allSatisfy { $0 == 1 }, "two events of a key in flight: \(keysInFlight)")
        for member in group.members.values { #expect(member.inFlight.count <= member.credit) }
        #expect(group.cursor >= lastCursor, "the cursor moved back")
        lastCursor = group.cursor
        #expect(group.cursor <= group.readThrough)
        let lowestBuffered = offeredUnsettled.filter { $0 > group.cursor }.min()
        #expect(group.cursor == min(group.readThrough, (lowestBuffered ?? .max) - 1))
        #expect(Set(group.unsettled) == offeredUnsettled)
        let status = group.status
        #expect(status.pending + status.waiting + status.ready == offeredUnsettled.count)
    }

    /// Everyone left alive answers everything until the journal is read and all is settled.
    mutating func drain() throws {
        let drainer = GroupStateTests.member(7)
        alive[drainer] = 0
        apply(try group.join(member: drainer, name: "drainer", credit: 8, now: at(now)))
        var rounds = 0
        while (group.wantsEvents ?? 0) <= lastBusSeq || !group.entries.isEmpty {
            rounds += 1
            guard rounds < 100_000 else {
                Issue.record("drain did not finish")
                return
            }
            read()
            for id in alive.keys.sorted(by: { $0.description < $1.description }) {
                while let (busSeq, attempt) = held[id]?.popLast() {
                    if isInFlight(busSeq, to: id, attempt: attempt) {
                        let actions = try group.ack(member: id, busSeq: busSeq, attempt: attempt, now: at(now))
                        settle(busSeq)
                        apply(actions)
                    }
                }
            }
            now += 500
            for id in alive.keys { group.heard(from: id, now: at(now)) }
            apply(group.tick(now: at(now)))
            if alive[drainer] == nil {
                alive[drainer] = 0
                apply(try group.join(member: drainer, name: "drainer", credit: 8, now: at(now)))
            }
            check()
        }
    }

    /// Every matching event was acked or dead-lettered exactly once.
    func expectEverySettledOnce() {
        #expect(group.cursor == lastBusSeq)
        for event in journal {
            #expect(settlements[event.busSeq] == 1, "bus_seq \(event.busSeq) settled \(settlements[event.busSeq] ?? 0) times")
        }
        #expect(settlements.count == journal.count)
    }
}
