import Foundation
import Logging
import SwitchboardBroker
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization
import Testing

@testable import SwitchboardWorkers

@Suite("GroupWorker against a real broker")
struct GroupWorkerTests {
    /// A handler that takes `time` over each event and counts the deliveries it was given.
    final class SlowHandler: EventHandler {
        let time: Duration
        let seen = Mutex<[String: [Int]]>([:])

        init(time: Duration) { self.time = time }

        func handle(_ event: WorkerEvent) async -> Settlement {
            seen.withLock { $0[event.header.eventID, default: []].append(event.attempt) }
            try? await Task.sleep(for: time)
            return .done
        }
    }

    @Test("handlers that outlast the ack wait two and a half times over keep their deliveries: PROGRESS goes out, nothing comes again")
    func progressKeepsSlowWork() async throws {
        let fixture = try await BrokerFixture.start { $0.groupAckWait = .seconds(4) }
        let count = 6
        let outbox = try fixture.outbox("riverside-1")
        try await outbox.enqueue(
            (0..<count).map { i in .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: i), key: "person-\(i)")
            })
        #expect(try await fixture.sender(outbox).deliver(until: .now + .seconds(60)).delivered == count)

        var logger = Logger(label: "test-worker")
        logger.logLevel = .critical
        let handler = SlowHandler(time: .seconds(10))
        let consumer = GroupConsumer(
            io: fixture.io, endpoint: fixture.endpoints.groups, settings: .init(group: "filemaker", topics: ["checkin."], credit: 8),
            logger: logger)
        let worker = GroupWorker(consumer: consumer, handler: handler, logger: logger)
        let running = Task { try await worker.run() }
        try await waitUntil("every event handled and acked", timeout: .seconds(90)) { worker.counts.done == count }
        running.cancel()
        _ = await running.result
        let seen = handler.seen.withLock { $0 }
        #expect(seen.count == count)
        #expect(seen.values.allSatisfy { $0 == [1] }, "each event delivered once, as attempt 1: \(seen.values.map { $0 })")
        #expect(worker.counts.retried == 0 && worker.counts.unsettled == 0)
        await fixture.stop()
    }
}
