// Which broker of a pair is active (issue 29): a lease row in the journal's PostgreSQL database.
//
// One row, `broker_lease`: an epoch, the holder's name, and when the lease ends by the database
// server's clock. A standby takes the lease only once it has ended (`expires_at <=
// clock_timestamp()`), raising the epoch; the holder renews it every third of its time; every
// transaction that writes the journal checks, first and `FOR SHARE`, that its epoch is current
// and unexpired (`PostgresJournalStore.transaction`). So:
//
// - A deposed broker cannot commit, hence cannot acknowledge, anything: its epoch is gone, or its
//   lease ended by the server's clock, which is the clock the standby's take-over used.
// - A take-over waits for a commit in flight (the row is held `FOR SHARE`), and the new active
//   broker reads the journal's head after it: `bus_seq` stays gap-free.
// - The holder also keeps a deadline of its own, measured from when it sent the last renewal
//   that succeeded (never later than the server's end of the lease): past it, it stops serving
//   even if it cannot reach the database to learn that it was deposed.
//
// Why a row and not an advisory lock: an advisory lock belongs to a server session, and a broker
// cut off from the database keeps its session alive on the server until TCP gives up (minutes),
// so the standby could not take over in a bounded time, and the cut-off broker could not tell
// that it had lost the lock; a row's end is a time both brokers read from one clock. Advisory
// locks are also not replicated: after a database failover nobody would hold one. The row is.

import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import SwitchboardStorage

/// `lease.*`: how a broker on PostgreSQL holds its lease.
public struct BrokerLeaseSettings: Sendable, Hashable {
    /// `lease.ttl`: how long a lease lasts unless renewed (renewed every third of it). A killed
    /// broker's standby takes over at most this long after the last renewal.
    public var ttl: Duration = .seconds(3)
    /// `lease.holder`: this broker's name in the lease row and the logs (default: host name and
    /// process id). Two running brokers must not share one.
    public var holder: String

    public init(holder: String = BrokerLeaseSettings.defaultHolder) {
        self.holder = holder
    }

    public static var defaultHolder: String {
        "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// How often a standby asks for the lease, and the holder renews it.
    var renewEvery: Duration { ttl / 3 }
    var pollEvery: Duration { max(.milliseconds(50), ttl / 6) }
}

/// The lease on one database; an actor, so its connection is used by one call at a time.
actor BrokerLease {
    /// A lease this broker holds.
    struct Term: Sendable, Hashable {
        let epoch: Int64
        /// Serve no longer than this without a renewal (this process's clock, measured from when
        /// the last successful renewal was sent).
        var deadline: ContinuousClock.Instant
    }

    /// What a request for the lease found.
    enum Answer: Sendable, Hashable {
        case acquired(Term)
        /// Another broker holds it for about `remaining` more.
        case held(by: String, remaining: Duration)
    }

    let settings: BrokerLeaseSettings
    let database: PostgresJournalSettings
    private let configurations: [PostgresConnection.Configuration]
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let logger: Logger
    private var connection: PostgresConnection?
    private var connections = 0
    private var prepared = false
    private var closed = false

    init(settings: BrokerLeaseSettings, database: PostgresJournalSettings, logger: Logger) throws {
        self.settings = settings
        self.database = database
        configurations = try PostgresJournalStore.connectionConfigurations(database)
        var logger = logger
        logger.logLevel = max(logger.logLevel, .warning)
        self.logger = logger
    }

    /// Asks for the lease: granted only when it has ended (or was never held).
    func acquire() async throws(StorageFault) -> Answer {
        try await prepare()
        let sent = ContinuousClock.now
        let rows = try await query(
            """
            UPDATE broker_lease SET epoch = epoch + 1, holder = $1, expires_at = clock_timestamp() + make_interval(secs => $2)
            WHERE id = 1 AND expires_at <= clock_timestamp() RETURNING epoch
            """, settings.holder, seconds(settings.ttl), limit: settings.ttl)
        if let row = rows.first {
            guard let epoch = try? row.decode(Int64.self) else {
                throw StorageFault(cause: .other, path: database.location, detail: "the lease row's epoch cannot be read")
            }
            return .acquired(Term(epoch: epoch, deadline: sent + settings.ttl))
        }
        let held = try await query(
            """
            SELECT holder, GREATEST(EXTRACT(EPOCH FROM (expires_at - clock_timestamp())), 0)::float8 FROM broker_lease WHERE id = 1
            """, limit: settings.ttl)
        guard let row = held.first else { return .held(by: "?", remaining: settings.ttl) }
        do {
            let (holder, remaining) = try row.decode((String, Double).self)
            return .held(by: holder, remaining: .milliseconds(Int64(remaining * 1000)))
        } catch {
            throw StorageFault(cause: .other, path: database.location, detail: "the lease row cannot be read")
        }
    }

    /// Renews `term`; nil when it is lost (ended, or another broker took it).
    func renew(_ term: Term) async throws(StorageFault) -> Term? {
        let sent = ContinuousClock.now
        let rows = try await query(
            """
            UPDATE broker_lease SET expires_at = clock_timestamp() + make_interval(secs => $2)
            WHERE id = 1 AND epoch = $1 AND expires_at > clock_timestamp() RETURNING epoch
            """, term.epoch, seconds(settings.ttl), limit: max(.milliseconds(10), ContinuousClock.now.duration(to: term.deadline)))
        guard !rows.isEmpty else { return nil }
        return Term(epoch: term.epoch, deadline: sent + settings.ttl)
    }

    /// Ends `term` now, after the broker has stopped: the standby takes over at its next ask.
    func release(_ term: Term) async {
        _ = try? await query(
            "UPDATE broker_lease SET expires_at = clock_timestamp() WHERE id = 1 AND epoch = $1", term.epoch, limit: settings.ttl)
    }

    func close() async {
        guard !closed else { return }
        closed = true
        if let connection { try? await connection.close() }
        connection = nil
        try? await group.shutdownGracefully()
    }

    deinit {
        // A lease never closed (its owner failed half-way): its connection is closed, not dropped.
        if !closed {
            connection?.closeInBackground()
            group.shutdownGracefully { _ in }
        }
    }

    // MARK: - Statements

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Creates the lease row if it is missing (a broker that never opened the journal yet).
    private func prepare() async throws(StorageFault) {
        guard !prepared else { return }
        let connection = try await connected()
        do {
            try await within(database.timeout, closing: connection) {
                try await connection.query("BEGIN", logger: self.logger)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "SELECT pg_advisory_xact_lock(\(PostgresJournalStore.schemaLock))"), logger: self.logger)
                for statement in PostgresJournalStore.schema where statement.contains("broker_lease") {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                }
                try await connection.query("COMMIT", logger: self.logger)
            }
            prepared = true
        } catch {
            throw failed(error)
        }
    }

    private func query(
        _ sql: String, _ values: any PostgresEncodable & Sendable..., limit: Duration
    ) async throws(StorageFault)
        -> [PostgresRow]
    {
        let connection = try await connected()
        var binds = PostgresBindings()
        do {
            for value in values { try binds.append(value) }
        } catch {
            throw StorageFault(cause: .other, path: database.location, detail: "a lease statement's value cannot be sent: \(error)")
        }
        let query = PostgresQuery(unsafeSQL: sql, binds: binds)
        do {
            return try await within(limit, closing: connection) { try await connection.query(query, logger: self.logger).collect() }
        } catch {
            throw failed(error)
        }
    }

    private func connected() async throws(StorageFault) -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        connections += 1
        let id = connections
        do {
            // The first server of the list that takes writes (the primary, wherever a failover
            // left it). Not under `within`: a connection it gave up on would be dropped unclosed
            // (postgres-nio traps on that), and a cancelled task (a stopping broker releasing its
            // lease) makes `within` give up at once. `connectWritable` bounds each server by the
            // time-out itself and closes a connection that comes too late.
            let opened = try await PostgresJournalStore.connectWritable(
                configurations, on: group.next(), id: id, timeout: database.timeout, logger: logger
            ).get()
            connection = opened
            return opened
        } catch {
            throw failed(error)
        }
    }

    /// A failure, with the connection dropped when it may be unusable (the next call connects
    /// again).
    private func failed(_ error: any Error) -> StorageFault {
        if let psql = error as? PSQLError, psql.code == .server, let info = psql.serverInfo {
            if let connection, !connection.isClosed {
                // A statement refused inside BEGIN … COMMIT leaves the transaction aborted.
                Task { [logger] in _ = try? await connection.query("ROLLBACK", logger: logger) }
            }
            return StorageFault(
                cause: .other, path: database.location, detail: "SQLSTATE \(info[.sqlState] ?? "?????"): \(info[.message] ?? "")")
        }
        connection?.closeInBackground()
        connection = nil
        prepared = false
        if error is StorageFault || error is PostgresNoWritableServer || error is PostgresNotWritable {
            return PostgresJournalStore.fault(error, location: database.location)
        }
        return StorageFault(cause: .unreachable, path: database.location, detail: "\(error)")
    }

    /// `body`, or a time-out fault after `limit`. A statement still waiting then is abandoned by
    /// closing its connection (which ends it), never waited for.
    private func within<T: Sendable>(
        _ limit: Duration, closing: PostgresConnection? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let location = database.location
        return try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                closing?.closeInBackground()
                throw StorageFault(cause: .unreachable, path: location, detail: "no answer within \(limit)")
            }
            defer { group.cancelAll() }
            guard let value = try await group.next() else {
                throw StorageFault(cause: .unreachable, path: location, detail: "no answer within \(limit)")
            }
            return value
        }
    }
}
