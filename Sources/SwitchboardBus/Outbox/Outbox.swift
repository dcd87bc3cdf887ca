public import Foundation
package import GRDB
import SwitchboardProtocol
import SwitchboardStorage

/// One event waiting in an outbox for the broker's ACK.
public struct OutboxEntry: Sendable, Hashable {
    public var producerSeq: Int64
    public var eventID: String
    public var type: String
    /// The EVENT header as it is sent, every time (same `event_id`, same `producer_seq`).
    public var header: Data
    public var content: Data
    public var attempts: Int
}

/// An entry the broker refused for good, with its reason.
public struct Rejection: Sendable, Hashable {
    public var entry: OutboxEntry
    public var reason: String
}

/// What an outbox holds.
public struct OutboxCounts: Sendable, Hashable {
    /// Waiting for the broker's ACK.
    public var pending: Int
    /// Refused by the broker for good (kept for a person to look at; never resent).
    public var rejected: Int
    /// ACKed over the outbox's life.
    public var delivered: Int64
}

/// A producer's durable outbox: an event is written here (and fsynced) before anything is
/// sent, and deleted only when the broker ACKs it. Resends use the stored header, so the
/// broker sees the same `event_id` and `producer_seq` however often an event is sent.
///
/// The file is created with mode 0600 in a directory of mode 0700: it holds personal data.
///
/// Thread-safe (GRDB serialises access). Every call after `init` is async and runs its disk I/O
/// (an fsync per enqueue) on GRDB's own queue, never on the cooperative pool.
public final class Outbox: Sendable {
    public let path: String
    public let producer: String
    /// This process's run of the producer (`session` in headers of events enqueued now).
    public let session: String
    private let queue: DatabaseQueue
    /// `enqueue(shared:)`'s commits: the events of the callers that wait at the same time, in
    /// one transaction.
    private let shared: SharedCommits<NewEvent, OutboxEntry>

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Opens (or creates) the outbox at `path` for `producer`.
    /// - Throws: if the file belongs to another producer: one outbox, one producer name.
    public init(path: String, producer: String) throws {
        guard Producer.isValid(producer) else {
            throw Failure(description: "producer name '\(producer)' must be 1–64 characters of A–Z a–z 0–9 . _ : -")
        }
        self.path = path
        self.producer = producer
        self.session = UUIDv7.string()
        let queue = try PrivateDatabase.open(path: path) { migrator in
            migrator.registerMigration("v1") { db in
                try db.execute(
                    sql: """
                        CREATE TABLE outbox (
                            producer_seq INTEGER PRIMARY KEY,
                            event_id TEXT NOT NULL UNIQUE,
                            type TEXT NOT NULL,
                            created_at TEXT NOT NULL,
                            header BLOB NOT NULL,
                            content BLOB NOT NULL,
                            attempts INTEGER NOT NULL DEFAULT 0,
                            rejected TEXT
                        );
                        CREATE TABLE outbox_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                        CREATE TABLE imports (
                            digest TEXT PRIMARY KEY,
                            name TEXT NOT NULL,
                            rows INTEGER NOT NULL,
                            imported_at TEXT NOT NULL
                        );
                        """)
            }
        }
        self.queue = queue
        shared = SharedCommits(queue) { [producer, session] events, db in
            try Self.append(events, producer: producer, session: session, db).map { .success($0) }
        }
        try queue.write { db in
            if let owner = try String.fetchOne(db, sql: "SELECT value FROM outbox_meta WHERE key = 'producer'") {
                guard owner == producer else {
                    throw Failure(description: "outbox \(path) belongs to producer '\(owner)', not '\(producer)'")
                }
            } else {
                try db.execute(
                    sql: "INSERT INTO outbox_meta (key, value) VALUES ('producer', ?), ('next_seq', '1'), ('delivered', '0')",
                    arguments: [producer])
            }
        }
    }

    /// A new event to enqueue.
    public struct NewEvent: Sendable {
        public var type: String
        public var schema: String
        public var content: Data
        public var key: String?

        public init(type: String, schema: String, content: Data, key: String? = nil) {
            self.type = type
            self.schema = schema
            self.content = content
            self.key = key
        }
    }

    /// Enqueues events atomically (all or none) and durably; returns their entries.
    /// - Parameter importDigest: a file digest to record with the events, so the same file is
    ///   not imported twice; throws `Failure` if it was.
    @discardableResult
    public func enqueue(_ events: [NewEvent], importDigest: (digest: String, name: String)? = nil) async throws -> [OutboxEntry] {
        let (producer, session) = (self.producer, self.session)
        return try await writing { db in
            if let importDigest {
                if let row = try Row.fetchOne(
                    db, sql: "SELECT name, rows, imported_at FROM imports WHERE digest = ?", arguments: [importDigest.digest])
                {
                    let name: String = row[0]
                    let rows: Int = row[1]
                    let at: String = row[2]
                    throw Failure(description: "this file was already imported as '\(name)' (\(rows) rows) at \(at); nothing was queued")
                }
                try db.execute(
                    sql: "INSERT INTO imports (digest, name, rows, imported_at) VALUES (?, ?, ?, ?)",
                    arguments: [importDigest.digest, importDigest.name, events.count, Timestamp.now()])
            }
            return try Self.append(events, producer: producer, session: session, db)
        }
    }

    /// The outbox file's database, for a store that keeps its own tables in the same file so that
    /// its writes and the events they publish commit together (``append(_:in:)``). The store's
    /// migrations need identifiers of their own: the outbox's are `v1`, `v2`, ….
    package var database: DatabaseQueue { queue }

    /// Numbers and stores events in the transaction open on ``database`` (a caller's own commit):
    /// they are in the outbox if and only if that transaction commits. The sender finds them at
    /// its next load, as it finds every enqueued event.
    package func append(_ events: [NewEvent], in db: Database) throws -> [OutboxEntry] {
        try Self.append(events, producer: producer, session: session, db)
    }

    /// Numbers and stores events, in the caller's transaction.
    private static func append(_ events: [NewEvent], producer: String, session: String, _ db: Database) throws -> [OutboxEntry] {
        var entries: [OutboxEntry] = []
        entries.reserveCapacity(events.count)
        var next = Int64(try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM outbox_meta WHERE key = 'next_seq'")) ?? "1") ?? 1
        let insert = try db.cachedStatement(
            sql: "INSERT INTO outbox (producer_seq, event_id, type, created_at, header, content) VALUES (?, ?, ?, ?, ?, ?)")
        for event in events {
            let header = EventHeader(
                type: event.type, producer: producer, producerSeq: next, schema: event.schema, session: session, key: event.key)
            // The same bytes as `WireJSON.encode`, without a JSONEncoder (WireReadersTests).
            let headerData = header.wireJSON()
            try insert.execute(arguments: [next, header.eventID, event.type, header.time, headerData, event.content])
            entries.append(
                OutboxEntry(
                    producerSeq: next, eventID: header.eventID, type: event.type, header: headerData, content: event.content,
                    attempts: 0))
            next += 1
        }
        try db.cachedStatement(sql: "UPDATE outbox_meta SET value = ? WHERE key = 'next_seq'").execute(arguments: [String(next)])
        return entries
    }

    /// Enqueues one event durably, in one transaction with the other `enqueue(shared:)` calls
    /// that wait meanwhile (`SharedCommits`): a worker's concurrent handlers pay for one commit
    /// (one fsync) together instead of one each. As with `enqueue`, the event is on disk when this
    /// returns; if the shared commit fails, every event in it fails with that error and none is
    /// stored.
    public func enqueue(shared event: NewEvent) async throws -> OutboxEntry {
        do {
            return try await shared.submit(event)
        } catch let error as DatabaseError {
            throw StorageFault.classify(error, path: path, queue: nil)
        }
    }

    /// Pending entries in sequence order with `producer_seq > after`.
    public func pending(after: Int64 = 0, limit: Int) async throws -> [OutboxEntry] {
        try await queue.read { db in
            try Row.fetchAll(
                db,
                sql:
                    "SELECT producer_seq, event_id, type, header, content, attempts FROM outbox WHERE rejected IS NULL AND producer_seq > ? ORDER BY producer_seq LIMIT ?",
                arguments: [after, limit]
            ).map { row in
                OutboxEntry(producerSeq: row[0], eventID: row[1], type: row[2], header: row[3], content: row[4], attempts: row[5])
            }
        }
    }

    /// Records that entries were sent (again). The count only informs people, so it skips
    /// the fsync an enqueue pays: a power cut may lose the last counts, never an event.
    public func markAttempted(_ producerSeqs: [Int64]) async throws {
        guard !producerSeqs.isEmpty else { return }
        do {
            try await writingWithoutFsync { db in
                let statement = try db.cachedStatement(sql: "UPDATE outbox SET attempts = attempts + 1 WHERE producer_seq = ?")
                for seq in producerSeqs { try statement.execute(arguments: [seq]) }
            }
        } catch let error as DatabaseError {
            throw StorageFault.classify(error, path: path, queue: nil)
        }
    }

    /// Deletes ACKed entries; returns how many were still there.
    @discardableResult
    public func acknowledge(_ producerSeqs: [Int64]) async throws -> Int {
        guard !producerSeqs.isEmpty else { return 0 }
        // Deletes need not survive a power cut: a lost delete only means one resend, which the
        // broker answers as a duplicate. So they skip the fsync that enqueues pay.
        do {
            return try await acknowledgeWithoutFsync(producerSeqs)
        } catch let error as DatabaseError {
            throw StorageFault.classify(error, path: path, queue: nil)
        }
    }

    private func acknowledgeWithoutFsync(_ producerSeqs: [Int64]) async throws -> Int {
        try await writingWithoutFsync { db in
            var removed = 0
            let statement = try db.cachedStatement(sql: "DELETE FROM outbox WHERE producer_seq = ?")
            for seq in producerSeqs {
                try statement.execute(arguments: [seq])
                removed += db.changesCount
            }
            try db.execute(
                sql: "UPDATE outbox_meta SET value = CAST(CAST(value AS INTEGER) + ? AS TEXT) WHERE key = 'delivered'",
                arguments: [removed])
            return removed
        }
    }

    /// One immediate transaction committed with `synchronous = NORMAL` (no fsync; WAL keeps it
    /// consistent, a power cut may lose it). Only for writes whose loss costs nothing but a
    /// resend or a count.
    private func writingWithoutFsync<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            defer { try? db.execute(sql: "PRAGMA synchronous = FULL") }
            var result: T?
            try db.inTransaction(.immediate) {
                result = try body(db)
                return .commit
            }
            return result!
        }
    }

    /// Numbers an entry again after the broker answered `conflict` for it: its `producer_seq`
    /// belongs to another event in the journal, whose numbering for this producer reaches
    /// `producerHead`. That happens when this file went back (restored from a backup, or made
    /// anew under a name the broker knows): the counter hands out numbers the journal holds.
    /// The entry, still `eventID` at `producerSeq` and not refused, gets the counter's next
    /// number, the counter first raised past `producerHead`, in one transaction with the
    /// counter; its header is the same but for `producer_seq`. The broker never journaled the
    /// event (a known `event_id` is answered as a duplicate, whatever its number), so sending it
    /// under the new number cannot journal it twice (protocol section 7).
    /// - Returns: the entry as it is now, or `nil` when it is no longer there as named (ACKed,
    ///   refused, or numbered again already, by this process or another one on this file).
    public func renumber(_ producerSeq: Int64, eventID: String, above producerHead: Int64) async throws -> OutboxEntry? {
        try await queue.write { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT type, header, content, attempts FROM outbox WHERE producer_seq = ? AND event_id = ? AND rejected IS NULL",
                    arguments: [producerSeq, eventID])
            else { return nil }
            let stored = Int64(try String.fetchOne(db, sql: "SELECT value FROM outbox_meta WHERE key = 'next_seq'") ?? "1") ?? 1
            let next = max(stored, producerHead + 1)
            let headerData: Data = row[1]
            var header = try WireJSON.decode(EventHeader.self, from: headerData, frame: "header", code: .invalidHeader)
            header.producerSeq = next
            let renumbered = try WireJSON.encode(header)
            try db.execute(
                sql: "UPDATE outbox SET producer_seq = ?, header = ? WHERE producer_seq = ?", arguments: [next, renumbered, producerSeq])
            try db.execute(sql: "UPDATE outbox_meta SET value = ? WHERE key = 'next_seq'", arguments: [String(next + 1)])
            return OutboxEntry(producerSeq: next, eventID: eventID, type: row[0], header: renumbered, content: row[2], attempts: row[3])
        }
    }

    /// A write transaction; SQLite's failures come out as a `StorageFault` naming the cause (a
    /// full disk: "the disk is full"), which is what a refused check-in tells the person.
    private func writing<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await queue.write(body)
        } catch let error as DatabaseError {
            // Not asked for the errno: other writes may share the connection by now.
            throw StorageFault.classify(error, path: path, queue: nil)
        }
    }

    /// Marks an entry refused for good, with the broker's reason; it stays, unsent.
    public func reject(_ producerSeq: Int64, reason: String) async throws {
        try await writing { db in
            try db.execute(sql: "UPDATE outbox SET rejected = ? WHERE producer_seq = ?", arguments: [reason, producerSeq])
        }
    }

    /// Rejected entries with their reasons.
    public func rejected() async throws -> [Rejection] {
        try await queue.read { db in
            try Row.fetchAll(
                db,
                sql:
                    "SELECT producer_seq, event_id, type, header, content, attempts, rejected FROM outbox WHERE rejected IS NOT NULL ORDER BY producer_seq"
            ).map { row in
                Rejection(
                    entry: OutboxEntry(
                        producerSeq: row[0], eventID: row[1], type: row[2], header: row[3], content: row[4], attempts: row[5]),
                    reason: row[6])
            }
        }
    }

    public func counts() async throws -> OutboxCounts {
        try await queue.read { db in
            OutboxCounts(
                pending: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE rejected IS NULL") ?? 0,
                rejected: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE rejected IS NOT NULL") ?? 0,
                delivered: Int64(try String.fetchOne(db, sql: "SELECT value FROM outbox_meta WHERE key = 'delivered'") ?? "0") ?? 0)
        }
    }
}
