// The broker's state in a PostgreSQL database (issue 29): the same tables as the SQLite journal,
// for a broker that must outlive its host. The broker's loop is one synchronous thread, and
// postgres-nio is asynchronous: the store owns a one-thread event loop group, starts every
// statement on it, and blocks the broker's thread until the answer (or a time-out) arrives.
// That is the one place where blocking is right: the broker thread does nothing else while its
// journal works, exactly as it waits for SQLite's fsync.
//
// Group commit as with SQLite: one transaction per batch (BEGIN, at most two look-ups for
// duplicates, one multi-row INSERT of the whole batch through `unnest`, the group writes,
// COMMIT), with `synchronous_commit = on`, so the ACK follows a COMMIT that the server (and a
// synchronous standby, if it has one) made durable. `bus_seq` is given out by the store, densely,
// inside that transaction.

import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import SwitchboardProtocol
import SwitchboardStorage

/// Where `PostgresJournalStore` finds its database (the `journal.postgres.*` keys).
public struct PostgresJournalSettings: Sendable, Hashable {
    /// How the connection is protected.
    public enum TLSMode: String, Sendable, Hashable {
        /// TLS with the server's certificate checked against `caFile` (or the system's roots)
        /// and its name against `host`. The default.
        case verifyFull = "verify-full"
        /// No TLS: only to a server on loopback (tests, a server on the broker's own host).
        case disable
    }

    /// `journal.postgres.host`: the server's name or address, or a comma-separated list of them
    /// (`host` or `host:port` each, an IPv6 address in brackets when it has a port): a primary
    /// and its standbys. The store and the lease connect to them in order and use the first that
    /// accepts writes (`servers`).
    public var host = "127.0.0.1"
    /// `journal.postgres.port`: the port of every host given without one.
    public var port = 5432
    /// `journal.postgres.database`.
    public var database = "switchboard"
    /// `journal.postgres.user`.
    public var user = "switchboard"
    /// `journal.postgres.password_file`: a file (0600) holding the user's password, and nothing
    /// else (a final newline is ignored). Never the password itself: it would be on the command
    /// line or in the configuration. Nil: no password (trust or certificate authentication).
    public var passwordFile: String?
    /// `journal.postgres.tls`: `verify-full` or `disable` (loopback only).
    public var tls = TLSMode.verifyFull
    /// `journal.postgres.ca_file`: the PEM certificates that may sign the server's (nil: the
    /// system's trust roots).
    public var caFile: String?
    /// `journal.postgres.timeout`: the longest one statement (or connecting) may take; past it
    /// the store gives the connection up, the batch is NACKed as unavailable, and the next
    /// commit connects again.
    public var timeout: Duration = .seconds(10)
    /// The lease epoch this broker holds (`BrokerLease`), checked first in every transaction
    /// that writes: nil only for a store that no lease guards (tests of the store alone).
    var leaseEpoch: Int64?
    /// The lease's length (`lease.ttl`): a transaction of this broker's left open on the server
    /// longer than this (the broker cut off mid-transaction) is ended by the server, so the row
    /// it holds `FOR SHARE` does not keep a standby from taking over.
    var leaseTTL: Duration?

    public init() {}

    /// One server of `host`'s list.
    public struct Server: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, an IPv6 address in brackets.
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// Whether this is the machine's loopback, where `tls = disable` is allowed.
        public var isLoopback: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }
    }

    /// `host`'s servers, in order, each with its port (`port` where none is given).
    /// - Throws: a description of the first entry that is not `host` or `host:port` (empty, a
    ///   port outside 1–65535, an unclosed bracket); the caller names the key.
    public static func servers(in list: String, defaultPort: Int) throws(PostgresHostListError) -> [Server] {
        var servers: [Server] = []
        for raw in list.split(separator: ",", omittingEmptySubsequences: false) {
            let entry = raw.trimmingCharacters(in: .whitespaces)
            func bad(_ why: String) -> PostgresHostListError {
                PostgresHostListError(description: "entry \(servers.count + 1) of '\(list)' \(why)")
            }
            guard !entry.isEmpty else { throw bad("is empty") }
            var name = Substring(entry)
            var portText: Substring?
            if name.hasPrefix("[") {
                // [v6] or [v6]:port
                guard let close = name.firstIndex(of: "]") else { throw bad("opens a bracket it does not close") }
                let rest = name[name.index(after: close)...]
                name = name[name.index(after: name.startIndex)..<close]
                if !rest.isEmpty {
                    guard rest.hasPrefix(":") else { throw bad("has something after ']' that is not ':port'") }
                    portText = rest.dropFirst()
                }
            } else if let colon = name.firstIndex(of: ":"), name[name.index(after: colon)...].firstIndex(of: ":") == nil {
                // One colon: host:port. More: an IPv6 address without a port.
                portText = name[name.index(after: colon)...]
                name = name[..<colon]
            }
            guard !name.isEmpty, !name.contains(where: { $0.isWhitespace || $0 == "/" || $0 == "@" || $0 == "[" || $0 == "]" }) else {
                throw bad("is not a host name or address")
            }
            var port = defaultPort
            if let portText {
                guard let number = Int(portText), (1...65535).contains(number) else {
                    throw bad("has port '\(portText)', which is not 1–65535")
                }
                port = number
            }
            servers.append(Server(host: String(name), port: port))
        }
        return servers
    }

    /// `host` as a list of servers; empty when it does not parse (`validate()` refuses it).
    public var servers: [Server] { (try? Self.servers(in: host, defaultPort: port)) ?? [] }

    /// The database as logs name it, without any secret: libpq's form for several hosts,
    /// `postgresql://user@host1:port1,host2:port2/database`.
    public var location: String {
        let servers = self.servers
        let hosts = servers.isEmpty ? host : servers.map(\.description).joined(separator: ",")
        return "postgresql://\(user)@\(hosts)/\(database)"
    }

    /// Whether every host is this machine's loopback, where `tls = disable` is allowed.
    public var isLoopback: Bool {
        let servers = self.servers
        return !servers.isEmpty && servers.allSatisfy(\.isLoopback)
    }
}

/// An entry of `journal.postgres.host` that is not `host` or `host:port`.
public struct PostgresHostListError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// A setting of the PostgreSQL store that cannot work (an unreadable password file, a TLS
/// setting), found before anything connects. It never carries the password.
struct PostgresJournalSetupError: Error, CustomStringConvertible {
    var description: String
}

/// A server that answered but takes no writes (a standby in recovery, or read-only).
struct PostgresNotWritable: Error, CustomStringConvertible {
    var reason: String
    var description: String { "the server takes no writes: \(reason)" }
}

/// No server of the list accepts writes: what each one answered (never a password: the errors
/// are described as `PostgresJournalStore.fault` describes them).
struct PostgresNoWritableServer: Error {
    struct Failure {
        var server: PostgresJournalSettings.Server
        var error: any Error
    }
    var failures: [Failure]
}

/// No answer from the server in time.
struct PostgresTimedOut: Error, CustomStringConvertible {
    var seconds: String
    var description: String { "no answer from the server within \(seconds)" }
}

/// The broker's state in PostgreSQL (see the top of this file, and `JournalStore`).
///
/// Threading contract: as `JournalStore` says, one thread calls it, synchronously. That thread
/// must not be one of the store's own event loop (it is not: the store makes its own group) nor
/// any other NIO event loop, and should not be a cooperative-pool thread: every call blocks it on
/// `EventLoopFuture.wait()` until the server answers or `timeout` passes.
///
/// Connection loss: a statement that fails because the connection broke (or timed out) closes
/// the connection and throws a `StorageFault` (`the database server cannot be reached`), which
/// the broker handles as any journal outage (NACK `unavailable`). A statement on a connection
/// whose server went silent holds the calling thread for at most `timeout`; connecting again
/// for at most half a second (`connected(patience:)`). The next call connects again and reloads
/// `head`, `first`, `count` and `storedBytes` from the database, because a COMMIT whose answer
/// was lost may have been applied; the events of such a batch were NACKed, and their resends
/// are recognised as duplicates. With several servers in `journal.postgres.host`, every new
/// connection goes to the first of them that takes writes (`connectWritable`): the store
/// follows a failover to a promoted standby.
final class PostgresJournalStore: JournalStore {
    let settings: PostgresJournalSettings
    let location: String
    private(set) var brokerID = ""
    private(set) var head: Int64 = 0
    private(set) var first: Int64 = 1
    private(set) var storedBytes: Int64 = 0
    private(set) var count: Int64 = 0
    /// The highest `producer_seq` journaled per producer, loaded lazily (as in `Journal`).
    private var producerHigh: [String: Int64] = [:]

    private let group: MultiThreadedEventLoopGroup
    private let configurations: [PostgresConnection.Configuration]
    private let logger: Logger
    private var connection: PostgresConnection?
    private var connections = 0
    private var closed = false
    /// Whether the schema is known to exist (a new connection then reloads the view).
    private var migrated = false
    /// A connection being made, not yet waited for to the end.
    private var pending: ConnectAttempt?

    /// The advisory lock (a transaction's) under which the schema is created or checked.
    static let schemaLock: Int64 = 7_305_521_090_125_338

    /// The schema this code writes; a database with a higher one was made by a newer broker.
    static let schemaVersion = 1

    /// Connects, creates or checks the schema, and loads the journal's head.
    /// - Throws: `PostgresJournalSetupError` for a setting that cannot work, `StorageFault` when
    ///   the server cannot be reached or refuses.
    init(settings: PostgresJournalSettings, logger: Logger) throws {
        self.settings = settings
        location = settings.location
        var logger = logger
        // postgres-nio logs statements and their values at debug and trace: never those here.
        logger.logLevel = max(logger.logLevel, .warning)
        self.logger = logger
        configurations = try Self.connectionConfigurations(settings)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            // At start the broker waits for its database as long as `timeout` allows.
            _ = try connected(patience: settings.timeout * configurations.count + .seconds(1))
            try migrate()
            migrated = true
            try loadView(try connected())
        } catch {
            try? close()
            throw fault(error)
        }
    }

    /// How to connect to each server of `host`, in order: the password read from its file, TLS
    /// as `tls` says (each server's certificate checked against its own name).
    static func connectionConfigurations(_ settings: PostgresJournalSettings) throws -> [PostgresConnection.Configuration] {
        let servers: [PostgresJournalSettings.Server]
        do {
            servers = try PostgresJournalSettings.servers(in: settings.host, defaultPort: settings.port)
        } catch {
            throw PostgresJournalSetupError(description: "journal.postgres.host: \(error)")
        }
        let password = try Self.readPassword(settings.passwordFile)
        let tls: PostgresConnection.Configuration.TLS
        switch settings.tls {
        case .disable:
            guard settings.isLoopback else {
                throw PostgresJournalSetupError(
                    description:
                        "journal.postgres.tls = disable is allowed only when every server is on loopback (127.0.0.1, ::1, localhost), not \(settings.host)"
                )
            }
            tls = .disable
        case .verifyFull:
            var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
            tlsConfiguration.certificateVerification = .fullVerification
            if let caFile = settings.caFile { tlsConfiguration.trustRoots = .file(caFile) }
            do {
                tls = .require(try NIOSSLContext(configuration: tlsConfiguration))
            } catch {
                throw PostgresJournalSetupError(description: "journal.postgres.ca_file: the TLS set-up failed: \(error)")
            }
        }
        return servers.map { server in
            var configuration = PostgresConnection.Configuration(
                host: server.host, port: server.port, username: settings.user, password: password, database: settings.database,
                tls: tls)
            configuration.options.connectTimeout = Self.timeAmount(settings.timeout)
            return configuration
        }
    }

    /// Connects to the first of `configurations` that accepts writes, as libpq's
    /// `target_session_attrs=read-write` does: each in order, within `timeout` each (connecting,
    /// authenticating and asking), and one that is in recovery (a standby) or read-only is
    /// closed and passed over. After a failover the promoted standby is found wherever it is in
    /// the list, and a former primary that came back as a standby is skipped.
    ///
    /// - Returns: the connection; or the failure of the only server, or a
    ///   `PostgresNoWritableServer` naming what each server of several answered.
    static func connectWritable(
        _ configurations: [PostgresConnection.Configuration], on loop: any EventLoop, id: Int, timeout: Duration, logger: Logger
    ) -> EventLoopFuture<PostgresConnection> {
        var attempt = loop.makeFailedFuture(PostgresNoWritableServer(failures: [])) as EventLoopFuture<PostgresConnection>
        for configuration in configurations {
            attempt = attempt.flatMapError { error in
                let earlier = (error as? PostgresNoWritableServer)?.failures ?? []
                return Self.connectIfWritable(configuration, on: loop, id: id, timeout: timeout, logger: logger).flatMapErrorThrowing {
                    error in
                    let server = PostgresJournalSettings.Server(host: configuration.host ?? "?", port: configuration.port ?? 0)
                    throw PostgresNoWritableServer(failures: earlier + [.init(server: server, error: error)])
                }
            }
        }
        return attempt.flatMapErrorThrowing { error in
            // One server: its own failure, as before lists (a wrong password stays SQLSTATE 28P01).
            if let none = error as? PostgresNoWritableServer, none.failures.count == 1 { throw none.failures[0].error }
            throw error
        }
    }

    /// One server: connect, then ask whether it takes writes; within `timeout` in all. Called
    /// on `loop` (from `connectWritable`'s chain, whose callbacks run there).
    private static func connectIfWritable(
        _ configuration: PostgresConnection.Configuration, on loop: any EventLoop, id: Int, timeout: Duration, logger: Logger
    ) -> EventLoopFuture<PostgresConnection> {
        let promise = loop.makePromise(of: PostgresConnection.self)
        let seconds = StorageOutage.seconds(timeout)
        // Both run on `loop`: the first to come decides; a connection that arrives after the time
        // ran out is closed (postgres-nio wants every connection closed before it goes).
        let decided = NIOLoopBoundBox(false, eventLoop: loop)
        let timer = loop.scheduleTask(in: timeAmount(timeout)) {
            guard !decided.value else { return }
            decided.value = true
            promise.fail(PostgresTimedOut(seconds: seconds))
        }
        PostgresConnection.connect(on: loop, configuration: configuration, id: id, logger: logger).flatMap { connection in
            connection.query(
                "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'", logger: logger
            ).flatMapThrowing { result -> PostgresConnection in
                guard let row = result.rows.first else { throw PostgresNotWritable(reason: "no answer to pg_is_in_recovery()") }
                let (recovery, readOnly) = try row.decode((Bool, Bool).self)
                if recovery { throw PostgresNotWritable(reason: "in recovery (a standby)") }
                if readOnly { throw PostgresNotWritable(reason: "read-only (transaction_read_only)") }
                return connection
            }.flatMapError { error in
                // Closed before it goes, whatever the close says; the failure is the answer's.
                connection.close().recover { _ in }.flatMapThrowing { () -> PostgresConnection in
                    withExtendedLifetime(connection) {}
                    throw error
                }
            }
        }.whenComplete { result in
            timer.cancel()
            guard !decided.value else {
                if case .success(let late) = result { late.closeInBackground() }
                return
            }
            decided.value = true
            promise.completeWith(result)
        }
        return promise.futureResult
    }

    deinit {
        if !closed {
            connection?.closeInBackground()
            pending?.abandon()
            group.shutdownGracefully { _ in }
        }
    }

    static func readPassword(_ path: String?) throws -> String? {
        guard let path else { return nil }
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw PostgresJournalSetupError(
                description: "journal.postgres.password_file \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw PostgresJournalSetupError(
                description:
                    "journal.postgres.password_file \(path) can be read by others (mode \(String(info.st_mode & 0o777, radix: 8))): chmod 600 \(path)"
            )
        }
        guard let data = FileManager.default.contents(atPath: path), var text = String(data: data, encoding: .utf8) else {
            throw PostgresJournalSetupError(description: "journal.postgres.password_file \(path) cannot be read as UTF-8 text")
        }
        while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
        guard !text.isEmpty else { throw PostgresJournalSetupError(description: "journal.postgres.password_file \(path) is empty") }
        return text
    }

    // MARK: - Connection

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .milliseconds(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    /// The open connection, or a new one. A new connection after the first reloads the view:
    /// a commit whose answer was lost may have been applied.
    ///
    /// Connecting again never holds the broker's loop for the whole connect time-out: a new
    /// attempt is waited for at most `reconnectPatience` (a reachable server answers in
    /// milliseconds); one still under way then goes on in the background, and every call until
    /// it completes fails at once (the database server cannot be reached), so HEAD, fan-out and
    /// replay of what is cached go on while a database host is unreachable.
    private func connected(patience: Duration? = nil) throws(StorageFault) -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        connection = nil
        let attempt: ConnectAttempt
        let waitFor: Duration
        if let pending {
            attempt = pending
            waitFor = .zero
        } else {
            connections += 1
            attempt = ConnectAttempt(
                Self.connectWritable(configurations, on: group.next(), id: connections, timeout: settings.timeout, logger: logger))
            pending = attempt
            waitFor = patience ?? min(settings.timeout, Self.reconnectPatience)
        }
        guard let outcome = attempt.outcome(waitingAtMost: waitFor) else {
            throw StorageFault(cause: .unreachable, path: location, detail: "connecting to the server (still under way)")
        }
        pending = nil
        do {
            let opened = try outcome.get()
            connection = opened
            // Explicit, whatever the server's or the role's default: the ACK follows COMMIT only
            // once the commit record is flushed (and acknowledged by a synchronous standby).
            _ = try run(opened, "SET synchronous_commit = on")
            if let ttl = settings.leaseTTL {
                _ = try run(
                    opened,
                    "SET idle_in_transaction_session_timeout = \(max(1, ttl.components.seconds * 1000 + ttl.components.attoseconds / 1_000_000_000_000_000))"
                )
            }
            if migrated { try loadView(opened) }
            return opened
        } catch {
            let fault = fault(error)
            drop()
            throw fault
        }
    }

    /// How long a commit or read waits for a new connection before failing (it goes on).
    static let reconnectPatience: Duration = .milliseconds(500)

    /// Closes the connection (after a failure that leaves it unusable); the next call reconnects.
    private func drop() {
        connection?.closeInBackground()
        connection = nil
    }

    /// Waits for `future` on the calling thread, at most `timeout`; a time-out closes the
    /// connection (the statement is still outstanding on it).
    private func wait<Value: Sendable>(_ future: EventLoopFuture<Value>) throws -> Value {
        let loop = future.eventLoop
        let promise = loop.makePromise(of: Value.self)
        let seconds = StorageOutage.seconds(settings.timeout)
        // Both callbacks run on `loop`: whichever comes second completes nothing (NIO ignores a
        // second completion of a promise).
        let timer = loop.scheduleTask(in: Self.timeAmount(settings.timeout)) {
            promise.fail(PostgresTimedOut(seconds: seconds))
        }
        future.whenComplete { result in
            timer.cancel()
            promise.completeWith(result)
        }
        do {
            return try promise.futureResult.wait()
        } catch let error as PostgresTimedOut {
            drop()
            throw error
        }
    }

    private func run(
        _ connection: PostgresConnection, _ sql: String, _ binds: PostgresBindings = PostgresBindings()
    ) throws
        -> PostgresQueryResult
    {
        try wait(connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger))
    }

    /// Runs one statement outside a transaction (a read), connecting first if needed.
    private func query(_ sql: String, _ binds: PostgresBindings = PostgresBindings()) throws(StorageFault) -> [PostgresRow] {
        let connection = try connected()
        do {
            return try run(connection, sql, binds).rows
        } catch {
            let fault = fault(error)
            if connection.isClosed || (error as? PSQLError)?.code != .server { drop() }
            throw fault
        }
    }

    /// Runs `body` in one transaction and commits it: on return it is durable. A failure rolls it
    /// back (or, if the connection broke, the server does) and comes out as a `StorageFault`.
    /// - Parameter fenced: false only for the schema's creation, which any broker may do.
    private func transaction<T>(fenced: Bool = true, _ body: (PostgresConnection) throws -> T) throws(StorageFault) -> T {
        let connection = try connected()
        do {
            _ = try run(connection, "BEGIN")
            if fenced, let epoch = settings.leaseEpoch {
                // Fencing (issue 29): first in the transaction, this broker's lease must be the
                // current one and unexpired by the server's clock. FOR SHARE holds the row until
                // COMMIT, so a standby's take-over (an UPDATE of the row) waits for this commit,
                // and the new active broker reads a head that includes it: `bus_seq` stays
                // gap-free and no two brokers ever commit under one epoch.
                var binds = PostgresBindings()
                binds.append(epoch)
                let held = try run(
                    connection,
                    "SELECT 1 FROM broker_lease WHERE id = 1 AND epoch = $1 AND expires_at > clock_timestamp() FOR SHARE", binds
                ).rows
                guard !held.isEmpty else {
                    throw StorageFault(
                        cause: .notLeaseholder, path: location,
                        detail: "epoch \(epoch) lapsed or was taken over; nothing of this batch was committed")
                }
            }
            let value = try body(connection)
            let result = try run(connection, "COMMIT")
            // COMMIT of a transaction that failed is answered ROLLBACK, with no error.
            guard result.metadata.command == "COMMIT" else {
                throw PostgresJournalSetupError(description: "the server rolled the transaction back (\(result.metadata.command))")
            }
            return value
        } catch {
            let fault = fault(error)
            // A statement the server refused, or our own refusal (the lease): the connection is
            // sound and only the transaction is to be undone.
            if connection.isClosed || ((error as? PSQLError)?.code != .server && !(error is StorageFault)) {
                drop()
            } else {
                do { _ = try run(connection, "ROLLBACK") } catch { drop() }
            }
            throw fault
        }
    }

    /// `error` as the broker reports journal faults.
    private func fault(_ error: any Error) -> StorageFault {
        Self.fault(error, location: location)
    }

    /// `error` as the broker reports journal faults; the lease's too.
    static func fault(_ error: any Error, location: String) -> StorageFault {
        if let fault = error as? StorageFault { return fault }
        if let none = error as? PostgresNoWritableServer {
            // Several servers, none writable: each named with what it answered. Unreachable
            // (retried by the next commit) unless every one gave the same other cause, such as a
            // wrong password everywhere.
            let faults = none.failures.map { (server: $0.server, fault: fault($0.error, location: location)) }
            let causes = Set(faults.map(\.fault.cause))
            let cause = causes.count == 1 ? causes.first! : .unreachable
            let detail = faults.map { "\($0.server): \($0.fault.summary)" }.joined(separator: "; ")
            return StorageFault(cause: cause, path: location, detail: "no server accepts writes (\(detail))")
        }
        if let notWritable = error as? PostgresNotWritable {
            return StorageFault(cause: .unreachable, path: location, detail: notWritable.description)
        }
        if let timedOut = error as? PostgresTimedOut {
            return StorageFault(cause: .unreachable, path: location, detail: timedOut.description)
        }
        if let setup = error as? PostgresJournalSetupError {
            return StorageFault(cause: .other, path: location, detail: setup.description)
        }
        guard let psql = error as? PSQLError else {
            // NIO's connect and channel errors: refused, unreachable, reset.
            return StorageFault(cause: .unreachable, path: location, detail: "\(error)")
        }
        guard psql.code == .server, let info = psql.serverInfo else {
            // Never `String(reflecting:)`: it includes the statement and its values.
            let underlying = psql.underlying.map { ": \($0)" } ?? ""
            return StorageFault(cause: .unreachable, path: location, detail: "\(psql.code)\(underlying)")
        }
        let state = info[.sqlState] ?? "?????"
        // The message names the constraint or the object, never a row's values (`detail` would).
        let detail = "SQLSTATE \(state): \(info[.message] ?? "")"
        let cause: StorageFault.Cause =
            switch state {
            case "53100": .diskFull
            case "25006": .readOnly
            case "57P01", "57P02", "57P03": .unreachable
            case _ where state.hasPrefix("08"): .unreachable
            case _ where state.hasPrefix("53"): .ioError
            default: .other
            }
        return StorageFault(cause: cause, path: location, detail: detail)
    }

    // MARK: - Schema

    /// Creates the schema, or checks that it is one this code knows. Under an advisory lock, so
    /// two brokers starting on one empty database do not both create it.
    private func migrate() throws(StorageFault) {
        try transaction(fenced: false) { connection in
            _ = try run(connection, "SELECT pg_advisory_xact_lock(\(Self.schemaLock))")
            for statement in Self.schema { _ = try run(connection, statement) }
            var binds = PostgresBindings()
            binds.append(UUIDv7.string())
            _ = try run(connection, "INSERT INTO journal_meta (key, value) VALUES ('broker_id', $1) ON CONFLICT (key) DO NOTHING", binds)
            let version = try run(connection, "SELECT value FROM journal_meta WHERE key = 'schema_version'").rows.first
                .map { try $0.decode(String.self) }
            if let version {
                guard let number = Int(version), number <= Self.schemaVersion else {
                    throw PostgresJournalSetupError(
                        description:
                            "the database's schema is version \(version), made by a newer broker (this one knows \(Self.schemaVersion))")
                }
            } else {
                _ = try run(connection, "INSERT INTO journal_meta (key, value) VALUES ('schema_version', '\(Self.schemaVersion)')")
            }
        }
    }

    /// Version 1: the SQLite journal's tables, text compared byte by byte (`COLLATE "C"`, as
    /// SQLite does) so dead-letter pages have the same order whatever the database's locale.
    static let schema = [
        """
        CREATE TABLE IF NOT EXISTS journal_meta (key text COLLATE "C" PRIMARY KEY, value text NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS events (
            bus_seq bigint PRIMARY KEY,
            event_id text COLLATE "C" NOT NULL UNIQUE,
            producer text COLLATE "C" NOT NULL,
            producer_seq bigint NOT NULL,
            type text COLLATE "C" NOT NULL,
            received_at bigint NOT NULL,
            size bigint NOT NULL,
            header bytea NOT NULL,
            parent bytea NOT NULL,
            metadata bytea NOT NULL,
            content bytea NOT NULL,
            UNIQUE (producer, producer_seq))
        """,
        """
        CREATE TABLE IF NOT EXISTS groups (
            name text COLLATE "C" PRIMARY KEY, topics text NOT NULL, "cursor" bigint NOT NULL, created_at bigint NOT NULL,
            "start" text NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS group_settled (grp text COLLATE "C" NOT NULL, bus_seq bigint NOT NULL, PRIMARY KEY (grp, bus_seq))
        """,
        """
        CREATE TABLE IF NOT EXISTS group_attempts (
            grp text COLLATE "C" NOT NULL, bus_seq bigint NOT NULL, attempts integer NOT NULL, code text, message text,
            PRIMARY KEY (grp, bus_seq))
        """,
        """
        CREATE TABLE IF NOT EXISTS group_replays (
            grp text COLLATE "C" NOT NULL, bus_seq bigint NOT NULL, key text, PRIMARY KEY (grp, bus_seq))
        """,
        """
        CREATE TABLE IF NOT EXISTS dead_letters (
            grp text COLLATE "C" NOT NULL, bus_seq bigint NOT NULL, dlq_seq bigint, event_id text NOT NULL, type text NOT NULL,
            key text, attempts integer NOT NULL, code text COLLATE "C" NOT NULL, message text NOT NULL, "at" bigint NOT NULL,
            state text NOT NULL, PRIMARY KEY (grp, bus_seq))
        """,
        """
        CREATE INDEX IF NOT EXISTS dead_letters_order ON dead_letters ("at", grp, bus_seq)
        """,
        // The broker pair's lease (`BrokerLease`): one row, its epoch raised by every take-over.
        """
        CREATE TABLE IF NOT EXISTS broker_lease (
            id integer PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL, holder text NOT NULL, expires_at timestamptz NOT NULL)
        """,
        """
        INSERT INTO broker_lease (id, epoch, holder, expires_at) VALUES (1, 0, '', '-infinity') ON CONFLICT (id) DO NOTHING
        """,
        """
        CREATE OR REPLACE FUNCTION switchboard_json_text(doc bytea, field text) RETURNS text
            LANGUAGE plpgsql IMMUTABLE AS $$
            BEGIN
                RETURN convert_from(doc, 'UTF8')::jsonb ->> field;
            EXCEPTION WHEN others THEN
                RETURN NULL;
            END $$
        """,
        """
        CREATE OR REPLACE FUNCTION switchboard_json_bigint(doc bytea, field text) RETURNS bigint
            LANGUAGE plpgsql IMMUTABLE AS $$
            BEGIN
                RETURN (convert_from(doc, 'UTF8')::jsonb ->> field)::numeric::bigint;
            EXCEPTION WHEN others THEN
                RETURN NULL;
            END $$
        """,
    ]

    /// Reads the identity, head, first, count and size, and forgets the producers' marks.
    private func loadView(_ connection: PostgresConnection) throws {
        let meta = try run(
            connection,
            """
            SELECT (SELECT value FROM journal_meta WHERE key = 'broker_id'),
                   (SELECT value FROM journal_meta WHERE key = 'pruned_through'),
                   MAX(bus_seq), MIN(bus_seq), COALESCE(SUM(size), 0)::bigint, COUNT(*)
            FROM events
            """
        ).rows
        guard let row = meta.first else { throw PostgresJournalSetupError(description: "the journal's head could not be read") }
        let (broker, pruned, maximum, minimum, bytes, rows) = try row.decode((String?, String?, Int64?, Int64?, Int64, Int64).self)
        brokerID = broker ?? ""
        head = max(maximum ?? 0, pruned.flatMap { Int64($0) } ?? 0)
        first = minimum ?? head + 1
        storedBytes = bytes
        count = rows
        producerHigh = [:]
    }

    // MARK: - Events

    func commit(events batch: [PendingEvent], groups writes: [GroupWrite]) throws -> [AppendOutcome] {
        guard !batch.isEmpty || !writes.isEmpty else { return [] }
        var outcomes: [AppendOutcome] = []
        var nextSeq: Int64 = 0
        var added: Int64 = 0
        var addedBytes: Int64 = 0
        var highs: [String: Int64] = [:]
        try transaction { connection in
            // After a reconnect `connected()` reloaded the view: read it only now.
            outcomes = []
            outcomes.reserveCapacity(batch.count)
            nextSeq = head
            added = 0
            addedBytes = 0
            highs = producerHigh
            var rows = EventRows(capacity: batch.count)
            if !batch.isEmpty {
                let known = try lookUp(batch, highs: &highs, on: connection)
                var seen = BatchSeen()
                for event in batch {
                    let h = event.header
                    if let decided = seen.outcome(for: h, producerHead: highs[h.producer]) {
                        outcomes.append(decided)
                        continue
                    }
                    let high = highs[h.producer] ?? 0
                    // What SQLite's look-up and `INSERT OR IGNORE` find, in the same order: the
                    // same event_id first, then another event under this producer_seq.
                    if let seq = known.byID[h.eventID] {
                        outcomes.append(.duplicate(busSeq: seq))
                        highs[h.producer] = high
                        continue
                    }
                    if h.producerSeq <= high, let other = known.byPair[h.producer]?[h.producerSeq] {
                        outcomes.append(.conflict(existingEventID: other, producerHead: high))
                        highs[h.producer] = high
                        continue
                    }
                    nextSeq += 1
                    let header = event.storedHeader(busSeq: nextSeq)
                    let size = Int64(header.count + event.parent.count + event.metadata.count + event.content.count)
                    rows.append(busSeq: nextSeq, event: event, header: header, size: size)
                    seen.stored(h, busSeq: nextSeq)
                    highs[h.producer] = max(high, h.producerSeq)
                    added += 1
                    addedBytes += size
                    outcomes.append(.stored(busSeq: nextSeq, header: header))
                }
            }
            if added > 0 {
                _ = try run(
                    connection,
                    """
                    INSERT INTO events (bus_seq, event_id, producer, producer_seq, type, received_at, size, header, parent, metadata, content)
                    SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::int8[], $7::int8[],
                                         $8::bytea[], $9::bytea[], $10::bytea[], $11::bytea[])
                    """, rows.binds)
            }
            for write in writes { try apply(write, outcomes: outcomes, on: connection) }
        }
        // Only after COMMIT: the in-memory view follows the database.
        head = nextSeq
        count += added
        storedBytes += addedBytes
        producerHigh = highs
        return outcomes
    }

    /// The journaled events a batch may repeat: by `event_id` (all of the batch), and by
    /// `producer_seq` (those at or below their producer's high mark, which this loads for
    /// producers not seen since the store opened). Two round trips at most.
    private func lookUp(
        _ batch: [PendingEvent], highs: inout [String: Int64], on connection: PostgresConnection
    ) throws -> (
        byID: [String: Int64], byPair: [String: [Int64: String]]
    ) {
        let unknown = Array(Set(batch.map(\.header.producer)).filter { highs[$0] == nil })
        if !unknown.isEmpty {
            var binds = PostgresBindings()
            binds.append(unknown)
            for row in try run(
                connection, "SELECT producer, MAX(producer_seq) FROM events WHERE producer = ANY($1::text[]) GROUP BY producer", binds
            ).rows {
                let (producer, high) = try row.decode((String, Int64).self)
                highs[producer] = high
            }
            for producer in unknown where highs[producer] == nil { highs[producer] = 0 }
        }
        var pairProducers: [String] = []
        var pairSeqs: [Int64] = []
        for event in batch where event.header.producerSeq <= highs[event.header.producer] ?? 0 {
            pairProducers.append(event.header.producer)
            pairSeqs.append(event.header.producerSeq)
        }
        var binds = PostgresBindings()
        binds.append(batch.map(\.header.eventID))
        binds.append(pairProducers)
        binds.append(pairSeqs)
        var byID: [String: Int64] = [:]
        var byPair: [String: [Int64: String]] = [:]
        for row in try run(
            connection,
            """
            SELECT bus_seq, event_id, producer, producer_seq FROM events WHERE event_id = ANY($1::text[])
            UNION
            SELECT e.bus_seq, e.event_id, e.producer, e.producer_seq
            FROM events AS e JOIN unnest($2::text[], $3::int8[]) AS k(producer, seq) ON e.producer = k.producer AND e.producer_seq = k.seq
            """, binds
        ).rows {
            let (busSeq, eventID, producer, producerSeq) = try row.decode((Int64, String, String, Int64).self)
            byID[eventID] = busSeq
            byPair[producer, default: [:]][producerSeq] = eventID
        }
        return (byID, byPair)
    }

    func read(
        from: Int64, to: Int64?, topics: [String], limit: Int, scanWindow: Int64, excluding: [String],
        outcomes: (producer: String, families: [String])?
    ) throws -> (events: [JournaledEvent], through: Int64) {
        // Nothing beyond the head: answer before any arithmetic that a huge `from` could overflow.
        let start = max(from, first)
        guard start <= head else { return ([], min(max(from - 1, 0), head)) }
        let last = min(to ?? head, head, start + scanWindow - 1)
        guard start <= last else { return ([], max(from - 1, min(to ?? head, head))) }
        var sql = SQLBuilder("SELECT bus_seq, type, header, parent, metadata, content FROM events WHERE bus_seq BETWEEN ")
        sql.bind(start)
        sql.text(" AND ")
        sql.bind(last)
        sql.prefixes(of: "type", topics)
        for prefix in excluding {
            sql.text(" AND NOT starts_with(type, ")
            sql.bind(prefix)
            sql.text(")")
        }
        if let (producer, families) = outcomes {
            // Only events of these families whose content's `bus_seq` names an event `producer`
            // published (the header's producer is the publisher's principal, section 13.3).
            sql.prefixes(of: "type", families, always: true)
            sql.text(
                " AND EXISTS (SELECT 1 FROM events AS origin WHERE origin.bus_seq = switchboard_json_bigint(events.content, 'bus_seq')"
                    + " AND switchboard_json_text(origin.header, 'producer') = ")
            sql.bind(producer)
            sql.text(")")
        }
        sql.text(" ORDER BY bus_seq LIMIT ")
        sql.bind(Int64(limit))
        let events = try query(sql.sql, sql.binds).map(Self.event)
        let through = events.count == limit ? events[events.count - 1].busSeq : last
        return (events, through)
    }

    private static func event(_ row: PostgresRow) throws -> JournaledEvent {
        let (busSeq, type, header, parent, metadata, content) = try row.decode((Int64, String, Data, Data, Data, Data).self)
        return JournaledEvent(busSeq: busSeq, type: type, header: header, parent: parent, metadata: metadata, content: content)
    }

    func events(_ busSeqs: [Int64]) throws -> [JournaledEvent] {
        guard !busSeqs.isEmpty else { return [] }
        var binds = PostgresBindings()
        binds.append(busSeqs)
        return try query(
            "SELECT bus_seq, type, header, parent, metadata, content FROM events WHERE bus_seq = ANY($1::int8[]) ORDER BY bus_seq", binds
        ).map(Self.event)
    }

    func count(after cursor: Int64, topics: [String]) throws -> Int64 {
        var sql = SQLBuilder("SELECT COUNT(*) FROM events WHERE bus_seq > ")
        sql.bind(cursor)
        sql.prefixes(of: "type", topics)
        return try query(sql.sql, sql.binds).first?.decode(Int64.self) ?? 0
    }

    func prune(olderThan: Int64?, maxBytes: Int64?, chunk: Int, keepingAbove: Int64?) throws -> Int {
        guard count > 0 else { return 0 }
        var cutoff: Int64 = first - 1
        var binds = PostgresBindings()
        binds.append(first)
        binds.append(Int64(chunk))
        if let olderThan {
            // Retention keeps a contiguous journal: the oldest prefix while it is older than the
            // cut-off (received_at follows bus_seq, both from this broker).
            for row in try query("SELECT bus_seq, received_at FROM events WHERE bus_seq >= $1 ORDER BY bus_seq LIMIT $2", binds) {
                let (seq, receivedAt) = try row.decode((Int64, Int64).self)
                guard receivedAt < olderThan, seq <= keepingAbove ?? .max else { break }
                cutoff = max(cutoff, seq)
            }
        }
        if let maxBytes, storedBytes > maxBytes {
            var excess = storedBytes - maxBytes
            for row in try query("SELECT bus_seq, size FROM events WHERE bus_seq >= $1 ORDER BY bus_seq LIMIT $2", binds) {
                guard excess > 0 else { break }
                let (seq, size) = try row.decode((Int64, Int64).self)
                cutoff = max(cutoff, seq)
                excess -= size
            }
        }
        guard cutoff >= first else { return 0 }
        var deleted = 0
        var freed: Int64 = 0
        try transaction { connection in
            var binds = PostgresBindings()
            binds.append(cutoff)
            let row = try run(
                connection,
                "WITH gone AS (DELETE FROM events WHERE bus_seq <= $1 RETURNING size) SELECT COUNT(*), COALESCE(SUM(size), 0)::bigint FROM gone",
                binds
            ).rows.first
            if let row {
                let (rows, bytes) = try row.decode((Int64, Int64).self)
                deleted = Int(rows)
                freed = bytes
            }
            var meta = PostgresBindings()
            meta.append(String(cutoff))
            _ = try run(
                connection,
                "INSERT INTO journal_meta (key, value) VALUES ('pruned_through', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                meta)
        }
        count -= Int64(deleted)
        storedBytes -= freed
        first = cutoff + 1
        return deleted
    }

    // MARK: - Groups

    func loadGroups() throws -> [StoredGroup] {
        var groups: [StoredGroup] = []
        for row in try query(#"SELECT name, topics, "cursor", created_at, "start" FROM groups ORDER BY name"#) {
            let (name, topicsText, cursor, createdAt, start) = try row.decode((String, String, Int64, Int64, String).self)
            let topics = (JSONValue.parse(Data(topicsText.utf8))?.arrayOfStrings) ?? []
            var snapshot = GroupSnapshot(cursor: cursor)
            var binds = PostgresBindings()
            binds.append(name)
            for row in try query("SELECT bus_seq FROM group_settled WHERE grp = $1", binds) {
                snapshot.settled.insert(try row.decode(Int64.self))
            }
            for row in try query("SELECT bus_seq, attempts, code, message FROM group_attempts WHERE grp = $1", binds) {
                let (seq, attempts, code, message) = try row.decode((Int64, Int32, String?, String?).self)
                snapshot.attempts[seq] = GroupAttempts(
                    count: Int(attempts), lastFailure: code.map { GroupFailure(code: $0, message: message ?? "") })
            }
            for row in try query("SELECT bus_seq, key FROM group_replays WHERE grp = $1 ORDER BY bus_seq", binds) {
                let (seq, key) = try row.decode((Int64, String?).self)
                snapshot.replays.append(GroupCandidate(busSeq: seq, key: key))
            }
            groups.append(StoredGroup(name: name, topics: topics, createdAt: createdAt, start: start, snapshot: snapshot))
        }
        return groups
    }

    /// The `WHERE` of a dead-letter query.
    private static func deadLetterWhere(_ filter: DeadLetterFilter, into sql: inout SQLBuilder) {
        sql.text(" WHERE true")
        if let code = filter.code {
            sql.text(" AND code = ")
            sql.bind(code)
        }
        if let before = filter.before {
            sql.text(#" AND "at" < "#)
            sql.bind(before)
        }
        if let group = filter.group {
            sql.text(" AND grp = ")
            sql.bind(group)
        }
        if let state = filter.state {
            sql.text(" AND state = ")
            sql.bind(state.rawValue)
        }
        if let busSeq = filter.busSeq {
            sql.text(" AND bus_seq = ")
            sql.bind(busSeq)
        }
    }

    func deadLetterPage(
        _ filter: DeadLetterFilter, after cursor: DeadLetterCursor?, newest: Bool, limit: Int
    ) throws
        -> [DeadLetterRecord]
    {
        var sql = SQLBuilder(#"SELECT grp, bus_seq, dlq_seq, event_id, type, key, attempts, code, message, "at", state FROM dead_letters"#)
        Self.deadLetterWhere(filter, into: &sql)
        if let cursor {
            sql.text(newest ? #" AND ("at", grp, bus_seq) < ("# : #" AND ("at", grp, bus_seq) > ("#)
            sql.bind(cursor.at)
            sql.text(", ")
            sql.bind(cursor.group)
            sql.text(", ")
            sql.bind(cursor.busSeq)
            sql.text(")")
        }
        sql.text(newest ? #" ORDER BY "at" DESC, grp DESC, bus_seq DESC LIMIT "# : #" ORDER BY "at", grp, bus_seq LIMIT "#)
        sql.bind(Int64(limit))
        return try query(sql.sql, sql.binds).map { row in
            let (group, busSeq, dlqSeq, eventID, type, key, attempts, code, message, at, state) = try row.decode(
                (String, Int64, Int64?, String, String, String?, Int32, String, String, Int64, String).self)
            return DeadLetterRecord(
                group: group, busSeq: busSeq, dlqSeq: dlqSeq, eventID: eventID, type: type, key: key, attempts: Int(attempts), code: code,
                message: message, at: at, state: DeadLetterRecord.State(rawValue: state) ?? .dead)
        }
    }

    func deadLetterCodes(_ filter: DeadLetterFilter) throws -> [String: Int] {
        var sql = SQLBuilder("SELECT code, COUNT(*) FROM dead_letters")
        Self.deadLetterWhere(filter, into: &sql)
        sql.text(" GROUP BY code")
        var counts: [String: Int] = [:]
        for row in try query(sql.sql, sql.binds) {
            let (code, n) = try row.decode((String, Int64).self)
            counts[code] = Int(n)
        }
        return counts
    }

    func deadLetterCounts() throws -> [String: [DeadLetterRecord.State: Int]] {
        var counts: [String: [DeadLetterRecord.State: Int]] = [:]
        for row in try query("SELECT grp, state, COUNT(*) FROM dead_letters GROUP BY grp, state") {
            let (group, stateText, n) = try row.decode((String, String, Int64).self)
            if let state = DeadLetterRecord.State(rawValue: stateText) { counts[group, default: [:]][state] = Int(n) }
        }
        return counts
    }

    /// One group write inside the commit's transaction (as `Journal.apply` does in SQLite).
    /// Each is idempotent, so a batch whose COMMIT answer was lost can be written again.
    private func apply(_ write: GroupWrite, outcomes: [AppendOutcome], on connection: PostgresConnection) throws {
        func exec(_ sql: String, _ values: (inout PostgresBindings) -> Void) throws {
            var binds = PostgresBindings()
            values(&binds)
            _ = try run(connection, sql, binds)
        }
        switch write {
        case .create(let name, let topics, let cursor, let createdAt, let start):
            try exec(
                #"""
                INSERT INTO groups (name, topics, "cursor", created_at, "start") VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (name) DO UPDATE SET topics = excluded.topics, "cursor" = excluded."cursor",
                    created_at = excluded.created_at, "start" = excluded."start"
                """#
            ) {
                $0.append(name)
                $0.append(String(decoding: JSONValue.array(topics.map(JSONValue.string)).compactData, as: UTF8.self))
                $0.append(cursor)
                $0.append(createdAt)
                $0.append(start)
            }
        case .changes(let group, let changes):
            try apply(changes, group: group, on: connection)
        case .deadLetter(var record, let index):
            if let index, index < outcomes.count {
                switch outcomes[index] {
                case .stored(let seq, _), .duplicate(let seq): record.dlqSeq = seq
                case .conflict: break
                }
            }
            try exec(
                #"""
                INSERT INTO dead_letters (grp, bus_seq, dlq_seq, event_id, type, key, attempts, code, message, "at", state)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                ON CONFLICT (grp, bus_seq) DO UPDATE SET dlq_seq = excluded.dlq_seq, event_id = excluded.event_id, type = excluded.type,
                    key = excluded.key, attempts = excluded.attempts, code = excluded.code, message = excluded.message,
                    "at" = excluded."at", state = excluded.state
                """#
            ) {
                $0.append(record.group)
                $0.append(record.busSeq)
                $0.append(record.dlqSeq)
                $0.append(record.eventID)
                $0.append(record.type)
                $0.append(record.key)
                $0.append(Int32(clamping: record.attempts))
                $0.append(record.code)
                $0.append(record.message)
                $0.append(record.at)
                $0.append(record.state.rawValue)
            }
        case .deadLetterState(let group, let busSeq, let state):
            try exec("UPDATE dead_letters SET state = $1 WHERE grp = $2 AND bus_seq = $3") {
                $0.append(state.rawValue)
                $0.append(group)
                $0.append(busSeq)
            }
        case .reset(let group, let cursor, let start):
            try exec(#"UPDATE groups SET "cursor" = $1, "start" = $2 WHERE name = $3"#) {
                $0.append(cursor)
                $0.append(start)
                $0.append(group)
            }
            for table in ["group_settled", "group_attempts", "group_replays"] {
                try exec("DELETE FROM \(table) WHERE grp = $1") { $0.append(group) }
            }
        case .delete(let group):
            try exec("DELETE FROM groups WHERE name = $1") { $0.append(group) }
            for table in ["group_settled", "group_attempts", "group_replays", "dead_letters"] {
                try exec("DELETE FROM \(table) WHERE grp = $1") { $0.append(group) }
            }
        }
    }

    /// `GroupChanges` in the order its documentation gives, one statement per kind of row.
    private func apply(_ changes: GroupChanges, group: String, on connection: PostgresConnection) throws {
        func exec(_ sql: String, _ values: (inout PostgresBindings) -> Void) throws {
            var binds = PostgresBindings()
            binds.append(group)
            values(&binds)
            _ = try run(connection, sql, binds)
        }
        if let cursor = changes.cursor {
            try exec(#"UPDATE groups SET "cursor" = $2 WHERE name = $1"#) { $0.append(cursor) }
            try exec("DELETE FROM group_settled WHERE grp = $1 AND bus_seq <= $2") { $0.append(cursor) }
        }
        if !changes.settledRemoved.isEmpty {
            try exec("DELETE FROM group_settled WHERE grp = $1 AND bus_seq = ANY($2::int8[])") { $0.append(Array(changes.settledRemoved)) }
        }
        if !changes.settledAdded.isEmpty {
            try exec("INSERT INTO group_settled (grp, bus_seq) SELECT $1, unnest($2::int8[]) ON CONFLICT DO NOTHING") {
                $0.append(Array(changes.settledAdded))
            }
        }
        if !changes.attemptsRemoved.isEmpty {
            try exec("DELETE FROM group_attempts WHERE grp = $1 AND bus_seq = ANY($2::int8[])") {
                $0.append(Array(changes.attemptsRemoved))
            }
        }
        if !changes.attempts.isEmpty {
            let attempts = changes.attempts.sorted { $0.key < $1.key }
            try exec(
                """
                INSERT INTO group_attempts (grp, bus_seq, attempts, code, message)
                SELECT $1, s, a, CASE WHEN f THEN c END, CASE WHEN f THEN m END
                FROM unnest($2::int8[], $3::int4[], $4::text[], $5::text[], $6::bool[]) AS u(s, a, c, m, f)
                ON CONFLICT (grp, bus_seq) DO UPDATE SET attempts = excluded.attempts, code = excluded.code, message = excluded.message
                """
            ) {
                $0.append(attempts.map(\.key))
                $0.append(attempts.map { Int32(clamping: $0.value.count) })
                $0.append(attempts.map { $0.value.lastFailure?.code ?? "" })
                $0.append(attempts.map { $0.value.lastFailure?.message ?? "" })
                $0.append(attempts.map { $0.value.lastFailure != nil })
            }
        }
        if !changes.replaysRemoved.isEmpty {
            try exec("DELETE FROM group_replays WHERE grp = $1 AND bus_seq = ANY($2::int8[])") { $0.append(Array(changes.replaysRemoved)) }
        }
        if !changes.replaysAdded.isEmpty {
            // The last of two replays of one event wins, as `INSERT OR REPLACE` one by one does
            // (one statement may not update a row twice).
            var latest: [Int64: String?] = [:]
            for replay in changes.replaysAdded { latest.updateValue(replay.key, forKey: replay.busSeq) }
            let replays = latest.sorted { $0.key < $1.key }
            try exec(
                """
                INSERT INTO group_replays (grp, bus_seq, key)
                SELECT $1, s, CASE WHEN f THEN k END FROM unnest($2::int8[], $3::text[], $4::bool[]) AS u(s, k, f)
                ON CONFLICT (grp, bus_seq) DO UPDATE SET key = excluded.key
                """
            ) {
                $0.append(replays.map(\.key))
                $0.append(replays.map { $0.value ?? "" })
                $0.append(replays.map { $0.value != nil })
            }
        }
    }

    func close() throws {
        guard !closed else { return }
        closed = true
        if let connection {
            try? connection.close().wait()
        }
        connection = nil
        if let pending, case .success(let late)? = pending.outcome(waitingAtMost: settings.timeout) {
            try? late.close().wait()
        }
        pending?.abandon()
        pending = nil
        try group.syncShutdownGracefully()
    }
}

/// A connection being made on the store's event loop, whose outcome the broker's thread
/// collects when it is there.
private final class ConnectAttempt: @unchecked Sendable {
    // @unchecked: `result` and `abandoned` are written by the event loop and read by the
    // broker's thread, all only with `condition` locked.
    private let condition = NSCondition()
    private var result: Result<PostgresConnection, any Error>?
    private var abandoned = false

    init(_ future: EventLoopFuture<PostgresConnection>) {
        future.whenComplete { [self] outcome in
            condition.lock()
            result = outcome
            let late = abandoned
            condition.broadcast()
            condition.unlock()
            if late, case .success(let connection) = outcome { connection.closeInBackground() }
        }
    }

    /// The outcome, waiting for it at most `duration`; nil if it is not there by then. A
    /// connection returned is the caller's to close.
    func outcome(waitingAtMost duration: Duration) -> Result<PostgresConnection, any Error>? {
        let deadline = Date(timeIntervalSinceNow: Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while result == nil {
            guard condition.wait(until: deadline) else { break }
        }
        return result
    }

    /// Nobody will collect the outcome (the store is closing or gone): a connection that comes
    /// is closed rather than dropped open.
    func abandon() {
        condition.lock()
        abandoned = true
        let waiting = result
        condition.unlock()
        if case .success(let connection)? = waiting { connection.closeInBackground() }
    }
}

extension PostgresConnection {
    /// Closes the connection without waiting, keeping it until the close completes: postgres-nio
    /// traps (in a debug build) when a connection still open is released, which an owner going
    /// away (a store or lease never closed, a test that failed half-way) would otherwise do.
    func closeInBackground() {
        guard !isClosed else { return }
        close().whenComplete { _ in withExtendedLifetime(self) {} }
    }
}

/// A batch's rows as the columns of one `INSERT … SELECT FROM unnest(…)`.
private struct EventRows {
    var busSeqs: [Int64] = []
    var eventIDs: [String] = []
    var producers: [String] = []
    var producerSeqs: [Int64] = []
    var types: [String] = []
    var receivedAt: [Int64] = []
    var sizes: [Int64] = []
    var headers: [ByteBuffer] = []
    var parents: [ByteBuffer] = []
    var metadata: [ByteBuffer] = []
    var contents: [ByteBuffer] = []

    init(capacity: Int) {
        busSeqs.reserveCapacity(capacity)
        eventIDs.reserveCapacity(capacity)
        headers.reserveCapacity(capacity)
        contents.reserveCapacity(capacity)
    }

    mutating func append(busSeq: Int64, event: PendingEvent, header: Data, size: Int64) {
        busSeqs.append(busSeq)
        eventIDs.append(event.header.eventID)
        producers.append(event.header.producer)
        producerSeqs.append(event.header.producerSeq)
        types.append(event.header.type)
        receivedAt.append(event.receivedAt)
        sizes.append(size)
        headers.append(ByteBuffer(bytes: header))
        parents.append(ByteBuffer(bytes: event.parent))
        metadata.append(ByteBuffer(bytes: event.metadata))
        contents.append(ByteBuffer(bytes: event.content))
    }

    var binds: PostgresBindings {
        var binds = PostgresBindings(capacity: 11)
        binds.append(busSeqs)
        binds.append(eventIDs)
        binds.append(producers)
        binds.append(producerSeqs)
        binds.append(types)
        binds.append(receivedAt)
        binds.append(sizes)
        binds.append(headers)
        binds.append(parents)
        binds.append(metadata)
        binds.append(contents)
        return binds
    }
}

/// SQL text with numbered parameters (`$1`, `$2`, …) appended as it is written.
private struct SQLBuilder {
    var sql: String
    var binds = PostgresBindings()

    init(_ start: String) { sql = start }

    mutating func text(_ text: String) { sql += text }

    mutating func bind(_ value: Int64) {
        binds.append(value)
        sql += "$\(binds.count)"
    }

    mutating func bind(_ value: String) {
        binds.append(value)
        sql += "$\(binds.count)"
    }

    /// ` AND (starts_with(column, $n) OR …)`; nothing for no prefixes unless `always` (then it
    /// matches nothing, as an empty family list does).
    mutating func prefixes(of column: String, _ prefixes: [String], always: Bool = false) {
        guard !prefixes.isEmpty else {
            if always { sql += " AND false" }
            return
        }
        sql += " AND ("
        for (index, prefix) in prefixes.enumerated() {
            if index > 0 { sql += " OR " }
            sql += "starts_with(\(column), "
            bind(prefix)
            sql += ")"
        }
        sql += ")"
    }
}
