// Every metric a Switchboard program exports, with its help text and, for histograms, its
// buckets. The instrumented libraries name metrics through swift-metrics only; the factory
// (`SwitchboardMetricsFactory`) looks the name up here, so `/metrics` carries a `# HELP` line
// for each and the buckets suit what is measured. `deploy/prometheus/README.md` is the same
// table for operators; a test checks the two agree.

/// One metric's description.
public struct MetricDescription: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case counter, gauge, histogram
    }

    public var name: String
    public var kind: Kind
    public var labels: [String]
    public var help: String
    /// Upper bounds in the metric's unit (seconds for `_seconds`); histograms only.
    public var buckets: [Double]

    init(_ name: String, _ kind: Kind, _ labels: [String] = [], _ help: String, buckets: [Double] = []) {
        self.name = name
        self.kind = kind
        self.labels = labels
        self.help = help
        self.buckets = buckets
    }
}

public enum MetricCatalog {
    /// Latencies inside one process: a journal commit, a settle, a Majordomo round trip.
    static let fastBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
    /// Calls over a network to a back end, and a worker's handling of one event.
    static let callBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    public static let all: [MetricDescription] = [
        // Every program.
        .init("switchboard_build_info", .gauge, ["program", "version"], "Always 1; labels name the program and its protocol version."),
        .init("switchboard_ready", .gauge, [], "1 when /health/ready answers 200, else 0 (set at each scrape)."),
        .init("process_start_time_seconds", .gauge, [], "Start time of the process since the Unix epoch, in seconds."),
        .init("process_cpu_seconds_total", .counter, [], "User and system CPU time spent, in seconds."),
        .init("process_resident_memory_bytes", .gauge, [], "Resident memory size, in bytes."),
        .init("process_open_fds", .gauge, [], "Open file descriptors."),
        // The broker's event plane.
        .init("switchboard_broker_events_journaled_total", .counter, ["type"], "Events newly journaled, by event type."),
        .init("switchboard_broker_events_duplicate_total", .counter, [], "EVENTs already journaled, acknowledged again."),
        .init("switchboard_broker_nacks_total", .counter, ["code"], "NACKs sent, by code."),
        .init("switchboard_broker_errors_total", .counter, ["code"], "ERRORs sent for refused messages, by protocol error code."),
        .init("switchboard_broker_refusals_total", .counter, ["kind"], "security.refused events, by kind."),
        .init(
            "switchboard_broker_ack_seconds", .histogram, [], "From an EVENT's arrival to its ACK (journaled and synced).",
            buckets: fastBuckets),
        .init("switchboard_broker_commits_total", .counter, [], "Journal transactions of ingest (group commits)."),
        .init("switchboard_broker_journal_head", .gauge, [], "Highest bus_seq journaled."),
        .init("switchboard_broker_journal_first", .gauge, [], "Lowest bus_seq still journaled."),
        .init("switchboard_broker_journal_events", .gauge, [], "Events in the journal."),
        .init("switchboard_broker_journal_bytes", .gauge, [], "Stored bytes of the journal's events."),
        .init(
            "switchboard_broker_journal_wal_frames", .gauge, [],
            "SQLite journal: pages in its write-ahead log after the last commit."),
        .init(
            "switchboard_broker_journal_checkpoints_total", .counter, ["by"],
            "SQLite journal: WAL checkpoints by who ran them (background, tail, bound)."),
        .init(
            "switchboard_broker_journal_checkpoint_failures_total", .counter, [],
            "SQLite journal: WAL checkpoints SQLite refused (not counting busy)."),
        .init(
            "switchboard_broker_fanout_subscriptions", .gauge, [],
            "Topic subscriptions held by fan-out subscribers (one per prefix each subscriber asked for)."),
        .init("switchboard_group_lag", .gauge, ["group"], "Journaled events above the group's cursor that match its topics."),
        .init("switchboard_group_pending", .gauge, ["group"], "Deliveries in flight."),
        .init("switchboard_group_members", .gauge, ["group"], "Members joined."),
        .init("switchboard_group_delivered_total", .counter, ["group"], "DELIVERs sent, redeliveries included."),
        .init("switchboard_group_acked_total", .counter, ["group"], "Deliveries acknowledged."),
        .init("switchboard_group_redeliveries_total", .counter, ["group"], "Deliveries with an attempt above 1."),
        .init("switchboard_group_dead_letters_total", .counter, ["group"], "Events that became dead letters."),
        .init("switchboard_group_dead_letters", .gauge, ["group"], "Dead letters waiting for an operator (state dead)."),
        .init(
            "switchboard_producer_outbox_depth", .gauge, ["producer"],
            "Events waiting in the producer's outbox, from its last HEARTBEAT."),
        .init("switchboard_producer_last_seen_timestamp_seconds", .gauge, ["producer"], "The producer's last HEARTBEAT or EVENT."),
        .init("switchboard_producer_last_event_timestamp_seconds", .gauge, ["producer"], "The producer's last event newly journaled."),
        .init(
            "switchboard_producer_last_delivery_timestamp_seconds", .gauge, ["producer"],
            "The last ACK the producer reports having received, from its last HEARTBEAT."),
        // The broker's service plane.
        .init("switchboard_service_requests_total", .counter, ["service", "status"], "Majordomo requests answered, by REPLY status."),
        .init(
            "switchboard_service_request_seconds", .histogram, ["service"], "From a request's arrival to its final reply.",
            buckets: callBuckets),
        .init("switchboard_service_workers", .gauge, ["service"], "Workers registered."),
        // Programs with an outbox.
        .init("switchboard_outbox_depth", .gauge, [], "Events saved and not yet acknowledged by the broker."),
        .init("switchboard_outbox_acked_total", .counter, [], "Events the broker acknowledged (deleted from the outbox)."),
        .init("switchboard_outbox_refused_total", .counter, ["code"], "Events the broker refused for good (kept for a person)."),
        .init(
            "switchboard_outbox_refused", .gauge, [],
            "Refused events kept in the outbox for a person to look at (switchboard-kiosk status lists them)."),
        .init("switchboard_outbox_last_ack_timestamp_seconds", .gauge, [], "The last ACK from the broker."),
        // The kiosk.
        .init("switchboard_kiosk_checkins_total", .counter, [], "Check-ins recorded (saved in the outbox)."),
        // Workers and auth.
        .init("switchboard_worker_deliveries_total", .counter, ["group", "outcome"], "Deliveries settled: ack, nack, term."),
        .init(
            "switchboard_worker_handler_seconds", .histogram, ["group"], "From a delivery's arrival to its settlement.",
            buckets: callBuckets),
        .init(
            "switchboard_backend_requests_total", .counter, ["backend", "operation", "status"],
            "Back-end HTTP calls (each attempt), by HTTP status, or error when no response came."),
        .init(
            "switchboard_backend_request_seconds", .histogram, ["backend", "operation"], "Duration of each back-end HTTP attempt.",
            buckets: callBuckets),
        .init(
            "switchboard_backend_logins_total", .counter, ["backend", "outcome"],
            "Log-ins to a back end (auth) or token fetches from auth (workers): success, failure."),
        .init(
            "switchboard_backend_refreshes_total", .counter, ["backend", "reason"],
            "Credentials replaced before use: expired (past their lifetime) or rejected (the back end refused them)."),
    ]

    static let byName: [String: MetricDescription] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// The description of `name`, if the catalog has it.
    public static func description(of name: String) -> MetricDescription? { byName[name] }
}
