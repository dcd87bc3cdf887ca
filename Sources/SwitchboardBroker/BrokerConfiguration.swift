public import Configuration
import Foundation
import Logging
public import SwitchboardProtocol
public import SwitchboardRuntime

/// Everything `switchboard-broker` can be told. Defaults suit one machine; every key can come
/// from the configuration file, the environment (`SWITCHBOARD_BROKER_<KEY>`) or a flag
/// (`--<key>`, dots and underscores as dashes): `init(reader:)` lists them.
public struct BrokerConfiguration: Sendable {
    /// `ingest`: where producers send EVENTs (ROUTER).
    public var ingestEndpoint = "tcp://127.0.0.1:5560"
    /// `fanout`: the live stream (XPUB, topic = event type).
    public var fanoutEndpoint = "tcp://127.0.0.1:5561"
    /// `replay`: FETCH ranges of the journal (ROUTER).
    public var replayEndpoint = "tcp://127.0.0.1:5562"
    /// `data_dir`: holds `journal.sqlite` (with `journal.store = sqlite`) and `endpoints.json`.
    public var dataDirectory = ".switchboard/broker"
    /// `journal.store`: where the broker keeps its journal, group cursors and dead letters:
    /// `sqlite` (the default: `journal.sqlite` in `data_dir`) or `postgres` (`journal.postgres.*`).
    public var journalStore = JournalStoreKind.sqlite
    /// `journal.postgres.host`, `.port`, `.database`, `.user`, `.password_file`, `.tls`,
    /// `.ca_file`, `.timeout`: the PostgreSQL database, with `journal.store = postgres`. `host`
    /// may list a primary and its standbys (`a,b:5433`): the broker uses the first that takes
    /// writes, and looks again after a lost connection (a failover).
    public var postgres = PostgresJournalSettings()
    /// `lease.ttl`, `lease.holder`: with `journal.store = postgres` the broker serves only while
    /// it holds the database's lease (`BrokerLease`); a second broker on the same database waits
    /// as a standby, binding nothing, and takes over when the lease ends.
    public var lease = BrokerLeaseSettings()
    /// `heartbeat`: how often HEAD is published on the fan-out.
    public var heartbeat: Duration = .seconds(1)
    /// `batch_limit`: the most events journaled in one transaction (group commit).
    public var batchLimit = 2048
    /// `retention.max_age`: events received longer ago are deleted (nil: kept by age).
    public var retentionMaxAge: Duration? = .seconds(7 * 86_400)
    /// `retention.max_bytes`: the journal's stored event bytes are kept under this (nil: no bound).
    public var retentionMaxBytes: Int64? = 8 << 30
    /// `retention.interval`: how often retention runs.
    public var retentionInterval: Duration = .seconds(60)
    /// `min_version`: messages of a lower protocol version are refused (no downgrade).
    public var minimumVersion = ProtocolVersion.current
    /// `hwm`: `ZMQ_SNDHWM`/`ZMQ_RCVHWM` of the broker's sockets, in messages per peer.
    public var highWaterMark: Int32 = 100_000
    /// `max_frame_bytes`: `ZMQ_MAXMSGSIZE`; a peer sending a bigger frame is disconnected.
    public var maxFrameBytes: Int64 = 1 << 20
    /// `max_pending_bytes`: what one connection may have sent that the broker has not yet taken
    /// (the message still arriving, and any queued behind it); a peer over it is disconnected as
    /// the bytes arrive (`ReceiveGuard`). libzmq holds a multipart message whole before the
    /// broker sees it, so this, not `max_frame_bytes`, bounds what one message can cost.
    public var maxPendingBytes: Int64 = 16 << 20
    /// `service`: the Majordomo endpoint (ROUTER) of the service plane.
    public var serviceEndpoint = "tcp://127.0.0.1:5563"
    /// `groups`: the consumer-group endpoint (ROUTER), section 15.
    public var groupsEndpoint = "tcp://127.0.0.1:5564"
    /// `groups.ack_wait`: how long a member may hold a delivery unsettled.
    public var groupAckWait: Duration = .seconds(30)
    /// `groups.max_deliver`: deliveries of one event before it becomes a dead letter (1–100).
    public var groupMaxDeliver = 5
    /// `groups.backoff`: waits after the 1st, 2nd, … NACK without a delay (comma-separated).
    public var groupBackoff: [Duration] = [.seconds(1), .seconds(5), .seconds(30), .seconds(120)]
    /// `groups.liveness`: a member silent this long loses its deliveries to the others.
    public var groupLiveness: Duration = .seconds(3)
    /// `groups.commit_interval`: how long what members settle may wait for its commit. Settling
    /// and delivering are committed together at most this often (0: at the end of every loop
    /// iteration), so a delivery acked before the commit writes nothing at all. A broker crash
    /// loses at most this much of settling (protocol section 15.3).
    public var groupCommitInterval: Duration = .milliseconds(10)
    /// Whether the broker gives the allocator's free memory back to the kernel after a crowd of
    /// connections has gone (`HeapTrim`). That acts on the whole process, so only a broker that
    /// owns its process turns it on (`switchboard-broker` does); not a configuration key.
    public var trimsHeap = false
    /// `service.heartbeat`: how often the broker and workers send HEARTBEAT.
    public var serviceHeartbeat: Duration = .milliseconds(2500)
    /// `service.liveness`: heartbeats a worker may miss before it counts as dead (3–10).
    public var serviceLiveness = 3
    /// `service.wait`: how long a request for a service with no worker waits before the client
    /// gets 503 `no-worker`.
    public var serviceWait: Duration = .seconds(5)
    /// `service.queue_limit`: requests waiting per service; beyond it, 503 `queue-full`.
    public var serviceQueueLimit = 10_000
    /// `security.key`: the broker's secret certificate (`switchboard keygen --role broker`).
    /// With `security.certificates`, every endpoint is a CURVE server behind ZAP.
    public var securityKey: String?
    /// `security.certificates`: the directory of public certificates allowed to connect.
    public var securityCertificates: String?
    /// `insecure`: run without CURVE (for local experiments only). Without it, a broker with no
    /// `security.key` refuses to start.
    public var insecure = false
    /// `admin`: where `switchboard-broker` serves `/metrics` and `/health/*` (`HOST:PORT` or
    /// `none`; deploy/prometheus/README.md). Read by the program, not by `Broker`.
    public var adminAddress = "127.0.0.1:\(AdminPort.broker.defaultPort)"

    public init() {}

    /// The configuration keys, as written in a file.
    public static let keys = [
        "ingest", "fanout", "replay", "data_dir", "heartbeat", "batch_limit", "retention.max_age", "retention.max_bytes",
        "retention.interval", "min_version", "hwm", "max_frame_bytes", "max_pending_bytes", "service", "service.heartbeat",
        "service.liveness", "service.wait", "service.queue_limit", "security.key", "security.certificates", "insecure", "groups",
        "groups.ack_wait", "groups.max_deliver", "groups.backoff", "groups.liveness", "groups.commit_interval", "admin",
        "journal.store", "journal.postgres.host", "journal.postgres.port", "journal.postgres.database", "journal.postgres.user",
        "journal.postgres.password_file", "journal.postgres.tls", "journal.postgres.ca_file", "journal.postgres.timeout",
        "lease.ttl", "lease.holder", "log_format", "log_level",
    ]

    /// The broker's configuration: its own section only (`broker.*` in the file,
    /// `SWITCHBOARD_BROKER_*`, its flags), and the shared `admin`, `log_format` and `log_level`
    /// (`SWITCHBOARD_ADMIN`, …) under its own. A file without sections is the broker's alone.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError)
        -> ProgramConfiguration
    {
        try ProgramConfiguration(
            program: "broker", keys: keys, arguments: arguments, environment: environment, shared: ["admin", "log_format", "log_level"],
            sectioned: false)
    }

    /// Reads the broker's settings over the defaults above, then checks them (`validate()`).
    ///
    /// Keys read (each property above names its key and gives its default): `ingest`, `fanout`,
    /// `replay`, `service`, `groups` (ZeroMQ endpoints to bind); `data_dir`; `heartbeat`;
    /// `batch_limit`; `retention.max_age` (a duration, or `none`), `retention.max_bytes` (a size
    /// like `8GB`, or `none`), `retention.interval`; `min_version` (`1.0`); `hwm`;
    /// `max_frame_bytes`, `max_pending_bytes` (sizes); `service.heartbeat`, `service.liveness`,
    /// `service.wait`, `service.queue_limit`; `groups.ack_wait`, `groups.max_deliver`,
    /// `groups.backoff` (a list of durations), `groups.liveness`, `groups.commit_interval`;
    /// `security.key`, `security.certificates`, `insecure`; `admin`; `journal.store` (`sqlite`
    /// or `postgres`), `journal.postgres.host` (`host`, `host:port`, or a comma-separated list
    /// of them: the first that takes writes is used), `journal.postgres.port` (for a host without one),
    /// `journal.postgres.database`, `journal.postgres.user`, `journal.postgres.password_file` (a
    /// file holding the password; never the password itself), `journal.postgres.tls`
    /// (`verify-full`, or `disable` for a server on loopback), `journal.postgres.ca_file`,
    /// `journal.postgres.timeout`; `lease.ttl`, `lease.holder` (a broker pair on PostgreSQL,
    /// `BrokerLease`). Durations are written `500ms`, `30s`, `2m`, `12h`, `7d`.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        self.init()
        if let v = try reader.endpoint("ingest") { ingestEndpoint = v }
        if let v = try reader.endpoint("fanout") { fanoutEndpoint = v }
        if let v = try reader.endpoint("replay") { replayEndpoint = v }
        if let v = try reader.nonEmpty("data_dir") { dataDirectory = v }
        if let v = try reader.duration("heartbeat") { heartbeat = v }
        if let v = reader.int(forKey: "batch_limit") { batchLimit = v }
        if reader.string(forKey: "retention.max_age") == "none" {
            retentionMaxAge = nil
        } else if let v = try reader.duration("retention.max_age") {
            retentionMaxAge = v
        }
        if reader.string(forKey: "retention.max_bytes") == "none" {
            retentionMaxBytes = nil
        } else if let v = try reader.byteCount("retention.max_bytes") {
            retentionMaxBytes = v
        }
        if let v = try reader.duration("retention.interval") { retentionInterval = v }
        if let v = reader.string(forKey: "min_version") {
            guard let version = ProtocolVersion(v) else { throw ConfigurationError(key: "min_version", "must look like 1.0, got '\(v)'") }
            minimumVersion = version
        }
        if let v = reader.int(forKey: "hwm") { highWaterMark = Int32(clamping: v) }
        if let v = try reader.byteCount("max_frame_bytes") { maxFrameBytes = v }
        if let v = try reader.byteCount("max_pending_bytes") { maxPendingBytes = v }
        if let v = try reader.endpoint("service") { serviceEndpoint = v }
        if let v = try reader.duration("service.heartbeat") { serviceHeartbeat = v }
        if let v = reader.int(forKey: "service.liveness") { serviceLiveness = v }
        if let v = try reader.duration("service.wait") { serviceWait = v }
        if let v = reader.int(forKey: "service.queue_limit") { serviceQueueLimit = v }
        if let v = try reader.endpoint("groups") { groupsEndpoint = v }
        if let v = try reader.duration("groups.ack_wait") { groupAckWait = v }
        if let v = reader.int(forKey: "groups.max_deliver") { groupMaxDeliver = v }
        if let v = try reader.durations("groups.backoff") { groupBackoff = v }
        if let v = try reader.duration("groups.liveness") { groupLiveness = v }
        if let v = try reader.duration("groups.commit_interval") { groupCommitInterval = v }
        if let v = try reader.nonEmpty("admin") { adminAddress = v }
        if let v = try reader.nonEmpty("security.key") { securityKey = v }
        if let v = try reader.nonEmpty("security.certificates") { securityCertificates = v }
        if let v = reader.bool(forKey: "insecure") { insecure = v }
        if let v = reader.string(forKey: "journal.store") {
            guard let kind = JournalStoreKind(rawValue: v) else {
                throw ConfigurationError(key: "journal.store", "must be sqlite or postgres, got '\(v)'")
            }
            journalStore = kind
        }
        // A list: the command line hands `a,b` over as two values, so read it as one (a
        // variable's and a file's text are split at commas the same way, a file may give an array).
        if let v = reader.stringArray(forKey: "journal.postgres.host") { postgres.host = v.joined(separator: ",") }
        if let v = reader.int(forKey: "journal.postgres.port") { postgres.port = v }
        if let v = try reader.nonEmpty("journal.postgres.database") { postgres.database = v }
        if let v = try reader.nonEmpty("journal.postgres.user") { postgres.user = v }
        if let v = try reader.nonEmpty("journal.postgres.password_file") { postgres.passwordFile = v }
        if let v = reader.string(forKey: "journal.postgres.tls") {
            guard let mode = PostgresJournalSettings.TLSMode(rawValue: v) else {
                throw ConfigurationError(key: "journal.postgres.tls", "must be verify-full or disable, got '\(v)'")
            }
            postgres.tls = mode
        }
        if let v = try reader.nonEmpty("journal.postgres.ca_file") { postgres.caFile = v }
        if let v = try reader.duration("journal.postgres.timeout") { postgres.timeout = v }
        if let v = try reader.duration("lease.ttl") { lease.ttl = v }
        if let v = try reader.nonEmpty("lease.holder") { lease.holder = v }
        try validate()
    }

    /// Refuses settings that cannot work together, naming the key to change.
    public func validate() throws(ConfigurationError) {
        guard (1...100_000).contains(batchLimit) else {
            throw ConfigurationError(key: "batch_limit", "must be 1–100000, got \(batchLimit)")
        }
        guard heartbeat >= .milliseconds(10) else { throw ConfigurationError(key: "heartbeat", "must be at least 10ms") }
        guard groupAckWait >= .milliseconds(100), groupAckWait <= .seconds(86_400) else {
            throw ConfigurationError(key: "groups.ack_wait", "must be 100ms–1d")
        }
        guard (1...100).contains(groupMaxDeliver) else {
            throw ConfigurationError(key: "groups.max_deliver", "must be 1–100, got \(groupMaxDeliver)")
        }
        guard groupBackoff.count <= 20, groupBackoff.allSatisfy({ $0 >= .zero && $0 <= .seconds(86_400) }) else {
            throw ConfigurationError(key: "groups.backoff", "takes at most 20 waits of 0s–1d")
        }
        guard groupCommitInterval >= .zero, groupCommitInterval <= .seconds(1) else {
            throw ConfigurationError(key: "groups.commit_interval", "must be 0ms–1s")
        }
        guard groupLiveness >= heartbeat * 2 else {
            throw ConfigurationError(key: "groups.liveness", "must be at least two heartbeats (members hear HEAD once per heartbeat)")
        }
        // A minor above our own is allowed: during a staged upgrade every producer may already
        // speak a newer minor, and the operator shuts older ones out before this broker is replaced.
        guard minimumVersion.major == ProtocolVersion.current.major else {
            throw ConfigurationError(
                key: "min_version", "\(minimumVersion) is not of major version \(ProtocolVersion.current.major), which this broker speaks")
        }
        guard (securityKey == nil) == (securityCertificates == nil) else {
            throw ConfigurationError("security.key and security.certificates go together: give both, or neither")
        }
        if securityKey != nil && insecure {
            throw ConfigurationError("insecure and security.key contradict each other: give one or the other")
        }
        if insecure {
            let endpoints = [
                ("ingest", ingestEndpoint), ("fanout", fanoutEndpoint), ("replay", replayEndpoint), ("service", serviceEndpoint),
                ("groups", groupsEndpoint),
            ]
            for (name, endpoint) in endpoints where !EndpointReach.isLocal(endpoint) {
                throw ConfigurationError(
                    "\(name) \(endpoint) can be reached from other machines, and the broker runs without CURVE (insecure) only on loopback, ipc or inproc endpoints: give security.key and security.certificates (switchboard keys init)"
                )
            }
        }
        if securityKey == nil && !insecure {
            throw ConfigurationError(
                "no security.key and security.certificates (--security-key, --security-certificates): make them with 'switchboard keygen', or pass --insecure for a local experiment without encryption"
            )
        }
        if journalStore == .postgres {
            guard (1...65535).contains(postgres.port) else {
                throw ConfigurationError(key: "journal.postgres.port", "must be 1–65535, got \(postgres.port)")
            }
            do {
                _ = try PostgresJournalSettings.servers(in: postgres.host, defaultPort: postgres.port)
            } catch {
                throw ConfigurationError(
                    key: "journal.postgres.host", "must be host or host:port, or a comma-separated list of them: \(error)")
            }
            guard postgres.tls == .verifyFull || postgres.isLoopback else {
                throw ConfigurationError(
                    key: "journal.postgres.tls",
                    "disable is allowed only when every server is on loopback (127.0.0.1, ::1, localhost), not \(postgres.host): the journal holds personal data"
                )
            }
            guard postgres.timeout >= .milliseconds(100), postgres.timeout <= .seconds(600) else {
                throw ConfigurationError(key: "journal.postgres.timeout", "must be 100ms–10m")
            }
            guard lease.ttl >= .milliseconds(300), lease.ttl <= .seconds(300) else {
                throw ConfigurationError(key: "lease.ttl", "must be 300ms–5m")
            }
            guard lease.holder.count <= 200, !lease.holder.contains(where: { $0.isNewline }) else {
                throw ConfigurationError(key: "lease.holder", "must be at most 200 characters on one line")
            }
        }
        guard serviceHeartbeat >= .milliseconds(10) else {
            throw ConfigurationError(key: "service.heartbeat", "must be at least 10ms")
        }
        guard (3...10).contains(serviceLiveness) else {
            throw ConfigurationError(key: "service.liveness", "must be 3–10, got \(serviceLiveness)")
        }
        guard serviceWait >= .milliseconds(1) else { throw ConfigurationError(key: "service.wait", "must be at least 1ms") }
        guard (1...1_000_000).contains(serviceQueueLimit) else {
            throw ConfigurationError(key: "service.queue_limit", "must be 1–1000000, got \(serviceQueueLimit)")
        }
        guard maxFrameBytes >= Int64(SizeLimits.v1.message) else {
            throw ConfigurationError(
                key: "max_frame_bytes", "must be at least \(SizeLimits.v1.message) so the protocol's own limits apply first")
        }
        guard maxPendingBytes >= 2 * maxFrameBytes else {
            throw ConfigurationError(
                key: "max_pending_bytes",
                "must be at least twice max_frame_bytes (\(2 * maxFrameBytes)), got \(maxPendingBytes): a peer must be able to send one largest frame while another waits"
            )
        }
    }

    /// The settings of the service plane (Majordomo broker).
    public var serviceSettings: ServiceBroker.Settings {
        var settings = ServiceBroker.Settings()
        settings.endpoint = serviceEndpoint
        settings.heartbeat = serviceHeartbeat
        settings.liveness = serviceLiveness
        settings.wait = serviceWait
        settings.queueLimit = serviceQueueLimit
        settings.highWaterMark = highWaterMark
        settings.maxFrameBytes = maxFrameBytes
        settings.maxPendingBytes = maxPendingBytes
        return settings
    }

    /// The consumer groups' limits (section 15).
    var groupSettings: ConsumerGroupSettings {
        ConsumerGroupSettings(ackWait: groupAckWait, maxDeliver: groupMaxDeliver, backoff: groupBackoff, liveness: groupLiveness)
    }

    var journalPath: String { (dataDirectory as NSString).appendingPathComponent("journal.sqlite") }

    /// Opens the store `journal.store` names. Blocks until it is open (PostgreSQL: connected,
    /// schema created or checked): call it on the broker's thread, never on an event loop.
    func openJournal(logger: Logger) throws -> any JournalStore {
        switch journalStore {
        case .sqlite: try Journal(path: journalPath)
        case .postgres: try PostgresJournalStore(settings: postgres, logger: logger)
        }
    }
    /// Where a started broker writes its bound endpoints.
    public var endpointsPath: String { (dataDirectory as NSString).appendingPathComponent("endpoints.json") }
}

/// Where the broker keeps its state (`journal.store`).
public enum JournalStoreKind: String, Sendable, Hashable, CaseIterable {
    /// One SQLite file in `data_dir`: the embedded default.
    case sqlite
    /// A PostgreSQL database (`journal.postgres.*`).
    case postgres
}

extension Duration {
    var milliseconds: Int64 { wholeMilliseconds }
}
