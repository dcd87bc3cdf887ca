import Foundation
import SwitchboardProtocol
import Testing

@testable import SwitchboardBus

// The client-side protocol rules, driven with instants: no socket, no clock, no waiting.

private let t0 = ContinuousClock.now
private func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }

@Suite("Worker liveness")
struct WorkerLivenessTests {
    static func liveness(heartbeat: Int = 100, liveness: Int = 3) -> WorkerLiveness {
        var value = WorkerLiveness(
            settings: .init(
                heartbeat: .milliseconds(heartbeat), liveness: liveness, reconnectInitial: .milliseconds(50),
                reconnectMax: .milliseconds(400)),
            now: t0)
        value.connected(now: t0)
        return value
    }

    @Test("a HEARTBEAT is due one interval after the last thing sent, whatever was sent")
    func heartbeatAfterSilence() {
        var value = Self.liveness()
        #expect(value.nextHeartbeat == at(100))
        #expect(!value.heartbeatDue(now: at(99)) && value.heartbeatDue(now: at(100)))
        value.sent(now: at(60))  // a FINAL
        #expect(value.nextHeartbeat == at(160))
        value.sent(now: at(40))  // an older send reported late moves nothing back
        #expect(value.nextHeartbeat == at(160))
    }

    @Test("the broker is silent after interval × liveness with nothing heard; anything heard starts the count again")
    func silence() {
        var value = Self.liveness()
        #expect(value.silenceDeadline == at(300))
        #expect(!value.brokerSilent(now: at(299)))
        value.heard(heartbeat: false, now: at(250))
        #expect(!value.brokerSilent(now: at(549)) && value.brokerSilent(now: at(550)))
    }

    @Test("after a silence the reconnect waits back off to the maximum; a DISCONNECT resets them and comes back at once")
    func backoff() {
        var value = Self.liveness()
        let waits = (0..<5).map { _ in value.ended(.brokerSilent) }
        #expect(waits == [50, 100, 200, 400, 400].map { .milliseconds($0) })
        #expect(value.ended(.disconnected) == .zero)
        #expect(value.ended(.brokerSilent) == .milliseconds(50))
    }

    @Test("a worker with a shorter heartbeat than its broker learns the broker's interval instead of reconnecting again and again")
    func learnsBrokerInterval() {
        // Ours: 100 ms × 3. The broker's: 1 s, with its first HEARTBEAT 1 s after our READY.
        var value = Self.liveness()
        var reconnects = 0
        var brokerBeat = at(1000)
        for _ in 0..<100 where value.brokerInterval != .seconds(1) {
            let silence = value.silenceDeadline
            if silence <= brokerBeat {
                // Silent before the broker's next HEARTBEAT: reconnect after the back-off; the
                // broker's HEARTBEATs meanwhile reach no one.
                reconnects += 1
                let now = silence + value.ended(.brokerSilent)
                value.connected(now: now)
                while brokerBeat < now { brokerBeat = brokerBeat + .seconds(1) }
            } else {
                value.heard(heartbeat: true, now: brokerBeat)
                brokerBeat = brokerBeat + .seconds(1)
            }
        }
        // 300 ms, then 600 ms, then 1.2 s: past the broker's first HEARTBEAT, and the second one
        // sets the interval to the broker's.
        #expect(reconnects == 2)
        #expect(value.brokerInterval == .seconds(1))
        // From then on, a HEARTBEAT a second keeps it connected for good.
        for _ in 0..<60 {
            #expect(!value.brokerSilent(now: brokerBeat - .milliseconds(1)))
            value.heard(heartbeat: true, now: brokerBeat)
            brokerBeat = brokerBeat + .seconds(1)
        }
        #expect(value.brokerInterval == .seconds(1) && value.silenceDeadline == brokerBeat + .seconds(2))
    }

    @Test("HEARTBEATs around a request say nothing of the broker's interval")
    func requestResetsMeasurement() {
        var value = Self.liveness()
        value.heard(heartbeat: true, now: at(100))
        value.requestAnswered(now: at(5000))
        value.heard(heartbeat: true, now: at(5010))
        #expect(value.brokerInterval == .milliseconds(100))
        value.heard(heartbeat: true, now: at(5500))
        #expect(value.brokerInterval == .milliseconds(490))
        // Never below our own interval, never above a minute.
        value.heard(heartbeat: true, now: at(5510))
        #expect(value.brokerInterval == .milliseconds(100))
        value.heard(heartbeat: true, now: at(500_000))
        #expect(value.brokerInterval == .seconds(60))
    }
}

@Suite("Member session")
struct MemberSessionTests {
    static func joined(heartbeat: Int64 = 100, liveness: Int64 = 500, held: [Int64]? = [], echoes: Bool? = true) -> JoinedHeader {
        JoinedHeader(
            group: "eto", member: "m", credit: 4, ackWaitMilliseconds: 30_000, heartbeatMilliseconds: heartbeat,
            livenessMilliseconds: liveness, maxDeliver: 5, backoffMilliseconds: [], cursor: 0, head: 0, held: held, echoes: echoes)
    }

    @Test("a JOIN waits for JOINED until its time is up; a failed one is tried again after a second")
    func joining() {
        var session = MemberSession(joinTimeout: .seconds(5))
        #expect(session.phase == .away && session.connection == 0)
        #expect(session.joining(now: t0).isEmpty)
        #expect(session.joinDeadline == at(5000))
        #expect(session.joinFailed() == .seconds(1))
        #expect(session.phase == .away && session.joinDeadline == nil)
    }

    @Test("a member heartbeats every half heartbeat, busy or not, and gives up a broker silent for its liveness")
    func heartbeatAndSilence() {
        var session = MemberSession(joinTimeout: .seconds(5))
        _ = session.joining(now: t0)
        #expect(session.joined(Self.joined(), now: t0) == 1)
        #expect(session.tick(now: at(20)) == .wait(until: at(50)))
        #expect(session.tick(now: at(50)) == .sendHeartbeat)
        #expect(session.sending(on: 1) == .send)
        let first = session.heartbeatGoingOut(now: at(50))
        #expect(session.tick(now: at(60)) == .wait(until: at(100)))
        // Settles going out do not put the heartbeat off: its echo is what keeps the fence.
        session.delivered(busSeq: 1, attempt: 1)
        #expect(session.sending(on: 1, settling: (1, 1, final: true)) == .send)
        #expect(session.tick(now: at(100)) == .sendHeartbeat)
        #expect(session.heartbeatGoingOut(now: at(100)) != first)
        session.heard(now: at(150))
        #expect(session.tick(now: at(600)) == .sendHeartbeat)
        _ = session.heartbeatGoingOut(now: at(600))
        #expect(session.tick(now: at(640)) == .wait(until: at(650)))
        #expect(session.tick(now: at(650)) == .rejoin(reason: "the broker was silent for 0.5 seconds"))
        // The silence is at least three of the broker's heartbeats, whatever its liveness says.
        session.lost()
        _ = session.joining(now: at(700))
        session.joined(Self.joined(heartbeat: 200, liveness: 100), now: at(700))
        #expect(session.tick(now: at(1299)) != .rejoin(reason: "the broker was silent for 0.6 seconds"))
        #expect(session.tick(now: at(1300)) == .rejoin(reason: "the broker was silent for 0.6 seconds"))
    }

    @Test("deliveries are claimed back on the next connection; the broker's answer says which this member keeps")
    func claims() {
        var session = MemberSession(joinTimeout: .seconds(5))
        _ = session.joining(now: t0)
        session.joined(Self.joined(), now: t0)
        session.delivered(busSeq: 7, attempt: 1)
        session.delivered(busSeq: 3, attempt: 2)
        session.delivered(busSeq: 9, attempt: 1)
        // PROGRESS goes out and keeps the delivery; a final settle ends it.
        #expect(session.sending(on: 1, settling: (9, 1, final: false)) == .send)
        #expect(session.sending(on: 1, settling: (9, 1, final: true)) == .send)
        session.lost()
        #expect(session.joining(now: at(20)) == [HeldDelivery(busSeq: 3, attempt: 2), HeldDelivery(busSeq: 7, attempt: 1)])
        #expect(session.joined(Self.joined(held: [7]), now: at(30)) == 2)
        // 7 was kept: it belongs to connection 2 now. 3 went to another member.
        #expect(session.isCurrent(busSeq: 7, attempt: 1, cameOn: 1))
        #expect(!session.isCurrent(busSeq: 3, attempt: 2, cameOn: 1))
        #expect(session.sending(on: 1, settling: (3, 2, final: true)) == .replaced)
        #expect(session.sending(on: 1, settling: (7, 1, final: true)) == .send)
        // A redelivery of 7 (attempt 2) on the new connection is its own delivery.
        session.delivered(busSeq: 7, attempt: 2)
        #expect(!session.isCurrent(busSeq: 7, attempt: 1, cameOn: 1))
        #expect(session.isCurrent(busSeq: 7, attempt: 2, cameOn: 2))
        session.lost()
        #expect(session.joining(now: at(50)) == [HeldDelivery(busSeq: 7, attempt: 2)])
    }

    @Test(
        "a delivery is held while the broker read, within its liveness less a heartbeat, something sent on its connection; in doubt after and between connections, lost when not given back"
    )
    func standing() {
        var session = MemberSession(joinTimeout: .seconds(5))
        _ = session.joining(now: t0)
        // JOINED came 30 ms after the JOIN went out: the proof dates from the JOIN.
        session.joined(Self.joined(heartbeat: 100, liveness: 500), now: at(30))
        session.delivered(busSeq: 1, attempt: 1)
        session.delivered(busSeq: 2, attempt: 1)
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(399)) == .held)
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(400)) == .inDoubt)
        // Hearing the broker proves nothing: the member's own messages may be held up.
        session.heard(now: at(420))
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(420)) == .inDoubt)
        // A HEARTBEAT sent at 300 comes back at 420: held until 300 + 400.
        let late = session.heartbeatGoingOut(now: at(300))
        let early = session.heartbeatGoingOut(now: at(200))
        session.answered(echo: late)
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(699)) == .held)
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(700)) == .inDoubt)
        // An older echo answered afterwards (or an unknown one) does not move the proof back.
        session.answered(echo: early)
        session.answered(echo: 12345)
        #expect(session.lastAnswered == at(300))
        session.heard(now: at(480))
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(500)) == .held)
        session.lost()
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(501)) == .inDoubt)
        _ = session.joining(now: at(510))
        #expect(session.standing(busSeq: 2, attempt: 1, cameOn: 1, now: at(511)) == .inDoubt)
        session.joined(Self.joined(held: [1]), now: at(520))
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(521)) == .held)
        #expect(session.standing(busSeq: 2, attempt: 1, cameOn: 1, now: at(521)) == .lost)
        // Lost stays lost, whatever is heard later.
        session.heard(now: at(600))
        #expect(session.standing(busSeq: 2, attempt: 1, cameOn: 1, now: at(601)) == .lost)
    }

    @Test("with a broker that does not answer echoes (JOINED without `echoes`), the last message heard stands in for the proof")
    func standingWithoutEchoes() {
        var session = MemberSession(joinTimeout: .seconds(5))
        _ = session.joining(now: t0)
        session.joined(Self.joined(heartbeat: 100, liveness: 500, echoes: nil), now: at(30))
        session.delivered(busSeq: 1, attempt: 1)
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(429)) == .held)
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(430)) == .inDoubt)
        session.heard(now: at(500))
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(899)) == .held)
        #expect(session.standing(busSeq: 1, attempt: 1, cameOn: 1, now: at(900)) == .inDoubt)
    }

    @Test(
        "a final settle made while no connection is joined keeps its delivery claimed, goes out on the next connection if it was given back, else is replaced"
    )
    func settleBetweenConnections() {
        var session = MemberSession(joinTimeout: .seconds(5))
        _ = session.joining(now: t0)
        session.joined(Self.joined(), now: t0)
        session.delivered(busSeq: 4, attempt: 1)
        session.delivered(busSeq: 5, attempt: 1)
        session.lost()
        // Away, then joining: a heartbeat, a PROGRESS or a final settle cannot go out yet.
        #expect(session.sending(on: 1) == .notJoined)
        #expect(session.sending(on: 1, settling: (4, 1, final: true)) == .notJoined)
        #expect(session.joining(now: at(10)) == [HeldDelivery(busSeq: 4, attempt: 1), HeldDelivery(busSeq: 5, attempt: 1)])
        #expect(session.sending(on: 1, settling: (4, 1, final: false)) == .notJoined)
        #expect(session.sending(on: 1, settling: (5, 1, final: true)) == .notJoined)
        session.joined(Self.joined(held: [4]), now: at(20))
        #expect(session.sending(on: 1, settling: (4, 1, final: true)) == .send)
        #expect(session.sending(on: 1, settling: (5, 1, final: true)) == .replaced)
        // Both are settled now: the next JOIN claims neither.
        session.lost()
        #expect(session.joining(now: at(30)).isEmpty)
    }

    @Test("heartbeat echoes wrap within the protocol's range, and only the newest few wait for their answer")
    func echoes() {
        var session = MemberSession(joinTimeout: .seconds(5))
        _ = session.joining(now: t0)
        session.joined(Self.joined(heartbeat: 100, liveness: 500), now: t0)
        var sent: [Int64] = []
        for i in 0..<40 { sent.append(session.heartbeatGoingOut(now: at(i))) }
        #expect(Set(sent).count == 40 && sent.allSatisfy { (0...HeartbeatHeader.maximumEcho).contains($0) })
        // The oldest were forgotten: their answers prove nothing more.
        session.answered(echo: sent[0])
        #expect(session.lastAnswered == t0)
        session.answered(echo: sent[39])
        #expect(session.lastAnswered == at(39))
    }

    @Test("a JOIN claims at most the protocol's limit, lowest bus_seq first")
    func claimLimit() {
        var session = MemberSession(joinTimeout: .seconds(5))
        _ = session.joining(now: t0)
        session.joined(Self.joined(), now: t0)
        let count = JoinHeader.maximumHolding + 10
        for busSeq in (1...Int64(count)).reversed() { session.delivered(busSeq: busSeq, attempt: 1) }
        let holding = session.joining(now: at(10))
        #expect(holding.count == JoinHeader.maximumHolding)
        #expect(holding.map(\.busSeq) == Array(1...Int64(JoinHeader.maximumHolding)))
    }
}

@Suite("Lazy Pirate")
struct LazyPirateTests {
    @Test("an idempotent request is sent on the shared socket, then again on fresh sockets a third of its time apart, then times out")
    func idempotentRetries() {
        var pirate = LazyPirate(timeout: .milliseconds(900), attemptTimeout: nil, idempotent: true, now: t0)
        #expect(pirate.next(now: t0) == .sendOnSharedSocket(until: at(300)))
        pirate.sent()
        #expect(pirate.next(now: at(300)) == .sendOnFreshSocket(until: at(600)))
        pirate.sent()
        #expect(pirate.next(now: at(600)) == .sendOnFreshSocket(until: at(900)))
        pirate.sent()
        #expect(pirate.next(now: at(900)) == .timedOut)
        #expect(pirate.attempts == 3)
    }

    @Test("no attempt runs past the deadline, whatever the attempt time")
    func attemptsStopAtTheDeadline() {
        var pirate = LazyPirate(timeout: .milliseconds(500), attemptTimeout: .milliseconds(400), idempotent: true, now: t0)
        #expect(pirate.next(now: t0) == .sendOnSharedSocket(until: at(400)))
        pirate.sent()
        #expect(pirate.next(now: at(400)) == .sendOnFreshSocket(until: at(500)))
        var long = LazyPirate(timeout: .milliseconds(500), attemptTimeout: .seconds(9), idempotent: true, now: t0)
        #expect(long.next(now: t0) == .sendOnSharedSocket(until: at(500)))
    }

    @Test("a request that went out and is not idempotent gets one attempt of its whole time")
    func notIdempotentOnce() {
        var pirate = LazyPirate(timeout: .milliseconds(900), attemptTimeout: .milliseconds(100), idempotent: false, now: t0)
        #expect(pirate.next(now: t0) == .sendOnSharedSocket(until: at(900)))
        pirate.sent()
        #expect(pirate.next(now: at(900)) == .timedOut)
    }

    @Test("after a PARTIAL a stream is never sent again: the caller would see replies twice")
    func noResendAfterPartial() {
        var pirate = LazyPirate(timeout: .milliseconds(900), attemptTimeout: nil, idempotent: true, now: t0)
        _ = pirate.next(now: t0)
        pirate.sent()
        pirate.partial()
        #expect(pirate.next(now: at(300)) == .timedOut)
    }

    @Test("a request no connection took is sent again on a fresh socket even if not idempotent, and is unreachable at the deadline")
    func notTaken() {
        var pirate = LazyPirate(timeout: .milliseconds(900), attemptTimeout: nil, idempotent: false, now: t0)
        #expect(pirate.next(now: t0) == .sendOnSharedSocket(until: at(900)))
        // The shared socket's connection was refused: nothing went out in the attempt's time.
        #expect(pirate.next(now: at(900)) == .unreachable)

        var idempotent = LazyPirate(timeout: .milliseconds(900), attemptTimeout: nil, idempotent: true, now: t0)
        _ = idempotent.next(now: t0)
        #expect(idempotent.next(now: at(300)) == .sendOnFreshSocket(until: at(600)))
        #expect(idempotent.next(now: at(600)) == .sendOnFreshSocket(until: at(900)))
        #expect(idempotent.next(now: at(900)) == .unreachable)
        // Once any attempt went out, the end is a time-out: a worker may have seen it.
        var mixed = LazyPirate(timeout: .milliseconds(900), attemptTimeout: nil, idempotent: true, now: t0)
        _ = mixed.next(now: t0)
        _ = mixed.next(now: at(300))
        mixed.sent()
        _ = mixed.next(now: at(600))
        #expect(mixed.next(now: at(900)) == .timedOut)
    }

    @Test("a not-idempotent request that no connection took in a short attempt is sent again, and not after it went out")
    func notTakenThenSent() {
        // A send can also end early (the socket closed): the request goes again while time is left.
        var pirate = LazyPirate(timeout: .milliseconds(900), attemptTimeout: nil, idempotent: false, now: t0)
        _ = pirate.next(now: t0)
        #expect(pirate.next(now: at(100)) == .sendOnFreshSocket(until: at(900)))
        pirate.sent()
        #expect(pirate.next(now: at(500)) == .timedOut)
    }

    @Test("once the final reply has come, the answer is finished, before and after the deadline")
    func finished() {
        var pirate = LazyPirate(timeout: .milliseconds(900), attemptTimeout: nil, idempotent: true, now: t0)
        _ = pirate.next(now: t0)
        pirate.sent()
        pirate.finished()
        #expect(pirate.next(now: at(100)) == .finished)
        #expect(pirate.next(now: at(5000)) == .finished)
    }
}
