// The consumer-group half of a worker process: takes deliveries from a `GroupConsumer`, hands
// each to the worker's `EventHandler`, and settles it the way the handler decided. It is a
// `Service`, so a worker's `ServiceGroup` runs and stops it like everything else:
//
// - graceful shutdown (SIGTERM): take nothing new, let the handlers in hand finish and settle,
//   then leave the group (the broker gives what was delivered but not started to other members
//   at once);
// - cancellation: stop at once; whatever was not settled comes again (at-least-once), and the
//   handlers' look-before-write makes that harmless.

public import CoreMetrics
public import Logging
public import ServiceLifecycle
public import SwitchboardBus
import SwitchboardProtocol
import Synchronization

/// Counts a worker keeps about its group, for logs, status and tests.
public struct GroupWorkerCounts: Sendable, Hashable {
    public var handled = 0
    public var done = 0
    public var retried = 0
    public var deadLettered = 0
    /// Settles the broker never got (the connection went away first); it redelivers those.
    public var unsettled = 0
}

public final class GroupWorker: Service, Sendable {
    public let consumer: GroupConsumer
    private let handler: any EventHandler
    private let logger: Logger
    private let state = Mutex(GroupWorkerCounts())
    private let gate = EventGate()
    private let inHand = InHand()
    private let settled: [String: Counter]
    private let handling: CoreMetrics.Timer

    /// - Parameter metrics: where `switchboard_worker_*` go (deploy/prometheus/README.md).
    public init(consumer: GroupConsumer, handler: any EventHandler, logger: Logger, metrics: any MetricsFactory = MetricsSystem.factory) {
        self.consumer = consumer
        self.handler = handler
        self.logger = logger
        let group = consumer.settings.group
        settled = Dictionary(
            uniqueKeysWithValues: ["ack", "nack", "term"].map { outcome in
                (
                    outcome,
                    Counter(
                        label: "switchboard_worker_deliveries_total", dimensions: [("group", group), ("outcome", outcome)], factory: metrics
                    )
                )
            })
        handling = CoreMetrics.Timer(label: "switchboard_worker_handler_seconds", dimensions: [("group", group)], factory: metrics)
    }

    public var counts: GroupWorkerCounts { state.withLock { $0 } }

    public func run() async throws {
        // Not a child of the group below: it ends when the handlers have, before the LEAVE.
        let progress = Task { await self.inHand.tellProgress() }
        defer { progress.cancel() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.consumer.run() }
            // Ends on graceful shutdown once every handler in hand has settled, or when the
            // consumer stopped for good (a refused JOIN ends its deliveries).
            // A handler waiting to learn whether it still holds its delivery (`mayAct`) stops
            // waiting: nothing is started whose delivery may be at another member.
            await withGracefulShutdownHandler {
                await handleUntilShutdown()
            } onGracefulShutdown: {
                self.consumer.stopWaiting()
            }
            // Every settle is sent: now LEAVE, so what was delivered but not started goes to
            // other members at once; `run()` returns after it (or rethrows the JOIN's refusal).
            progress.cancel()
            consumer.leave()
            try await group.waitForAll()
        }
    }

    private func handleUntilShutdown() async {
        // Discarding: a plain task group keeps every finished child (and the delivery it
        // captured) until someone awaits it, which here is never before shutdown; the soak
        // (bench/soak) saw each worker grow by about 6 KB per check-in that way.
        await withDiscardingTaskGroup { handlers in
            // The broker sends at most `credit` deliveries before they are settled, so this never
            // runs more handlers at once than the member's credit.
            for await delivery in consumer.deliveries.cancelOnGracefulShutdown() {
                handlers.addTask { await self.process(delivery) }
            }
        }
    }

    private func process(_ delivery: GroupDelivery) async {
        // A delivery of a connection the consumer has since replaced (broker silence, or the
        // broker said we were no member) was taken back and may be at another member already.
        guard consumer.isCurrent(delivery) else {
            state.withLock { $0.unsettled += 1 }
            logger.notice(
                "skipping a delivery of a replaced connection; the broker delivers it again",
                metadata: ["bus_seq": "\(delivery.busSeq)", "event_id": "\(delivery.header.eventID)"])
            return
        }
        let consumer = consumer
        let event = WorkerEvent(
            header: delivery.header, content: delivery.content, attempt: delivery.attempt, firstDelivery: delivery.first,
            mayAct: { await consumer.mayAct(on: delivery) })
        let started = ContinuousClock.now
        // Work that outlasts half the ack wait tells the broker it is still going, so the event
        // is not handed to another member while this one writes it (`InHand`).
        let held = inHand.add(delivery, now: started)
        let handled: Settlement
        do {
            // One handler per event id at a time in this process: a delivery the broker took
            // back (a replaced connection, an ack time-out) can come again while its first
            // handler still writes; this one waits for it, then looks and finds its record.
            await gate.enter(event.header.eventID)
            defer { gate.leave(event.header.eventID) }
            handled = await handler.handle(event)
        }
        inHand.remove(held)
        guard !Task.isCancelled else { return }
        let settlement = handled.wireSafe
        let metadata: Logger.Metadata = [
            "group": "\(delivery.group)", "bus_seq": "\(delivery.busSeq)", "event_id": "\(delivery.header.eventID)",
            "attempt": "\(delivery.attempt)",
        ]
        do {
            switch settlement {
            case .done:
                try await delivery.ack()
            case .retry(let delay, let code, let message):
                logger.notice("will try again", metadata: metadata.merging(["code": "\(code)", "reason": "\(message)"]) { $1 })
                try await delivery.nack(after: delay, code: code, message: message)
            case .deadLetter(let code, let message):
                logger.warning(
                    "cannot be done: dead letter", metadata: metadata.merging(["code": "\(code)", "reason": "\(message)"]) { $1 })
                try await delivery.term(code: code, message: message)
            }
            let (seconds, attoseconds) = started.duration(to: .now).components
            handling.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
            switch settlement {
            case .done: settled["ack"]?.increment()
            case .retry: settled["nack"]?.increment()
            case .deadLetter: settled["term"]?.increment()
            }
            state.withLock { counts in
                counts.handled += 1
                switch settlement {
                case .done: counts.done += 1
                case .retry: counts.retried += 1
                case .deadLetter: counts.deadLettered += 1
                }
            }
        } catch {
            state.withLock { $0.unsettled += 1 }
            logger.warning("could not settle; the broker will deliver it again", metadata: metadata.merging(["error": "\(error)"]) { $1 })
        }
    }
}

/// The deliveries whose handlers run, and one task that tells the broker, for each that has run
/// half its ack wait, that it is still going (PROGRESS), and again every half ack wait after.
///
/// One task for all of them: a timer task per delivery cost each check-in a task group, a second
/// task and a timer that fired 15 s later whether or not it was still wanted (a cancelled
/// `Task.sleep` leaves its timer in place): about 25 µs of CPU and several thread wake-ups per
/// delivery, measured with 20,000 deliveries in a loop.
final class InHand: Sendable {
    private struct Entry {
        let delivery: GroupDelivery
        let every: Duration
        var due: ContinuousClock.Instant
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        var nextID = 0
        /// How often the loop looks: 1 s, or a quarter of the shortest `every` seen if that is
        /// less. A PROGRESS goes out at most this late, so at most five eighths of the ack wait
        /// after the work began (30 s: the first at 15-16 s). With half of `every` (three
        /// quarters of a 4 s ack wait), a loaded machine let a PROGRESS reach the broker after
        /// the deadline: `GroupWorkerTests` saw a redelivery in about half its runs beside the
        /// other group suites.
        var look: Duration = .seconds(1)
    }

    private let state = Mutex(State())

    /// Holds `delivery` from `now`; returns the key to `remove` it by.
    func add(_ delivery: GroupDelivery, now: ContinuousClock.Instant) -> Int {
        let every = max(delivery.ackWait / 2, .milliseconds(100))
        return state.withLock { state in
            state.nextID += 1
            state.entries[state.nextID] = Entry(delivery: delivery, every: every, due: now + every)
            state.look = min(state.look, every / 4)
            return state.nextID
        }
    }

    func remove(_ key: Int) {
        _ = state.withLock { $0.entries.removeValue(forKey: key) }
    }

    /// Sends each delivery's PROGRESS when it is due, until cancelled.
    func tellProgress() async {
        while !Task.isCancelled {
            let look = state.withLock { $0.look }
            try? await Task.sleep(for: look)
            let now = ContinuousClock.now
            let due = state.withLock { state -> [GroupDelivery] in
                var due: [GroupDelivery] = []
                for (key, entry) in state.entries where entry.due <= now {
                    due.append(entry.delivery)
                    state.entries[key]?.due = now + entry.every
                }
                return due
            }
            for delivery in due { try? await delivery.inProgress() }
        }
    }
}

/// Event ids whose handler runs in this process, each with the deliveries of the same event
/// that wait for it (first come, first served). Not a lock across processes: two worker
/// processes that get the same event at once are kept apart only by the back end's own
/// uniqueness (FileMaker's unique `EventID`; ETO has none, see the workers' README).
final class EventGate: Sendable {
    private let table = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    /// Returns once no other handler of `id` runs; the caller must `leave(id)` after.
    func enter(_ id: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let free = table.withLock { table -> Bool in
                guard table[id] != nil else {
                    table[id] = []
                    return true
                }
                table[id, default: []].append(continuation)
                return false
            }
            if free { continuation.resume() }
        }
    }

    /// Hands `id` to the next waiting delivery, or frees it.
    func leave(_ id: String) {
        let next = table.withLock { table -> CheckedContinuation<Void, Never>? in
            guard var waiting = table[id], !waiting.isEmpty else {
                table[id] = nil
                return nil
            }
            let first = waiting.removeFirst()
            table[id] = waiting
            return first
        }
        next?.resume()
    }

    /// Event ids held or waited for (for tests).
    var held: Int { table.withLock { $0.count } }

    /// Deliveries waiting for `id` (for tests).
    func waiting(for id: String) -> Int { table.withLock { $0[id]?.count ?? 0 } }
}
