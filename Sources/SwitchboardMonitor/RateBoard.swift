// `switchboard-monitor watch --stats`: events per second by type and producer over the last 10
// seconds, and totals since start. Counts, names of types and producers only: no event content,
// so nothing personal.

import Foundation
public import SwitchboardBus
import SwitchboardProtocol
import Synchronization

/// The counts and the samples rates are computed from. A value: `count` as events arrive,
/// `sample(at:)` once a second; a rate is the difference between the newest sample and the
/// oldest within the window, over the time between them, so a late tick does not inflate it.
public struct RateBoard: Sendable {
    public struct Key: Hashable, Comparable, Sendable {
        public var type: String
        public var producer: String

        public init(type: String, producer: String) {
            self.type = type
            self.producer = producer
        }

        public static func < (a: Key, b: Key) -> Bool { (a.type, a.producer) < (b.type, b.producer) }
    }

    public struct Row: Equatable, Sendable {
        public var key: Key
        public var perSecond: Double
        public var total: Int

        public init(key: Key, perSecond: Double, total: Int) {
            self.key = key
            self.perSecond = perSecond
            self.total = total
        }
    }

    /// How far back rates look.
    public let window: Duration
    public private(set) var totals: [Key: Int] = [:]
    private var samples: [(at: ContinuousClock.Instant, totals: [Key: Int])] = []

    public init(window: Duration = .seconds(10)) { self.window = window }

    public mutating func count(_ key: Key) { totals[key, default: 0] += 1 }

    /// Keeps the totals as of `now`, and the samples back to one at least `window` old.
    public mutating func sample(at now: ContinuousClock.Instant) {
        samples.append((now, totals))
        while samples.count > 2, now - samples[1].at >= window { samples.removeFirst() }
    }

    /// The seconds the rates are over: from the oldest sample kept to the newest (at least 1).
    public var seconds: Double {
        guard let first = samples.first, let last = samples.last else { return 1 }
        let elapsed = (last.at - first.at).components
        return max(1, Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
    }

    /// Every key's rate and total, by type then producer.
    public func rows() -> [Row] {
        let then = samples.first?.totals ?? [:]
        let now = samples.last?.totals ?? totals
        return now.keys.sorted().map { key in
            Row(key: key, perSecond: Double((now[key] ?? 0) - (then[key] ?? 0)) / seconds, total: now[key] ?? 0)
        }
    }

    /// The table `--stats` redraws every second.
    public func render(at time: String) -> String {
        let rows = rows().map { [$0.key.type, $0.key.producer, String(format: "%.1f", $0.perSecond), "\($0.total)"] }
        return "\(time)  events per second over the last \(Int(seconds.rounded())) s\n"
            + Table.render(["type", "producer", "per second", "total"], rows, empty: "No events yet.")
    }

    /// The last word: the totals the stream ended with.
    public func renderTotals(at time: String) -> String {
        let rows = totals.keys.sorted().map { [$0.type, $0.producer, "\(totals[$0] ?? 0)"] }
        return "\(time)  totals\n" + Table.render(["type", "producer", "total"], rows, empty: "No events.")
    }

    /// The board the follower counts into and the renderer reads.
    private final class Shared: Sendable {
        let board = Mutex(RateBoard())
    }

    /// Counts the follower's events (`count` of them, or until cancelled) and redraws the table
    /// every second; prints the totals at the end.
    public static func run(follower: JournalFollower, count: Int?) async throws {
        let shared = Shared()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(1))
                    let text = shared.board.withLock { board in
                        board.sample(at: .now)
                        return board.render(at: Timestamp.now())
                    }
                    Table.emit(text, clearing: true)
                }
            }
            var seen = 0
            while count.map({ seen < $0 }) ?? true {
                if case .event(let event) = try await follower.next() {
                    shared.board.withLock { $0.count(Key(type: event.header.type, producer: event.header.producer)) }
                    seen += 1
                }
            }
            await follower.close()
            group.cancelAll()
            Table.emit(shared.board.withLock { $0.renderTotals(at: Timestamp.now()) }, clearing: false)
        }
    }
}
