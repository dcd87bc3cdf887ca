import Foundation
import SwitchboardProtocol
import Testing

@testable import SwitchboardBus

/// The outbox's delivery rules driven by hand: a manual clock (`at(ms)`), no sockets, no
/// files, no sleeps. `OutboxTests` proves the same rules hold over real sockets and SQLite.
@Suite("Outbox delivery rules")
struct OutboxDeliveryTests {
    typealias Instant = ContinuousClock.Instant
    typealias Send = OutboxDelivery.Send

    /// The origin of every test's manual clock. Read once; the machine never reads a clock.
    static let t0 = ContinuousClock.now
    func at(_ milliseconds: Int) -> Instant { Self.t0 + .milliseconds(milliseconds) }

    static let endpoint = "tcp://broker.test:5560"

    func machine(
        window: Int = 4, resendAfter: Duration = .seconds(2), idlePoll: Duration = .milliseconds(200),
        heartbeat: Duration = .seconds(5), deadline: Instant? = nil
    ) -> OutboxDelivery {
        OutboxDelivery(
            settings: .init(window: window, resendAfter: resendAfter, idlePoll: idlePoll, heartbeat: heartbeat),
            endpoint: Self.endpoint, deadline: deadline, start: at(0))
    }

    func entry(_ seq: Int64) -> OutboxEntry {
        OutboxEntry(
            producerSeq: seq, eventID: "event-\(seq)", type: CheckIn.type, header: Data("h\(seq)".utf8), content: Data("{}".utf8),
            attempts: 0)
    }

    func entries(_ seqs: ClosedRange<Int64>) -> [OutboxEntry] { seqs.map(entry) }

    func ack(_ seq: Int64, busSeq: Int64, duplicate: Bool = false) -> OutboxDelivery.Answer {
        .ack(AckHeader(eventID: "event-\(seq)", producer: "kiosk-1", producerSeq: seq, busSeq: busSeq, duplicate: duplicate))
    }

    func nack(
        _ seq: Int64, _ code: ProtocolError.Code, _ reason: String, retryable: Bool, producerHead: Int64? = nil
    ) -> OutboxDelivery.Answer {
        .nack(
            NackHeader(
                eventID: "event-\(seq)", producer: "kiosk-1", producerSeq: seq, code: code, reason: reason, retryable: retryable,
                producerHead: producerHead))
    }

    /// Loads `loaded` and makes the round's sends, each completing at `now`; returns them.
    @discardableResult
    func round(
        _ machine: inout OutboxDelivery, loading loaded: [OutboxEntry] = [], keepWaiting: Bool = false, at now: Instant
    ) -> [Send] {
        _ = machine.beginRound(at: now)
        guard machine.loaded(loaded, keepWaiting: keepWaiting, at: now) == .proceed else { return [] }
        var sends: [Send] = []
        while let send = machine.nextSend() {
            machine.sendCompleted(send, at: now)
            sends.append(send)
        }
        _ = machine.endSends()
        return sends
    }

    func firstSends(_ seqs: [Int64]) -> [Send] { seqs.map { Send(entry: entry($0), isResend: false) } }
    func resends(_ seqs: [Int64]) -> [Send] { seqs.map { Send(entry: entry($0), isResend: true) } }

    // MARK: - Filling the window

    @Test("the window is never overfilled: loads ask only for the room left, and extra entries given are not sent")
    func windowLimit() {
        var delivery = machine(window: 4)
        #expect(delivery.beginRound(at: at(0))?.load == .init(after: 0, limit: 4))
        // A caller that loads more than asked still gets only the window's worth of sends.
        #expect(delivery.loaded(entries(1...10), keepWaiting: false, at: at(0)) == .proceed)
        var sends: [Send] = []
        while let send = delivery.nextSend() {
            delivery.sendCompleted(send, at: at(0))
            sends.append(send)
        }
        #expect(sends == firstSends([1, 2, 3, 4]))
        #expect(delivery.endSends().producerSeqs == [1, 2, 3, 4])

        // Full: nothing is loaded, and nothing is sent until an answer makes room.
        #expect(delivery.beginRound(at: at(10))?.load == nil)
        #expect(round(&delivery, at: at(10)).isEmpty)
        _ = delivery.received([ack(1, busSeq: 1), ack(2, busSeq: 2)], at: at(20))
        #expect(delivery.beginRound(at: at(30))?.load == .init(after: 4, limit: 2))
        #expect(round(&delivery, loading: entries(5...10), at: at(30)) == firstSends([5, 6]))
        #expect(delivery.inFlight.count == 4)
    }

    @Test("first sends go in producer_seq order, each once: an entry at or below the last one loaded is not sent again")
    func sequenceOrder() {
        var delivery = machine(window: 8)
        #expect(round(&delivery, loading: [entry(3), entry(1), entry(2)], at: at(0)) == firstSends([1, 2, 3]))
        #expect(delivery.lastLoaded == 3)
        #expect(round(&delivery, loading: [entry(2), entry(4)], at: at(10)) == firstSends([4]))
        #expect(delivery.beginRound(at: at(20))?.load == .init(after: 4, limit: 4))
    }

    // MARK: - Resending

    @Test("an unanswered entry is resent once resendAfter has passed since its last send, only what is due, in producer_seq order")
    func resendWhenDue() {
        var delivery = machine(window: 8, resendAfter: .seconds(2))
        #expect(round(&delivery, loading: [entry(2), entry(1)], at: at(0)) == firstSends([1, 2]))
        #expect(round(&delivery, loading: [entry(3)], at: at(1000)) == firstSends([3]))
        #expect(round(&delivery, at: at(1999)).isEmpty, "nothing is due yet")

        // 1 and 2 are due, 3 is not; new entries go before resends.
        _ = delivery.beginRound(at: at(2000))
        #expect(delivery.loaded([entry(4)], keepWaiting: false, at: at(2000)) == .proceed)
        var sends: [Send] = []
        while let send = delivery.nextSend() {
            delivery.sendCompleted(send, at: at(2000))
            sends.append(send)
        }
        #expect(sends == firstSends([4]) + resends([1, 2]))
        let sent = delivery.endSends()
        #expect(sent.producerSeqs == [4, 1, 2])
        #expect(sent.resent == 2)

        // Each resend restarts its own clock; from the second on, each doubles its wait.
        #expect(round(&delivery, at: at(3000)) == resends([3]))
        #expect(round(&delivery, at: at(3999)).isEmpty)
        #expect(round(&delivery, at: at(4000)) == resends([1, 2, 4]))
        #expect(round(&delivery, at: at(5000)) == resends([3]))
        #expect(round(&delivery, at: at(5999)).isEmpty)
        #expect(round(&delivery, at: at(6000)) == resends([4]))
        #expect(round(&delivery, at: at(7999)).isEmpty, "1 and 2, resent twice, wait 4 s")
        #expect(round(&delivery, at: at(8000)) == resends([1, 2]))
        #expect(round(&delivery, at: at(9000)) == resends([3]))
        #expect(round(&delivery, at: at(10_000)) == resends([4]))
        #expect(round(&delivery, at: at(15_999)).isEmpty, "then 8 s")
        #expect(round(&delivery, at: at(16_000)) == resends([1, 2]))
        #expect(round(&delivery, at: at(17_000)) == resends([3]))
        #expect(round(&delivery, at: at(18_000)) == resends([4]))
        #expect(round(&delivery, at: at(23_999)).isEmpty, "and no more than 4 × resendAfter")
        #expect(round(&delivery, at: at(24_000)) == resends([1, 2]))
        #expect(delivery.inFlight[1]?.resends == 5)

        // On a new socket everything in flight is due at once, and the waits start over.
        delivery.connectionReplaced(at: at(25_000))
        #expect(round(&delivery, at: at(25_000)) == resends([1, 2, 3, 4]))
        #expect(round(&delivery, at: at(26_999)).isEmpty)
        #expect(round(&delivery, at: at(27_000)) == resends([1, 2, 3, 4]))
        #expect(round(&delivery, at: at(30_999)).isEmpty, "the second resend waits 4 s again")
    }

    @Test("an answered entry is not resent")
    func answeredNotResent() {
        var delivery = machine()
        round(&delivery, loading: entries(1...3), at: at(0))
        _ = delivery.received([ack(2, busSeq: 7)], at: at(100))
        #expect(round(&delivery, at: at(2000)) == resends([1, 3]))
    }

    // MARK: - Answers

    @Test("an ACK deletes its entry, even one not in flight (the answer to a send made before a restart)")
    func ackDeletesEvenWhenNotInFlight() {
        var delivery = machine()
        round(&delivery, loading: entries(1...2), at: at(0))
        let actions = delivery.received([ack(1, busSeq: 10), ack(40, busSeq: 3)], at: at(50))
        #expect(actions.acknowledge == [1, 40])
        #expect(actions.refuse.isEmpty && actions.unmatchedErrors.isEmpty)
        #expect(delivery.inFlight.keys.sorted() == [2])
        #expect(delivery.report.delivered == 2)
        #expect(delivery.report.brokerAnswered)
    }

    @Test("a duplicate ACK counts as a duplicate, not a delivery, and still deletes the entry")
    func duplicateAck() {
        var delivery = machine()
        round(&delivery, loading: entries(1...2), at: at(0))
        let actions = delivery.received([ack(1, busSeq: 5, duplicate: true), ack(2, busSeq: 6)], at: at(10))
        #expect(actions.acknowledge == [1, 2])
        #expect(delivery.report.duplicates == 1)
        #expect(delivery.report.delivered == 1)
        #expect(delivery.inFlight.isEmpty)
        // The broker answers a resend too: the second ACK for one entry is its duplicate.
        _ = delivery.received([ack(2, busSeq: 6, duplicate: true)], at: at(20))
        #expect(delivery.report.duplicates == 2 && delivery.report.delivered == 1)
    }

    @Test("one ACKS answers each entry it lists as an ACK would: deletes it, counts duplicates apart, keeps the highest bus_seq")
    func batchedAcks() {
        var delivery = machine()
        round(&delivery, loading: entries(1...4), at: at(0))
        let acks = Acks(
            producer: "kiosk-1",
            entries: [
                Acknowledgement(producerSeq: 1, busSeq: 20, duplicate: false),
                Acknowledgement(producerSeq: 3, busSeq: 22, duplicate: false),
                Acknowledgement(producerSeq: 2, busSeq: 7, duplicate: true),
            ])
        let actions = delivery.received([.acks(acks)], at: at(10))
        #expect(actions.acknowledge == [1, 3, 2])
        #expect(delivery.inFlight.keys.sorted() == [4])
        #expect(delivery.report.delivered == 2 && delivery.report.duplicates == 1)
        #expect(delivery.report.lastBusSeq == 22)
        #expect(delivery.report.brokerAnswered)
        // An ACKS and an ACK in one batch of answers (a broker pair: one of each version).
        let more = delivery.received([ack(4, busSeq: 23), .acks(Acks(producer: "kiosk-1", entries: []))], at: at(20))
        #expect(more.acknowledge == [4])
        #expect(delivery.inFlight.isEmpty)
    }

    @Test("lastBusSeq is the highest bus_seq ACKed, whatever order the ACKs come in")
    func lastBusSeqIsTheMax() {
        var delivery = machine()
        #expect(delivery.report.lastBusSeq == nil)
        _ = delivery.received([ack(1, busSeq: 10), ack(2, busSeq: 12), ack(3, busSeq: 11)], at: at(0))
        #expect(delivery.report.lastBusSeq == 12)
        // A duplicate's bus_seq is the first one's, lower than what came since.
        _ = delivery.received([ack(4, busSeq: 2, duplicate: true)], at: at(10))
        #expect(delivery.report.lastBusSeq == 12)
        _ = delivery.received([ack(5, busSeq: 13)], at: at(20))
        #expect(delivery.report.lastBusSeq == 13)
    }

    @Test("a retryable NACK keeps the entry and makes it due again resendAfter after the NACK")
    func retryableNack() {
        var delivery = machine(resendAfter: .seconds(2))
        round(&delivery, loading: entries(1...2), at: at(0))
        let actions = delivery.received([nack(1, .unavailable, "disk full", retryable: true)], at: at(500))
        #expect(actions == .init())
        #expect(delivery.report.lastProblem == "unavailable: disk full")
        #expect(delivery.report.rejected == 0)
        #expect(delivery.inFlight.keys.sorted() == [1, 2])
        // 2 falls due on its first send's clock; 1 on the NACK's.
        #expect(round(&delivery, at: at(2000)) == resends([2]))
        #expect(round(&delivery, at: at(2499)).isEmpty)
        #expect(round(&delivery, at: at(2500)) == resends([1]))
    }

    @Test("a NACK that is not retryable refuses the entry for good, with the reason 'code: reason'")
    func nonRetryableNack() {
        var delivery = machine()
        round(&delivery, loading: entries(1...2), at: at(0))
        let actions = delivery.received([nack(2, .conflict, "producer_seq 2 belongs to another event", retryable: false)], at: at(10))
        #expect(
            actions.refuse == [
                .init(producerSeq: 2, eventID: "event-2", code: "conflict", detail: "producer_seq 2 belongs to another event")
            ])
        #expect(actions.refuse.first?.reason == "conflict: producer_seq 2 belongs to another event")
        #expect(actions.acknowledge.isEmpty)
        #expect(delivery.report.rejected == 1)
        #expect(delivery.report.lastProblem == "conflict: producer_seq 2 belongs to another event")
        #expect(round(&delivery, at: at(5000)) == resends([1]), "a refused entry is never resent")
        #expect(delivery.beginRound(at: at(5010))?.load == .init(after: 2, limit: 3), "nor loaded again")
    }

    @Test("a conflict naming the producer's head in the journal numbers the entry again instead of refusing it; the new number is loaded")
    func conflictWithHeadRenumbers() {
        var delivery = machine()
        round(&delivery, loading: entries(1...2), at: at(0))
        let actions = delivery.received(
            [nack(2, .conflict, "producer_seq 2 of 'kiosk-1' already belongs to event x", retryable: false, producerHead: 40)], at: at(10))
        #expect(actions.renumber == [.init(producerSeq: 2, eventID: "event-2", producerHead: 40)])
        #expect(actions.refuse.isEmpty)
        #expect(delivery.report.rejected == 0)
        #expect(delivery.report.renumbered == 1)
        #expect(delivery.inFlight.keys.sorted() == [1], "out of flight under its old number")
        // The outbox gives it number 41: above everything loaded, so the next load picks it up.
        #expect(delivery.beginRound(at: at(20))?.load == .init(after: 2, limit: 3))
        let renumbered = OutboxEntry(
            producerSeq: 41, eventID: "event-2", type: CheckIn.type, header: Data("h41".utf8), content: Data("{}".utf8), attempts: 1)
        #expect(delivery.loaded([renumbered], keepWaiting: false, at: at(20)) == .proceed)
        #expect(delivery.nextSend() == Send(entry: renumbered, isResend: false))
        // A conflict from a broker that does not name the head still refuses, as before.
        var old = machine()
        round(&old, loading: entries(1...1), at: at(0))
        #expect(old.received([nack(1, .conflict, "taken", retryable: false)], at: at(10)).refuse.count == 1)
    }

    @Test("an ERROR whose ref is the event_id of an entry in flight refuses that entry")
    func errorWithRefRefuses() {
        var delivery = machine()
        round(&delivery, loading: entries(1...3), at: at(0))
        let error = ErrorHeader(
            code: .schemaViolation, message: "content: field 'site_id' must be at least 1, got 0", command: "EVENT", ref: "event-2")
        let actions = delivery.received([.error(error)], at: at(10))
        #expect(
            actions.refuse == [
                .init(
                    producerSeq: 2, eventID: "event-2", code: "schema-violation",
                    detail: "content: field 'site_id' must be at least 1, got 0")
            ])
        #expect(actions.refuse.first?.reason == "schema-violation: content: field 'site_id' must be at least 1, got 0")
        #expect(actions.unmatchedErrors.isEmpty)
        #expect(delivery.report.rejected == 1)
        #expect(delivery.inFlight.keys.sorted() == [1, 3])
        #expect(round(&delivery, at: at(2000)) == resends([1, 3]))
    }

    @Test(
        "an ERROR with no ref, or a ref to nothing in flight, only records the problem",
        arguments: [nil, "event-99", "filemaker/12"])
    func errorWithoutKnownRef(ref: String?) {
        var delivery = machine()
        round(&delivery, loading: entries(1...2), at: at(0))
        let error = ErrorHeader(code: .invalidJSON, message: "header: not a JSON object", command: "HEARTBEAT", ref: ref)
        let actions = delivery.received([.error(error)], at: at(10))
        #expect(actions.refuse.isEmpty && actions.acknowledge.isEmpty)
        #expect(actions.unmatchedErrors == [error])
        #expect(delivery.report.rejected == 0)
        #expect(delivery.report.lastProblem == "invalid-json: header: not a JSON object")
        #expect(delivery.inFlight.keys.sorted() == [1, 2])
    }

    @Test("any answer, a HEAD or one that could not be read, shows the broker answered, and changes nothing else")
    func otherAnswers() {
        var delivery = machine()
        round(&delivery, loading: entries(1...1), at: at(0))
        #expect(delivery.report.brokerAnswered == false)
        #expect(delivery.received([.other], at: at(10)) == .init())
        #expect(delivery.report == DeliveryReport(brokerAnswered: true))
        #expect(delivery.inFlight.keys.sorted() == [1])
    }

    // MARK: - An unreachable broker

    @Test("a blocked send records that the broker is not reachable and stops the round's sending")
    func blockedSendStopsTheRound() {
        var delivery = machine(window: 8)
        round(&delivery, loading: entries(1...2), at: at(0))
        _ = delivery.beginRound(at: at(2000))
        #expect(delivery.loaded(entries(3...5), keepWaiting: false, at: at(2000)) == .proceed)
        let first = delivery.nextSend()
        #expect(first == Send(entry: entry(3), isResend: false))
        delivery.sendCompleted(first!, at: at(2000))
        #expect(delivery.nextSend() == Send(entry: entry(4), isResend: false))
        delivery.sendBlocked()
        #expect(delivery.nextSend() == nil, "neither 5 nor the due resends of 1 and 2")
        #expect(delivery.endSends() == .init(producerSeqs: [3], resent: 0))
        #expect(delivery.report.lastProblem == "the broker at \(Self.endpoint) is not reachable")

        // Next round: what was never sent is loaded again, and the resends are still due.
        #expect(delivery.beginRound(at: at(2100))?.load == .init(after: 3, limit: 5))
        #expect(round(&delivery, loading: entries(4...5), at: at(2100)) == firstSends([4, 5]) + resends([1, 2]))
    }

    @Test("a blocked resend stays due")
    func blockedResendStaysDue() {
        var delivery = machine()
        round(&delivery, loading: entries(1...2), at: at(0))
        _ = delivery.beginRound(at: at(2000))
        _ = delivery.loaded([], keepWaiting: false, at: at(2000))
        #expect(delivery.nextSend() == Send(entry: entry(1), isResend: true))
        delivery.sendBlocked()
        #expect(delivery.nextSend() == nil)
        #expect(delivery.endSends().producerSeqs.isEmpty)
        #expect(round(&delivery, at: at(2001)) == resends([1, 2]))
    }

    // MARK: - Heartbeats, waiting, ending

    @Test("a HEARTBEAT goes in the first round, then once per interval counted from the last one sent")
    func heartbeatSchedule() {
        var delivery = machine(heartbeat: .seconds(5))
        let rounds = [0, 1000, 4999, 5300, 10_299, 10_300, 10_301, 30_000, 30_001]
        let heartbeats = rounds.map { delivery.beginRound(at: at($0))?.heartbeat }
        #expect(heartbeats == [true, false, false, true, false, true, false, true, false])
    }

    @Test("the run is done only when nothing was loaded, nothing is in flight and the caller does not keep waiting")
    func doneRule() {
        var delivery = machine()
        var asked = 0
        func ask(_ answer: Bool) -> Bool {
            asked += 1
            return answer
        }
        // Something loaded, or something in flight: the run goes on, and keepWaiting is not asked.
        _ = delivery.beginRound(at: at(0))
        #expect(delivery.loaded(entries(1...1), keepWaiting: ask(false), at: at(0)) == .proceed)
        if let send = delivery.nextSend() { delivery.sendCompleted(send, at: at(0)) }
        _ = delivery.endSends()
        _ = delivery.beginRound(at: at(10))
        #expect(delivery.loaded([], keepWaiting: ask(false), at: at(10)) == .proceed)
        #expect(asked == 0)

        // Empty and idle: the caller decides.
        _ = delivery.received([ack(1, busSeq: 1)], at: at(20))
        _ = delivery.beginRound(at: at(30))
        #expect(delivery.loaded([], keepWaiting: ask(true), at: at(30)) == .proceed)
        #expect(delivery.nextSend() == nil)
        _ = delivery.beginRound(at: at(40))
        #expect(delivery.loaded([], keepWaiting: ask(false), at: at(40)) == .done)
        #expect(asked == 2)
    }

    @Test("the run ends at its deadline, whatever is left")
    func deadline() {
        var delivery = machine(deadline: at(3000))
        round(&delivery, loading: entries(1...2), at: at(0))
        #expect(delivery.beginRound(at: at(2999)) != nil)
        #expect(delivery.beginRound(at: at(3000)) == nil)
        #expect(delivery.beginRound(at: at(9000)) == nil)
    }

    @Test("the wait for answers lasts until the next resend is due, or idlePoll when idle, bounded by the next HEARTBEAT and the deadline")
    func waitForAnswers() {
        var delivery = machine(resendAfter: .seconds(2), idlePoll: .milliseconds(200), heartbeat: .seconds(5), deadline: at(10_000))
        _ = delivery.beginRound(at: at(0))  // the first HEARTBEAT: the next is due at 5 s
        #expect(delivery.wait(at: at(0)) == .milliseconds(200), "idle")

        round(&delivery, loading: entries(1...1), at: at(100))
        round(&delivery, loading: entries(2...2), at: at(600))
        #expect(delivery.wait(at: at(700)) == .milliseconds(1400), "until 1 is due at 2.1 s")
        _ = delivery.received([ack(1, busSeq: 1)], at: at(800))
        #expect(delivery.wait(at: at(800)) == .milliseconds(1800), "until 2 is due at 2.6 s")
        #expect(delivery.wait(at: at(3000)) == .milliseconds(1), "overdue: at least a millisecond, never zero")

        // The next HEARTBEAT comes first.
        round(&delivery, at: at(4000))  // resends 2: due at 6 s
        #expect(delivery.wait(at: at(4000)) == .milliseconds(1000))
        // And the deadline before anything else.
        round(&delivery, at: at(9000))  // with a HEARTBEAT: the next is due at 14 s
        #expect(delivery.wait(at: at(9000)) == .milliseconds(1000))
    }

    // MARK: - A whole run

    @Test("a run over a lossy broker ends with every entry journaled once and deleted, the window never exceeded")
    func lossyRun() {
        // A stand-in broker that loses every third EVENT and every fourth ACK, answers the rest
        // 300 ms later and, like the real one, journals an event_id once and answers its
        // resends as duplicates.
        var delivery = machine(window: 5, resendAfter: .seconds(1), deadline: at(120_000))
        var outbox = entries(1...40)
        var journal: [String: Int64] = [:]
        var events = 0
        var acks = 0
        var answers: [(at: Int, answer: OutboxDelivery.Answer)] = []
        var now = 0
        while true {
            guard let round = delivery.beginRound(at: at(now)) else {
                Issue.record("the deadline came first")
                return
            }
            let loaded = round.load.map { load in Array(outbox.filter { $0.producerSeq > load.after }.prefix(load.limit)) } ?? []
            guard delivery.loaded(loaded, keepWaiting: false, at: at(now)) == .proceed else { break }
            while let send = delivery.nextSend() {
                if send.isResend { #expect(delivery.inFlight[send.entry.producerSeq] != nil) }
                delivery.sendCompleted(send, at: at(now))
                #expect(delivery.inFlight.count <= 5)
                events += 1
                guard events % 3 != 0 else { continue }
                let known = journal[send.entry.eventID]
                let busSeq = known ?? Int64(journal.count + 1)
                journal[send.entry.eventID] = busSeq
                acks += 1
                guard acks % 4 != 0 else { continue }
                answers.append((now + 300, ack(send.entry.producerSeq, busSeq: busSeq, duplicate: known != nil)))
            }
            _ = delivery.endSends()
            // Wake at the wait's end or at the first answer, as a socket receive would.
            let wait = Int((delivery.wait(at: at(now)) / .milliseconds(1)).rounded(.up))
            now = min(now + wait, answers.map(\.at).min() ?? .max)
            let arrived = answers.filter { $0.at <= now }.map(\.answer)
            answers.removeAll { $0.at <= now }
            guard !arrived.isEmpty else { continue }
            let actions = delivery.received(arrived, at: at(now))
            outbox.removeAll { actions.acknowledge.contains($0.producerSeq) }
        }
        #expect(outbox.isEmpty)
        #expect(delivery.inFlight.isEmpty)
        #expect(journal.count == 40)
        #expect(delivery.report.delivered + delivery.report.duplicates >= 40)
        #expect(delivery.report.lastBusSeq == 40)
        #expect(delivery.report.duplicates > 0, "the lost ACKs were answered again as duplicates")
    }
}
