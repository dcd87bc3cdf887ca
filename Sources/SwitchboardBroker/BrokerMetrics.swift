// The event plane's metrics (deploy/prometheus/README.md). Counters move as the broker works;
// the gauges of the journal, the groups and the producers are set at each heartbeat, the
// groups' lag (a count over the journal) at most every `gaugeInterval`.
//
// Threading contract: made, used and dropped on the broker thread; its label caches are not
// locked. Label values that peers choose (event types, producer names) are bounded.

import CoreMetrics
import Foundation

final class BrokerMetrics {
    /// Distinct values of a peer-chosen label before further ones are counted as `other`.
    static let labelLimit = 256
    /// How often the groups' lag is counted from the journal.
    static let gaugeInterval: Duration = .seconds(5)

    private let factory: any MetricsFactory
    private var journaledByType: [String: Counter] = [:]
    let duplicates: Counter
    private var nacksByCode: [String: Counter] = [:]
    private var errorsByCode: [String: Counter] = [:]
    private var refusalsByKind: [String: Counter] = [:]
    let ackLatency: CoreMetrics.Timer
    let commits: Counter
    let head: Gauge
    let first: Gauge
    let events: Gauge
    let bytes: Gauge
    let subscriptions: Gauge
    /// The SQLite journal's WAL, made at its first report (PostgreSQL's store has none).
    private var wal: WALMetrics?
    private var groups: [String: GroupMetrics] = [:]
    private var producers: [String: ProducerGauges] = [:]
    var nextLagCount: ContinuousClock.Instant = .now

    init(factory: any MetricsFactory) {
        self.factory = factory
        duplicates = Counter(label: "switchboard_broker_events_duplicate_total", factory: factory)
        ackLatency = CoreMetrics.Timer(label: "switchboard_broker_ack_seconds", factory: factory)
        commits = Counter(label: "switchboard_broker_commits_total", factory: factory)
        head = Gauge(label: "switchboard_broker_journal_head", factory: factory)
        first = Gauge(label: "switchboard_broker_journal_first", factory: factory)
        events = Gauge(label: "switchboard_broker_journal_events", factory: factory)
        bytes = Gauge(label: "switchboard_broker_journal_bytes", factory: factory)
        subscriptions = Gauge(label: "switchboard_broker_fanout_subscriptions", factory: factory)
        subscriptions.record(0)
        // The NACK codes exist at 0 from the start, so the first NACK is an increase an alert
        // can see (a series born at 1 has no earlier sample for rate() to compare with).
        for code in ["conflict", "unavailable", "shutting-down"] {
            _ = labeled(&nacksByCode, "switchboard_broker_nacks_total", "code", code)
        }
    }

    /// The WAL's size now and its checkpoints so far (the checkpointer's running counts: the
    /// counters move by what changed since the last report).
    func journalWAL(frames: Int32, checkpoints: JournalCheckpointer.Counts) {
        let metrics = wal ?? WALMetrics(factory: factory)
        metrics.frames.record(Int64(frames))
        metrics.background.increment(by: Int64(checkpoints.background - metrics.reported.background))
        metrics.tails.increment(by: Int64(checkpoints.tails - metrics.reported.tails))
        metrics.bounded.increment(by: Int64(checkpoints.bounded - metrics.reported.bounded))
        metrics.failed.increment(by: Int64(checkpoints.failed - metrics.reported.failed))
        metrics.reported = checkpoints
        wal = metrics
    }

    func journaled(type: String, count: Int) {
        labeled(&journaledByType, "switchboard_broker_events_journaled_total", "type", type).increment(by: Int64(count))
    }

    func nack(code: String) { labeled(&nacksByCode, "switchboard_broker_nacks_total", "code", code).increment() }
    func error(code: String) { labeled(&errorsByCode, "switchboard_broker_errors_total", "code", code).increment() }
    func refusal(kind: String) { labeled(&refusalsByKind, "switchboard_broker_refusals_total", "kind", kind).increment() }

    private func labeled(_ cache: inout [String: Counter], _ name: String, _ label: String, _ value: String) -> Counter {
        if let counter = cache[value] { return counter }
        let key = cache.count < Self.labelLimit ? value : "other"
        if let counter = cache[key] { return counter }
        let counter = Counter(label: name, dimensions: [(label, key)], factory: factory)
        cache[key] = counter
        return counter
    }

    // MARK: Groups

    func group(_ name: String) -> GroupMetrics {
        if let metrics = groups[name] { return metrics }
        let metrics = GroupMetrics(group: name, factory: factory)
        groups[name] = metrics
        return metrics
    }

    /// A deleted group's series go away with it.
    func dropGroup(_ name: String) {
        groups.removeValue(forKey: name)?.destroy()
    }

    // MARK: Producers

    /// Sets the gauges of one producer (the first `labelLimit` producers seen; further ones
    /// are in `producers.list` only).
    func producer(_ name: String, _ health: ProducerHealth) {
        let gauges: ProducerGauges
        if let known = producers[name] {
            gauges = known
        } else {
            guard producers.count < Self.labelLimit else { return }
            gauges = ProducerGauges(producer: name, factory: factory)
            producers[name] = gauges
        }
        gauges.lastSeen.record(health.lastSeen.timeIntervalSince1970)
        if let outbox = health.outbox { gauges.outbox.record(outbox) }
        if let at = health.lastEvent { gauges.lastEvent.record(at.timeIntervalSince1970) }
        if let at = health.lastDelivery { gauges.lastDelivery.record(at.timeIntervalSince1970) }
    }
}

/// One group's series.
final class GroupMetrics {
    let lag: Gauge
    let pending: Gauge
    let members: Gauge
    let dead: Gauge
    let delivered: Counter
    let acked: Counter
    let redeliveries: Counter
    let deadLetters: Counter

    init(group: String, factory: any MetricsFactory) {
        let dimensions = [("group", group)]
        lag = Gauge(label: "switchboard_group_lag", dimensions: dimensions, factory: factory)
        pending = Gauge(label: "switchboard_group_pending", dimensions: dimensions, factory: factory)
        members = Gauge(label: "switchboard_group_members", dimensions: dimensions, factory: factory)
        dead = Gauge(label: "switchboard_group_dead_letters", dimensions: dimensions, factory: factory)
        delivered = Counter(label: "switchboard_group_delivered_total", dimensions: dimensions, factory: factory)
        acked = Counter(label: "switchboard_group_acked_total", dimensions: dimensions, factory: factory)
        redeliveries = Counter(label: "switchboard_group_redeliveries_total", dimensions: dimensions, factory: factory)
        deadLetters = Counter(label: "switchboard_group_dead_letters_total", dimensions: dimensions, factory: factory)
    }

    func destroy() {
        for gauge in [lag, pending, members, dead] { gauge.destroy() }
        for counter in [delivered, acked, redeliveries, deadLetters] { counter.destroy() }
    }
}

/// One producer's series.
struct ProducerGauges {
    let outbox: Gauge
    let lastSeen: Gauge
    let lastEvent: Gauge
    let lastDelivery: Gauge

    init(producer: String, factory: any MetricsFactory) {
        let dimensions = [("producer", producer)]
        outbox = Gauge(label: "switchboard_producer_outbox_depth", dimensions: dimensions, factory: factory)
        lastSeen = Gauge(label: "switchboard_producer_last_seen_timestamp_seconds", dimensions: dimensions, factory: factory)
        lastEvent = Gauge(label: "switchboard_producer_last_event_timestamp_seconds", dimensions: dimensions, factory: factory)
        lastDelivery = Gauge(label: "switchboard_producer_last_delivery_timestamp_seconds", dimensions: dimensions, factory: factory)
    }
}

/// The SQLite journal's WAL: its size, and its checkpoints by who ran them.
final class WALMetrics {
    let frames: Gauge
    let background: Counter
    let tails: Counter
    let bounded: Counter
    let failed: Counter
    /// The checkpointer's counts at the last report.
    var reported = JournalCheckpointer.Counts()

    init(factory: any MetricsFactory) {
        frames = Gauge(label: "switchboard_broker_journal_wal_frames", factory: factory)
        func checkpoints(_ by: String) -> Counter {
            Counter(label: "switchboard_broker_journal_checkpoints_total", dimensions: [("by", by)], factory: factory)
        }
        background = checkpoints("background")
        tails = checkpoints("tail")
        bounded = checkpoints("bound")
        failed = Counter(label: "switchboard_broker_journal_checkpoint_failures_total", factory: factory)
    }
}
