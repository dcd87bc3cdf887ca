import Foundation
import GRDB
import GRDBSQLite
import SwitchboardProtocol
import SwitchboardStorage

/// The durable event journal: one SQLite file in WAL mode with `synchronous=FULL`, so a
/// committed transaction is on disk before `append` returns (the broker ACKs only then).
///
/// `append` takes a whole batch in one transaction: the group commit that makes durable
/// ingest fast. `bus_seq` is the table's integer primary key, assigned densely by the journal.
///
/// Its WAL is checkpointed by a thread of its own (`JournalCheckpointer`), not by the commit that
/// grows it past SQLite's limit.
///
/// Threading contract: used by one thread (the broker's loop); not `Sendable`.
public final class Journal: JournalStore {
    public let path: String
    var location: String { path }
    let queue: DatabaseQueue
    private let checkpointer: JournalCheckpointer
    private var closed = false
    /// The INSERT's text and blob values for the event being inserted.
    private let insertValues = InsertValues()
    /// The journal's identity, made when the file is created (`HEAD.broker`).
    public let brokerID: String
    public private(set) var head: Int64
    public private(set) var first: Int64
    /// Sum of stored frame sizes, for size-based retention.
    public private(set) var storedBytes: Int64
    public private(set) var count: Int64
    /// The highest `producer_seq` journaled per producer, loaded lazily: an event above it
    /// cannot be a resend, so it skips the duplicate look-up.
    private var producerHigh: [String: Int64] = [:]

    public convenience init(path: String) throws {
        try self.init(path: path, checkpoints: JournalCheckpointer.Limits())
    }

    /// - Parameter checkpoints: the WAL sizes at which its checkpoints run.
    init(path: String, checkpoints: JournalCheckpointer.Limits) throws {
        self.path = path
        queue = try PrivateDatabase.open(path: path, label: "journal") { migrator in
            migrator.registerMigration("v1") { db in
                try db.execute(
                    sql: """
                        CREATE TABLE events (
                            bus_seq INTEGER PRIMARY KEY,
                            event_id TEXT NOT NULL UNIQUE,
                            producer TEXT NOT NULL,
                            producer_seq INTEGER NOT NULL,
                            type TEXT NOT NULL,
                            received_at INTEGER NOT NULL,
                            size INTEGER NOT NULL,
                            header BLOB NOT NULL,
                            parent BLOB NOT NULL,
                            metadata BLOB NOT NULL,
                            content BLOB NOT NULL,
                            UNIQUE (producer, producer_seq)
                        );
                        CREATE TABLE journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                        """)
                try db.execute(
                    sql: "INSERT INTO journal_meta (key, value) VALUES ('broker_id', ?)", arguments: [UUIDv7.string()])
            }
            Self.registerGroupMigrations(&migrator)
        }
        let (brokerID, head, first, bytes, count, saved) = try queue.read { db in
            let lowest = try Int64.fetchOne(db, sql: "SELECT MIN(bus_seq) FROM events")
            let highest = try Int64.fetchOne(db, sql: "SELECT MAX(bus_seq) FROM events")
            // The row count and byte sum as the last commit or prune left them, when the table's
            // ends still match (anything that added or deleted rows without updating them, an
            // older broker say, moved an end); else both are counted again, which reads every
            // page of the table (3 s at 10 M events from the page cache, the whole file from disk).
            let totals = Totals(try String.fetchOne(db, sql: "SELECT value FROM journal_meta WHERE key = ?", arguments: [Totals.key]))
            let current = totals.flatMap { $0.lowest == (lowest ?? 0) && $0.highest == (highest ?? 0) ? $0 : nil }
            return (
                try String.fetchOne(db, sql: "SELECT value FROM journal_meta WHERE key = 'broker_id'") ?? "",
                // Retention may have deleted every event: the highest number ever given out is
                // then the one it recorded, so numbers are never reused.
                max(
                    highest ?? 0,
                    Int64(try String.fetchOne(db, sql: "SELECT value FROM journal_meta WHERE key = 'pruned_through'") ?? "0") ?? 0),
                lowest,
                try current?.bytes ?? Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM events") ?? 0,
                try current?.count ?? Int64.fetchOne(db, sql: "SELECT COUNT(*) FROM events") ?? 0,
                current != nil
            )
        }
        checkpointer = try JournalCheckpointer(path: path, limits: checkpoints)
        self.brokerID = brokerID
        self.head = head
        self.first = first ?? head + 1
        self.storedBytes = bytes
        self.count = count
        // Replaces SQLite's automatic checkpoint (itself a WAL hook) on the broker's connection.
        queue.inDatabase { db in
            _ = sqlite3_wal_hook(
                db.sqliteConnection,
                { context, connection, _, frames in
                    guard let context, let connection else { return SQLITE_OK }
                    Unmanaged<JournalCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(
                        connection: connection, frames: frames)
                    return SQLITE_OK
                }, Unmanaged.passUnretained(checkpointer).toOpaque())
        }
        if !saved {
            // Saved now, so the next open need not count again.
            try queue.write { db in
                try Totals(count: count, bytes: bytes, lowest: first ?? 0, highest: first == nil ? 0 : head).save(in: db)
            }
        }
    }

    /// What `journal_meta` keeps of the table's size: its row count and byte sum, with its lowest
    /// and highest `bus_seq` (0 and 0 when empty) at the time, to check them against at open.
    struct Totals: Equatable {
        static let key = "totals"
        var count: Int64
        var bytes: Int64
        var lowest: Int64
        var highest: Int64

        func save(in db: Database) throws {
            // Cached: it runs with every commit.
            try db.cachedStatement(
                sql: "INSERT INTO journal_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
            ).execute(arguments: [Self.key, "\(count) \(bytes) \(lowest) \(highest)"])
        }
    }

    /// Journals `batch` and applies the consumer groups' `groups` writes in one transaction
    /// (one fsync): a dead letter's `dlq.<group>` event and the group rows that settle it are
    /// durable together or not at all.
    func commit(events batch: [PendingEvent], groups: [GroupWrite]) throws -> [AppendOutcome] {
        var outcomes: [AppendOutcome] = []
        outcomes.reserveCapacity(batch.count)
        var nextSeq = head
        var added: Int64 = 0
        var addedBytes: Int64 = 0
        var highs = producerHigh
        try transaction { db in
            let insert = try db.cachedStatement(
                sql: """
                    INSERT OR IGNORE INTO events (bus_seq, event_id, producer, producer_seq, type, received_at, size,
                                        header, parent, metadata, content)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            let lookup = try db.cachedStatement(
                sql: """
                    SELECT bus_seq, event_id FROM events WHERE event_id = ? OR (producer = ? AND producer_seq = ?)
                    ORDER BY event_id = ? DESC LIMIT 1
                    """)
            // A duplicate or a clash inside the batch itself needs no map of its own (as
            // `BatchSeen` is for PostgreSQL's one INSERT per batch): each row is inserted before
            // the next event is looked at, and this transaction's look-up and `INSERT OR IGNORE`
            // see it.
            for event in batch {
                let producer = event.header.producer
                let producerSeq = event.header.producerSeq
                let high: Int64
                if let known = highs[producer] {
                    high = known
                } else {
                    high =
                        try Int64.fetchOne(db, sql: "SELECT MAX(producer_seq) FROM events WHERE producer = ?", arguments: [producer])
                        ?? 0
                }
                if producerSeq <= high {
                    let eventID = event.header.eventID
                    if let row = try Row.fetchOne(lookup, arguments: [eventID, producer, producerSeq, eventID]) {
                        let existingID: String = row[1]
                        let existingSeq: Int64 = row[0]
                        outcomes.append(
                            existingID == eventID
                                ? .duplicate(busSeq: existingSeq) : .conflict(existingEventID: existingID, producerHead: high))
                        highs[producer] = high
                        continue
                    }
                }
                nextSeq += 1
                let headerData = event.storedHeader(busSeq: nextSeq)
                let size = Int64(
                    headerData.count + event.parent.count + event.metadata.count + event.content.count)
                // OR IGNORE: a uniqueness clash is an answer, not an error (a failed statement
                // would also leave GRDB's cached statement reporting the error on its next use).
                try Self.insert(
                    event, busSeq: nextSeq, header: headerData, size: size, with: insert, values: insertValues, in: db)
                if sqlite3_changes(db.sqliteConnection) == 0 {
                    // Same event_id under a new producer_seq (a producer bug), or a resend we
                    // could not predict from the producer's high mark. Report what the journal
                    // holds.
                    nextSeq -= 1
                    let eventID = event.header.eventID
                    guard let row = try Row.fetchOne(lookup, arguments: [eventID, producer, producerSeq, eventID]) else {
                        throw JournalFailure(description: "insert of \(eventID) was ignored but no clashing row exists")
                    }
                    let existingID: String = row[1]
                    outcomes.append(
                        existingID == eventID
                            ? .duplicate(busSeq: row[0])
                            : .conflict(existingEventID: existingID, producerHead: max(high, producerSeq)))
                    highs[producer] = high
                    continue
                }
                highs[producer] = max(high, producerSeq)
                added += 1
                addedBytes += size
                outcomes.append(.stored(busSeq: nextSeq, header: headerData))
            }
            try Self.apply(groups, outcomes: outcomes, in: db)
            if added > 0 {
                // The first row ever, or the first after retention emptied the table, is `first`.
                try Totals(count: count + added, bytes: storedBytes + addedBytes, lowest: first, highest: nextSeq).save(in: db)
            }
        }
        // Only after the commit: the in-memory view follows the disk.
        head = nextSeq
        count += added
        storedBytes += addedBytes
        producerHigh = highs
        return outcomes
    }

    /// The header to journal and forward: the producer's own bytes with `"bus_seq":N` put first
    /// (cheap, and every field the producer sent travels unchanged). A header that already has a
    /// `bus_seq` key is rewritten instead, so the broker's number is the only one, and so is one
    /// whose `producer_seq` was written as an integral float (`54.0`): subscribers receive the
    /// integer `54` (section 2).
    static func storedHeader(raw: Data, fields: [String: JSONValue], busSeq: Int64) -> Data {
        keepsProducerBytes(raw: raw, fields: fields) ? prefixed(raw: raw, busSeq: busSeq) : rewrittenHeader(fields, busSeq: busSeq)
    }

    /// Runs the cached INSERT of `commit` for one event, its eleven values bound straight to
    /// SQLite. (Through GRDB's `StatementArguments` every value was boxed, collected and copied
    /// once more: 8 % of the broker thread's time at full ingest.) The text and blob values are
    /// copied into `values`, one buffer reused for every event, and bound in place
    /// (SQLITE_STATIC): binding them as transient copies cost a C string per text and a SQLite
    /// allocation per value, about 8 % of the broker thread. A failure throws GRDB's
    /// `DatabaseError` with SQLite's code, as `execute` did, so storage faults are told apart
    /// the same way.
    static func insert(
        _ event: PendingEvent, busSeq: Int64, header: Data, size: Int64, with statement: Statement, values: InsertValues,
        in db: Database
    ) throws {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        // The statement reads `values` until its bindings are cleared: cleared before the buffer
        // is written again.
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        values.start(
            fitting: event.header.eventID.utf8.count + event.header.producer.utf8.count + event.header.type.utf8.count
                + header.count + event.parent.count
                + event.metadata.count + event.content.count)
        func check(_ code: Int32) throws {
            guard code == SQLITE_OK || code == SQLITE_DONE else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: db.sqliteConnection.map { String(cString: sqlite3_errmsg($0)) },
                    sql: statement.sql)
            }
        }
        func text(_ index: Int32, _ value: String) throws {
            let copied = values.add(value)
            try check(sqlite3_bind_text(handle, index, copied.baseAddress, Int32(copied.count), nil))
        }
        func blob(_ index: Int32, _ value: Data) throws {
            let copied = values.add(value)
            // An empty value may have no address, which SQLite would bind as NULL.
            try check(
                copied.isEmpty
                    ? sqlite3_bind_zeroblob(handle, index, 0)
                    : sqlite3_bind_blob(handle, index, copied.baseAddress, Int32(copied.count), nil))
        }
        try check(sqlite3_bind_int64(handle, 1, busSeq))
        try text(2, event.header.eventID)
        try text(3, event.header.producer)
        try check(sqlite3_bind_int64(handle, 4, event.header.producerSeq))
        try text(5, event.header.type)
        try check(sqlite3_bind_int64(handle, 6, event.receivedAt))
        try check(sqlite3_bind_int64(handle, 7, size))
        try blob(8, header)
        try blob(9, event.parent)
        try blob(10, event.metadata)
        try blob(11, event.content)
        try check(sqlite3_step(handle))
    }

    /// Whether the stored header is the producer's bytes with `bus_seq` put first.
    static func keepsProducerBytes(raw: Data, fields: [String: JSONValue]) -> Bool {
        if case .double? = fields["producer_seq"] { return false }
        guard fields["bus_seq"] == nil, !fields.isEmpty,
            let brace = raw.firstIndex(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D })
        else { return false }
        return raw[brace] == UInt8(ascii: "{")
    }

    /// `raw` with `"bus_seq":N,` after its opening brace (`keepsProducerBytes` said it may).
    static func prefixed(raw: Data, busSeq: Int64) -> Data {
        raw.withUnsafeBytes { source -> Data in
            guard let brace = source.firstIndex(of: UInt8(ascii: "{")) else { return raw }
            let prefix: StaticString = "{\"bus_seq\":"
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: an Int64 has at most 20 digits
            return withUnsafeMutableBytes(of: &digits) { buffer in
                var value = UInt64(max(busSeq, 0))
                var start = buffer.count
                repeat {
                    start -= 1
                    buffer[start] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                } while value > 0
                let number = UnsafeRawBufferPointer(rebasing: buffer[start...])
                let rest = UnsafeRawBufferPointer(rebasing: source[(brace + 1)...])
                // One buffer, filled with three copies (appending byte ranges to a `Data` one by
                // one cost twice as much on the broker thread).
                var stored = Data(count: prefix.utf8CodeUnitCount + number.count + 1 + rest.count)
                stored.withUnsafeMutableBytes { out in
                    let head = prefix.utf8CodeUnitCount
                    out.copyMemory(from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: head))
                    UnsafeMutableRawBufferPointer(rebasing: out[head...]).copyMemory(from: number)
                    out[head + number.count] = UInt8(ascii: ",")
                    UnsafeMutableRawBufferPointer(rebasing: out[(head + number.count + 1)...]).copyMemory(from: rest)
                }
                return stored
            }
        }
    }

    /// The header written anew from its fields, with the broker's `bus_seq` and an integral
    /// `producer_seq`.
    static func rewrittenHeader(_ fields: [String: JSONValue], busSeq: Int64) -> Data {
        var rewritten = fields
        rewritten["bus_seq"] = .integer(busSeq)
        if case .double(let number)? = fields["producer_seq"] { rewritten["producer_seq"] = .integer(Int64(number)) }
        var writer = JSONWriter(capacity: 320)
        writer.value(.object(rewritten))
        return writer.data
    }

    /// Reads journaled events with `from <= bus_seq <= to`, matching any of `topics` (prefixes;
    /// empty = all), at most `limit` of them, examining at most `scanWindow` sequence numbers.
    /// - Returns: the events, and `through`: every matching event up to it has been returned.
    /// - Parameter excluding: type prefixes never returned (and counted as covered), whatever
    ///   `topics` says: dead letters for a principal that may not read them.
    func read(
        from: Int64, to: Int64?, topics: [String], limit: Int, scanWindow: Int64, excluding: [String],
        outcomes: (producer: String, families: [String])?
    ) throws
        -> (events: [JournaledEvent], through: Int64)
    {
        let start = max(from, first)
        // Nothing beyond the head: answer before any arithmetic that a huge `from` could overflow.
        guard start <= head else { return ([], min(max(from - 1, 0), head)) }
        let last = min(to ?? head, head, start + scanWindow - 1)
        guard start <= last else { return ([], max(from - 1, min(to ?? head, head))) }
        var sql = "SELECT bus_seq, type, header, parent, metadata, content FROM events WHERE bus_seq BETWEEN ? AND ?"
        var arguments: StatementArguments = [start, last]
        if !topics.isEmpty {
            sql += " AND (" + topics.map { _ in "substr(type, 1, ?) = ?" }.joined(separator: " OR ") + ")"
            for topic in topics { _ = arguments.append(contentsOf: [topic.utf8.count, topic]) }
        }
        for prefix in excluding {
            sql += " AND substr(type, 1, ?) <> ?"
            _ = arguments.append(contentsOf: [prefix.utf8.count, prefix])
        }
        if let (producer, families) = outcomes {
            // Only events of these families whose content's `bus_seq` names an event `producer`
            // published (the header's producer is the publisher's principal, section 13.3).
            sql += " AND (" + families.map { _ in "substr(type, 1, ?) = ?" }.joined(separator: " OR ") + ")"
            for family in families { _ = arguments.append(contentsOf: [family.utf8.count, family]) }
            sql += """
                 AND EXISTS (SELECT 1 FROM events AS origin \
                WHERE origin.bus_seq = json_extract(CAST(events.content AS TEXT), '$.bus_seq') \
                AND json_extract(CAST(origin.header AS TEXT), '$.producer') = ?)
                """
            _ = arguments.append(contentsOf: [producer])
        }
        sql += " ORDER BY bus_seq LIMIT ?"
        _ = arguments.append(contentsOf: [limit])
        // One SELECT is consistent by itself, so it runs outside a transaction: `queue.read`
        // wrapped each in a savepoint and `query_only` switches, compiled anew every call, and
        // the SELECT's own statement is kept (its text varies only with the number of topics,
        // exclusions and families). Group deliveries read here all the time: this was 15 % of
        // the broker thread's samples in the workers bench.
        let events = try queue.inDatabase { db in
            try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
                JournaledEvent(
                    busSeq: row[0], type: row[1], header: row[2], parent: row[3], metadata: row[4], content: row[5])
            }
        }
        let through = events.count == limit ? events[events.count - 1].busSeq : last
        return (events, through)
    }

    /// Deletes events received before `olderThan` (Unix ms), then the oldest until the stored
    /// size is at most `maxBytes`; at most `chunk` rows per call, so the loop stays responsive.
    /// - Returns: how many events were deleted.
    /// - Parameter keepingAbove: age alone deletes nothing above this `bus_seq` (the lowest
    ///   consumer-group cursor); size still may.
    func prune(olderThan: Int64?, maxBytes: Int64?, chunk: Int, keepingAbove: Int64?) throws -> Int {
        guard count > 0 else { return 0 }
        var cutoff: Int64 = first - 1
        try queue.read { db in
            if let olderThan {
                // Retention keeps a contiguous journal: delete the oldest prefix while it is
                // older than the cut-off (received_at follows bus_seq, both from this broker).
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT bus_seq, received_at FROM events WHERE bus_seq >= ? ORDER BY bus_seq LIMIT ?",
                    arguments: [first, chunk])
                while let row = try rows.next() {
                    let receivedAt: Int64 = row[1]
                    let seq: Int64 = row[0]
                    guard receivedAt < olderThan, seq <= keepingAbove ?? .max else { break }
                    cutoff = max(cutoff, seq)
                }
            }
            if let maxBytes, storedBytes > maxBytes {
                var excess = storedBytes - maxBytes
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT bus_seq, size FROM events WHERE bus_seq >= ? ORDER BY bus_seq LIMIT ?",
                    arguments: [first, chunk])
                while excess > 0, let row = try rows.next() {
                    let seq: Int64 = row[0]
                    let size: Int64 = row[1]
                    cutoff = max(cutoff, seq)
                    excess -= size
                }
            }
        }
        guard cutoff >= first else { return 0 }
        var deleted = 0
        var freed: Int64 = 0
        try transaction { db in
            freed = try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM events WHERE bus_seq <= ?", arguments: [cutoff]) ?? 0
            try db.execute(sql: "DELETE FROM events WHERE bus_seq <= ?", arguments: [cutoff])
            deleted = db.changesCount
            let left = count - Int64(deleted)
            try Totals(count: left, bytes: storedBytes - freed, lowest: left == 0 ? 0 : cutoff + 1, highest: left == 0 ? 0 : head)
                .save(in: db)
            try db.execute(
                sql:
                    "INSERT INTO journal_meta (key, value) VALUES ('pruned_through', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [String(cutoff)])
        }
        count -= Int64(deleted)
        storedBytes -= freed
        first = cutoff + 1
        // Producers' highs stay valid: deleted events are still "seen" for their sequences.
        return deleted
    }

    /// Runs a write transaction; a failure comes out as a `StorageFault` naming its cause (a full disk, a
    /// read-only file system), which NACKs and the log repeat. SQLite has rolled the transaction
    /// back: nothing of it is on disk, and the in-memory view (`head`, `count`) is unchanged.
    private func transaction(_ body: (Database) throws -> Void) throws(StorageFault) {
        do {
            try queue.inTransaction(.immediate) { db in
                try body(db)
                return .commit
            }
        } catch {
            throw StorageFault.classify(error, path: path, queue: queue)
        }
    }

    /// What the WAL's checkpoints have done so far.
    var checkpoints: JournalCheckpointer.Counts { checkpointer.counts }

    /// The frames the last commit left in the WAL.
    var walFrames: Int32 { checkpointer.frames }

    var wal: (frames: Int32, checkpoints: JournalCheckpointer.Counts)? { (checkpointer.frames, checkpointer.counts) }

    public func close() throws {
        guard !closed else { return }
        closed = true
        stopCheckpointing()
        // The last connection to close checkpoints the whole WAL and removes it.
        try queue.close()
    }

    /// Unhooks the checkpointer from the broker's connection and ends its thread.
    private func stopCheckpointing() {
        queue.inDatabase { db in _ = sqlite3_wal_hook(db.sqliteConnection, nil, nil) }
        checkpointer.stop()
    }

    deinit {
        if !closed { stopCheckpointing() }
    }
}

extension Journal.Totals {
    /// Reads "count bytes lowest highest"; nil for anything else.
    init?(_ text: String?) {
        let fields = (text ?? "").split(separator: " ").compactMap { Int64($0) }
        guard fields.count == 4, fields.allSatisfy({ $0 >= 0 }) else { return nil }
        self.init(count: fields[0], bytes: fields[1], lowest: fields[2], highest: fields[3])
    }
}

/// One buffer, reused for every event, that the journal's INSERT binds its text and blob values
/// from in place. The broker thread's alone, like the journal.
final class InsertValues {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private var used = 0

    init(capacity: Int = 16 << 10) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    /// Empties the buffer and makes room for `size` bytes. Any binding to the old contents must
    /// have been cleared.
    func start(fitting size: Int) {
        used = 0
        guard size > capacity else { return }
        base.deallocate()
        capacity = max(size, capacity * 2)
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    /// Copies `value` in after what is there; the copy stays until the next `start`.
    func add(_ value: Data) -> UnsafeRawBufferPointer {
        value.withUnsafeBytes { add($0) }
    }

    func add(_ value: String) -> UnsafeRawBufferPointer {
        // A native string's bytes are read where they are; only a bridged one is copied first.
        if let copied = value.utf8.withContiguousStorageIfAvailable({ add(UnsafeRawBufferPointer($0)) }) { return copied }
        var value = value
        return value.withUTF8 { add(UnsafeRawBufferPointer($0)) }
    }

    private func add(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        precondition(used + bytes.count <= capacity, "InsertValues.start was not given the event's size")
        let at = base + used
        if let source = bytes.baseAddress, !bytes.isEmpty { at.copyMemory(from: source, byteCount: bytes.count) }
        used += bytes.count
        return UnsafeRawBufferPointer(start: at, count: bytes.count)
    }
}
