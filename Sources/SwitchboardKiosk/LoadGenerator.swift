// Synthetic check-ins at a steady rate, through the outbox like any other, for measuring the
// event plane end to end. The pacing is by elapsed time, not by sleeping a fixed gap per event:
// a slow batch (a busy disk) is caught up in the next one, so the rate holds on average.

public import SwitchboardBus
import SwitchboardRuntime
import Synchronization

/// How many check-ins are due by a moment of a load run.
public struct LoadPacing: Sendable, Hashable {
    /// Check-ins per second; 0 is as fast as the outbox takes them.
    public var rate: Double
    /// Check-ins in the whole run.
    public var total: Int
    /// The most check-ins enqueued in one transaction.
    public var batchLimit = 500

    public init(rate: Double, total: Int) {
        self.rate = rate
        self.total = total
    }

    /// How many check-ins should have been made `elapsed` into the run. Rounded so that the
    /// first ones are due at once (10 ms ahead), not after a whole interval.
    public func due(after elapsed: Duration) -> Int {
        guard rate > 0 else { return total }
        return min(total, Int(Double(elapsed.wholeMilliseconds + 10) * rate / 1000))
    }

    /// How long making them all takes at this rate: how long delivery should expect more to
    /// come. A minute when the rate is unbounded.
    public var expectedDuration: Duration {
        rate > 0 ? .milliseconds(Int64(Double(total) / rate * 1000)) : .seconds(60)
    }
}

/// Makes a load run's check-ins, in batches, at the pace's rate.
public final class LoadGenerator: Sendable {
    public let outbox: Outbox
    public let kioskID: String
    public let pacing: LoadPacing
    /// Whom and where each check-in names.
    public let plan: LoadPlan
    private let made = Mutex(0)

    public init(outbox: Outbox, kioskID: String, pacing: LoadPacing, plan: LoadPlan) {
        self.outbox = outbox
        self.kioskID = kioskID
        self.pacing = pacing
        self.plan = plan
    }

    /// How many check-ins are in the outbox so far; safe to read from any task while `run` goes.
    public var generated: Int { made.withLock { $0 } }

    /// Whether every check-in of the run is in the outbox.
    public var isFinished: Bool { generated >= pacing.total }

    /// Enqueues the plan's check-ins numbered from 0 until the total is reached.
    public func run() async throws {
        let start = ContinuousClock.now
        var count = 0
        var batch: [Outbox.NewEvent] = []
        while count < pacing.total {
            let size = min(max(pacing.due(after: start.duration(to: .now)) - count, 0), pacing.batchLimit)
            if size == 0 {
                // The next one falls due within a few milliseconds at any rate worth generating.
                try await Task.sleep(for: .milliseconds(5))
                continue
            }
            batch.removeAll(keepingCapacity: true)
            for i in 0..<size { batch.append(try .checkIn(plan.checkIn(count + i, kioskID: kioskID))) }
            try await outbox.enqueue(batch)
            count += size
            made.withLock { $0 = count }
        }
    }
}
