import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

@Suite("Ingest on its own thread")
struct IngestThreadTests {
    /// What an item says, comparable: its kind, its sender, and its event id or error code.
    static func summary(_ item: IngestItem) -> String {
        switch item {
        case .event(let identity, let event):
            "event \(String(decoding: identity, as: UTF8.self)) \(event.header.eventID) \(event.header.producerSeq)"
        case .heartbeat(let identity, let report, _, _): "heartbeat \(String(decoding: identity, as: UTF8.self)) \(report.producer ?? "-")"
        case .refused(let identity, let error, let command, let ref):
            "refused \(String(decoding: identity, as: UTF8.self)) \(error.code.rawValue) \(command ?? "-") \(ref ?? "-") \(error.message)"
        }
    }

    @Test(
        "every envelope vector and good events, received and checked on the ingest thread, come back in order as the check makes them, and its answers go out in order"
    )
    func sameAnswersInOrder() throws {
        var sent: [[Data]] = []
        for (index, vector) in try Vectors.envelopes().enumerated() {
            sent.append(vector.frames)
            sent.append(try Events.frames(seq: Int64(index + 1)).1)
        }
        let peer = Data("peer".utf8)
        let check = IngestCheck(minimumVersion: .current, security: nil)
        // The direct check: every message answered, the good events as events.
        let expected = Self.summaries(CheckedBatch(sent.compactMap { check(Message(frames: [peer] + $0), receivedAt: 1) }))
        #expect(expected.count == sent.count)
        #expect(expected.filter { $0.hasPrefix("event peer") }.count >= sent.count / 2)
        #expect(expected.contains { $0.hasPrefix("refused") })
        // A routing frame alone, and a message with no frame at all (nothing to answer).
        #expect(check(Message(frames: [peer]), receivedAt: 1).map(Self.summary)?.hasPrefix("refused peer malformed") == true)
        #expect(check(Message(frames: []), receivedAt: 1) == nil)

        let context = try Context()
        let router = try context.socket(.router, linger: 0)
        try router.bind("inproc://ingest-thread-test")
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.set([.routingID(peer), .receiveTimeout(milliseconds: 5000)])
        try dealer.connect("inproc://ingest-thread-test")
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let thread = try IngestThread(socket: router, check: check, batchLimit: 7, logger: logger)
        var left: [CheckedBatch]?
        // Whatever fails, the thread ends and the sockets close before the context does (its
        // termination waits for every socket).
        defer {
            if left == nil { _ = thread.stop() }
            router.close()
            dealer.close()
            withExtendedLifetime(context) {}
        }
        for frames in sent { try dealer.send(frames) }

        // The broker thread's side: wait for the word that a batch waits, take it.
        let poller = Poller()
        poller.add(fileDescriptor: thread.readyDescriptor)
        var got: [String] = []
        var batches = 0
        var answers = 0
        while got.count < expected.count {
            try #require(try poller.poll(timeout: 5000) == 1, "no checked batch within 5 s (got \(got.count) of \(expected.count))")
            let taken = thread.take()
            #expect(taken.count <= IngestThread.waitingLimit, "at most \(IngestThread.waitingLimit) checked batches wait")
            for batch in taken {
                // At most `batch_limit` messages a batch.
                #expect(batch.events.count + batch.others.count <= 7)
                got += Self.summaries(batch)
                batches += 1
            }
            // Answers the broker thread gives back go out on the socket, in order.
            answers += 1
            thread.send([[peer, Data("answer-\(answers)".utf8)]], spent: taken)
        }
        // Each batch's other messages come before its events, so compare as sets per kind.
        #expect(got.sorted() == expected.sorted())
        #expect(got.filter { $0.hasPrefix("event") } == expected.filter { $0.hasPrefix("event") })
        #expect(batches >= sent.count / 7)
        for number in 1...answers {
            let answer = try #require(try dealer.receive())
            #expect(answer.frames == [Data("answer-\(number)".utf8)])
        }

        // A batch checked and never taken is given back by `stop`, and the socket is the
        // caller's again.
        try dealer.send(try Events.frames(seq: 999).1)
        try #require(try poller.poll(timeout: 5000) == 1)
        left = thread.stop()
        #expect(left?.map(\.events.count) == [1])
        #expect(try router.send([peer, Data("after".utf8)]))
        #expect(try dealer.receive()?.frames == [Data("after".utf8)])
    }

    @Test("what is checked while a batch waits joins it up to batch_limit messages; the rest waits as a second batch")
    func waitingBatchFills() throws {
        let peer = Data("peer".utf8)
        let context = try Context()
        let router = try context.socket(.router, linger: 0)
        try router.bind("inproc://ingest-thread-fill")
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.set([.routingID(peer)])
        try dealer.connect("inproc://ingest-thread-fill")
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let thread = try IngestThread(
            socket: router, check: IngestCheck(minimumVersion: .current, security: nil), batchLimit: 7, logger: logger)
        defer {
            _ = thread.stop()
            router.close()
            dealer.close()
            withExtendedLifetime(context) {}
        }
        // The thread signals its ready descriptor after each hand-off; the test reads the signal
        // itself (as `take` would, without taking) to wait for the next one.
        let poller = Poller()
        poller.add(fileDescriptor: thread.readyDescriptor)
        /// Waits for hand-offs (up to 5 s each) until the waiting batches have these sizes.
        func waitFor(_ sizes: [Int]) throws {
            while thread.waiting != sizes {
                try #require(try poller.poll(timeout: 5000) == 1, "waiting batches \(thread.waiting), expected \(sizes)")
                var count: UInt64 = 0
                _ = read(thread.readyDescriptor, &count, 8)
            }
        }
        var seq: Int64 = 0
        func send(_ count: Int) throws {
            for _ in 0..<count {
                seq += 1
                try dealer.send(try Events.frames(seq: seq).1)
            }
        }
        try send(3)
        try waitFor([3])
        try send(3)
        try waitFor([6])
        // One more fits; the next seven make a second batch, and with both full the rest stays
        // on the socket until the broker thread takes them.
        try send(1 + 7 + 3)
        try waitFor([7, 7])
        let taken = thread.take()
        #expect(taken.map(\.count) == [7, 7])
        #expect(taken.flatMap(\.events).map(\.header.producerSeq) == Array(1...14))
        try waitFor([3])
        #expect(thread.take().flatMap(\.events).map(\.header.producerSeq) == [15, 16, 17])
    }

    static func summaries(_ batch: CheckedBatch) -> [String] {
        batch.others.map(summary) + zip(batch.senders, batch.events).map { summary(.event(identity: $0, $1)) }
    }
}

@Suite("ACKS of one commit")
struct BatchedAcksTests {
    @Test("one ACKS per connection and producer, in the order sent, and a new one after every 4096 events")
    func splitAtTheLimit() {
        var batched = BrokerCore.BatchedAcks()
        let a = Data("a".utf8)
        let b = Data("b".utf8)
        for seq in Int64(1)...5000 {
            batched.add(a, "kiosk-1", seq, busSeq: seq * 2, duplicate: false)
            if seq <= 3 { batched.add(b, "kiosk-2", seq, busSeq: seq * 2 + 1, duplicate: seq == 2) }
        }
        batched.add(a, "kiosk-3", 1, busSeq: 20_001, duplicate: false)
        let shapes = batched.all.map { ($0.identity, $0.acks.producer, $0.acks.entries.count) }
        #expect(shapes.map(\.0) == [a, b, a, a])
        #expect(shapes.map(\.1) == ["kiosk-1", "kiosk-2", "kiosk-1", "kiosk-3"])
        #expect(shapes.map(\.2) == [4096, 3, 904, 1])
        let kiosk1 = batched.all.filter { $0.acks.producer == "kiosk-1" }.flatMap(\.acks.entries)
        #expect(kiosk1.map(\.producerSeq) == Array(1...5000))
        #expect(batched.all[1].acks.entries.map(\.duplicate) == [false, true, false])
    }
}
