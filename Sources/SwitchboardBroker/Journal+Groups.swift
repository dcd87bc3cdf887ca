// Consumer groups in the journal database: each group's cursor and the rows its state machine
// hands out (`GroupChanges`), and the dead letters. They live in the same SQLite file as the
// events and are written in the same transactions (WAL, synchronous=FULL), so a dead letter's
// `dlq.<group>` event and the settling of the event it names are durable together. Nothing
// outside this file and Journal.swift knows the store is SQLite (JournalStore.swift).

import Foundation
import GRDB
import SwitchboardProtocol

/// A dead letter as stored: which event, of which group, why, and what became of it.
struct DeadLetterRecord: Sendable, Hashable {
    enum State: String, Sendable {
        /// Waiting for an operator.
        case dead
        /// Put back to its group by `dlq.replay` (a later failure makes it dead again).
        case replayed
        /// Dropped by `dlq.drop`: the group will not see it again.
        case dropped
    }

    var group: String
    var busSeq: Int64
    /// The `dlq.<group>` event that reported it.
    var dlqSeq: Int64?
    var eventID: String
    var type: String
    var key: String?
    var attempts: Int
    var code: String
    var message: String
    /// Broker clock, Unix milliseconds.
    var at: Int64
    var state: State
}

/// A group as stored.
struct StoredGroup: Sendable {
    var name: String
    var topics: [String]
    var createdAt: Int64
    /// How it was created to start (`earliest`, `head`, a bus_seq), for status.
    var start: String
    var snapshot: GroupSnapshot
}

/// One write to the groups' tables, applied inside a journal transaction.
enum GroupWrite: Sendable {
    case create(name: String, topics: [String], cursor: Int64, createdAt: Int64, start: String)
    case changes(group: String, GroupChanges)
    /// `eventIndex`: the index, in the same commit's events, of the `dlq.<group>` event.
    case deadLetter(DeadLetterRecord, eventIndex: Int?)
    case deadLetterState(group: String, busSeq: Int64, state: DeadLetterRecord.State)
    /// Starts the group again at `cursor`: every settled, attempts and replay row goes.
    case reset(group: String, cursor: Int64, start: String)
    /// Removes the group and every row of it (its dead letters stay journaled as events).
    case delete(group: String)
}

extension Journal {
    static func registerGroupMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v2-groups") { db in
            try db.execute(
                sql: """
                    CREATE TABLE groups (
                        name TEXT PRIMARY KEY, topics TEXT NOT NULL, cursor INTEGER NOT NULL, created_at INTEGER NOT NULL,
                        start TEXT NOT NULL);
                    CREATE TABLE group_settled (grp TEXT NOT NULL, bus_seq INTEGER NOT NULL, PRIMARY KEY (grp, bus_seq)) WITHOUT ROWID;
                    CREATE TABLE group_attempts (
                        grp TEXT NOT NULL, bus_seq INTEGER NOT NULL, attempts INTEGER NOT NULL, code TEXT, message TEXT,
                        PRIMARY KEY (grp, bus_seq)) WITHOUT ROWID;
                    CREATE TABLE group_replays (grp TEXT NOT NULL, bus_seq INTEGER NOT NULL, key TEXT, PRIMARY KEY (grp, bus_seq))
                        WITHOUT ROWID;
                    CREATE TABLE dead_letters (
                        grp TEXT NOT NULL, bus_seq INTEGER NOT NULL, dlq_seq INTEGER, event_id TEXT NOT NULL, type TEXT NOT NULL,
                        key TEXT, attempts INTEGER NOT NULL, code TEXT NOT NULL, message TEXT NOT NULL, at INTEGER NOT NULL,
                        state TEXT NOT NULL, PRIMARY KEY (grp, bus_seq)) WITHOUT ROWID;
                    """)
        }
    }

    /// Every group with the rows that rebuild its state machine.
    func loadGroups() throws -> [StoredGroup] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT name, topics, cursor, created_at, start FROM groups ORDER BY name").map { row in
                let name: String = row[0]
                let topicsText: String = row[1]
                let topics = (JSONValue.parse(Data(topicsText.utf8))?.arrayOfStrings) ?? []
                var snapshot = GroupSnapshot(cursor: row[2])
                snapshot.settled = Set(try Int64.fetchAll(db, sql: "SELECT bus_seq FROM group_settled WHERE grp = ?", arguments: [name]))
                for attempt in try Row.fetchAll(
                    db, sql: "SELECT bus_seq, attempts, code, message FROM group_attempts WHERE grp = ?", arguments: [name])
                {
                    let code: String? = attempt[2]
                    let message: String? = attempt[3]
                    snapshot.attempts[attempt[0]] = GroupAttempts(
                        count: attempt[1], lastFailure: code.map { GroupFailure(code: $0, message: message ?? "") })
                }
                snapshot.replays = try Row.fetchAll(db, sql: "SELECT bus_seq, key FROM group_replays WHERE grp = ?", arguments: [name])
                    .map { GroupCandidate(busSeq: $0[0], key: $0[1]) }
                return StoredGroup(name: name, topics: topics, createdAt: row[3], start: row[4], snapshot: snapshot)
            }
        }
    }

    /// The dead-letter selection, by its old name.
    typealias DeadLetterFilter = SwitchboardBroker.DeadLetterFilter
    /// The dead-letter page cursor, by its old name.
    typealias DeadLetterCursor = SwitchboardBroker.DeadLetterCursor

    /// The `WHERE` of a dead-letter query.
    private static func deadLetterFilter(_ filter: DeadLetterFilter) -> (sql: String, arguments: StatementArguments) {
        let (group, state) = (filter.group, filter.state)
        var sql = " WHERE 1"
        var arguments: StatementArguments = []
        if let code = filter.code {
            sql += " AND code = ?"
            _ = arguments.append(contentsOf: [code])
        }
        if let before = filter.before {
            sql += " AND at < ?"
            _ = arguments.append(contentsOf: [before])
        }
        if let group {
            sql += " AND grp = ?"
            _ = arguments.append(contentsOf: [group])
        }
        if let state {
            sql += " AND state = ?"
            _ = arguments.append(contentsOf: [state.rawValue])
        }
        if let busSeq = filter.busSeq {
            sql += " AND bus_seq = ?"
            _ = arguments.append(contentsOf: [busSeq])
        }
        return (sql, arguments)
    }

    /// One page of the dead letters `filter` selects (see the other `deadLetterPage`).
    func deadLetterPage(_ filter: DeadLetterFilter, after cursor: DeadLetterCursor?, newest: Bool, limit: Int) throws -> [DeadLetterRecord]
    {
        var (sql, arguments) = Self.deadLetterFilter(filter)
        sql = "SELECT grp, bus_seq, dlq_seq, event_id, type, key, attempts, code, message, at, state FROM dead_letters" + sql
        if let cursor {
            sql += newest ? " AND (at, grp, bus_seq) < (?, ?, ?)" : " AND (at, grp, bus_seq) > (?, ?, ?)"
            _ = arguments.append(contentsOf: [cursor.at, cursor.group, cursor.busSeq])
        }
        sql += newest ? " ORDER BY at DESC, grp DESC, bus_seq DESC LIMIT ?" : " ORDER BY at, grp, bus_seq LIMIT ?"
        _ = arguments.append(contentsOf: [limit])
        return try queue.read { db in
            try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                DeadLetterRecord(
                    group: row[0], busSeq: row[1], dlqSeq: row[2], eventID: row[3], type: row[4], key: row[5], attempts: row[6],
                    code: row[7], message: row[8], at: row[9], state: DeadLetterRecord.State(rawValue: row[10]) ?? .dead)
            }
        }
    }

    /// How many dead letters `filter` selects, by code.
    func deadLetterCodes(_ selection: DeadLetterFilter) throws -> [String: Int] {
        let (filter, arguments) = Self.deadLetterFilter(selection)
        let sql = "SELECT code, COUNT(*) FROM dead_letters" + filter + " GROUP BY code"
        return try queue.read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: sql, arguments: arguments) { counts[row[0]] = row[1] }
            return counts
        }
    }

    /// Dead letters per group and state, for status.
    func deadLetterCounts() throws -> [String: [DeadLetterRecord.State: Int]] {
        try queue.read { db in
            var counts: [String: [DeadLetterRecord.State: Int]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT grp, state, COUNT(*) FROM dead_letters GROUP BY grp, state") {
                if let state = DeadLetterRecord.State(rawValue: row[1]) { counts[row[0] as String, default: [:]][state] = row[2] }
            }
            return counts
        }
    }

    /// The journaled events with these sequence numbers (those still retained), in order.
    func events(_ busSeqs: [Int64]) throws -> [JournaledEvent] {
        guard !busSeqs.isEmpty else { return [] }
        return try queue.read { db in
            var events: [JournaledEvent] = []
            for chunk in stride(from: 0, to: busSeqs.count, by: 500) {
                let part = busSeqs[chunk..<min(chunk + 500, busSeqs.count)]
                let marks = part.map { _ in "?" }.joined(separator: ",")
                events += try Row.fetchAll(
                    db, sql: "SELECT bus_seq, type, header, parent, metadata, content FROM events WHERE bus_seq IN (\(marks))",
                    arguments: StatementArguments(Array(part))
                ).map { row in
                    JournaledEvent(busSeq: row[0], type: row[1], header: row[2], parent: row[3], metadata: row[4], content: row[5])
                }
            }
            return events.sorted { $0.busSeq < $1.busSeq }
        }
    }

    /// Applies group writes inside the commit's transaction. `outcomes` are the commit's event
    /// outcomes, for the `dlq_seq` of dead letters.
    static func apply(_ writes: [GroupWrite], outcomes: [AppendOutcome], in db: Database) throws {
        for write in writes {
            switch write {
            case .create(let name, let topics, let cursor, let createdAt, let start):
                try db.execute(
                    sql: "INSERT INTO groups (name, topics, cursor, created_at, start) VALUES (?, ?, ?, ?, ?)",
                    arguments: [
                        name, String(decoding: JSONValue.array(topics.map(JSONValue.string)).compactData, as: UTF8.self), cursor, createdAt,
                        start,
                    ])
            case .changes(let group, let changes):
                try apply(changes, group: group, in: db)
            case .deadLetter(var record, let index):
                if let index, index < outcomes.count, case .stored(let seq, _) = outcomes[index] { record.dlqSeq = seq }
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO dead_letters (grp, bus_seq, dlq_seq, event_id, type, key, attempts, code, message, at, state)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        record.group, record.busSeq, record.dlqSeq, record.eventID, record.type, record.key, record.attempts, record.code,
                        record.message, record.at, record.state.rawValue,
                    ])
            case .deadLetterState(let group, let busSeq, let state):
                try db.execute(
                    sql: "UPDATE dead_letters SET state = ? WHERE grp = ? AND bus_seq = ?", arguments: [state.rawValue, group, busSeq])
            case .reset(let group, let cursor, let start):
                try db.execute(sql: "UPDATE groups SET cursor = ?, start = ? WHERE name = ?", arguments: [cursor, start, group])
                for table in ["group_settled", "group_attempts", "group_replays"] {
                    try db.execute(sql: "DELETE FROM \(table) WHERE grp = ?", arguments: [group])
                }
            case .delete(let group):
                try db.execute(sql: "DELETE FROM groups WHERE name = ?", arguments: [group])
                for table in ["group_settled", "group_attempts", "group_replays", "dead_letters"] {
                    try db.execute(sql: "DELETE FROM \(table) WHERE grp = ?", arguments: [group])
                }
            }
        }
    }

    /// How many attempt rows one statement writes or removes: runs of 100, then of 10, then
    /// single rows (500 values at most, under SQLite's 999 of versions before 3.32).
    static let attemptRowsPerStatement = [100, 10, 1]

    /// `GroupChanges` as its documentation orders: cursor, settled, attempts, replays.
    static func apply(_ changes: GroupChanges, group: String, in db: Database) throws {
        if let cursor = changes.cursor {
            try db.execute(sql: "UPDATE groups SET cursor = ? WHERE name = ?", arguments: [cursor, group])
            try db.execute(sql: "DELETE FROM group_settled WHERE grp = ? AND bus_seq <= ?", arguments: [group, cursor])
        }
        let deleteSettled = try db.cachedStatement(sql: "DELETE FROM group_settled WHERE grp = ? AND bus_seq = ?")
        for seq in changes.settledRemoved { try deleteSettled.execute(arguments: [group, seq]) }
        let insertSettled = try db.cachedStatement(sql: "INSERT OR IGNORE INTO group_settled (grp, bus_seq) VALUES (?, ?)")
        for seq in changes.settledAdded { try insertSettled.execute(arguments: [group, seq]) }
        // Attempt rows come and go with nearly every delivery while a group consumes (one for each
        // delivery in flight at a commit, removed once it is settled): written many to a
        // statement, as a statement per row was most of a group commit. Runs of 100, then 10,
        // then 1, so each connection keeps at most three statements of each.
        var removed = changes.attemptsRemoved.makeIterator()
        var removing = changes.attemptsRemoved.count
        for size in attemptRowsPerStatement where removing > 0 {
            let statement = try db.cachedStatement(
                sql: "DELETE FROM group_attempts WHERE grp = ? AND bus_seq IN (\(repeatElement("?", count: size).joined(separator: ", ")))")
            while removing >= size {
                var values: [(any DatabaseValueConvertible)?] = [group]
                values.reserveCapacity(size + 1)
                for _ in 0..<size { values.append(removed.next()) }
                try statement.execute(arguments: StatementArguments(values))
                removing -= size
            }
        }
        var upserts = changes.attempts.makeIterator()
        var upserting = changes.attempts.count
        for size in attemptRowsPerStatement where upserting > 0 {
            let statement = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO group_attempts (grp, bus_seq, attempts, code, message) VALUES "
                    + repeatElement("(?, ?, ?, ?, ?)", count: size).joined(separator: ", "))
            while upserting >= size {
                var values: [(any DatabaseValueConvertible)?] = []
                values.reserveCapacity(5 * size)
                for _ in 0..<size {
                    guard let (seq, attempts) = upserts.next() else { break }
                    values.append(
                        contentsOf: [group, seq, attempts.count, attempts.lastFailure?.code, attempts.lastFailure?.message]
                            as [(any DatabaseValueConvertible)?])
                }
                try statement.execute(arguments: StatementArguments(values))
                upserting -= size
            }
        }
        let deleteReplay = try db.cachedStatement(sql: "DELETE FROM group_replays WHERE grp = ? AND bus_seq = ?")
        for seq in changes.replaysRemoved { try deleteReplay.execute(arguments: [group, seq]) }
        let insertReplay = try db.cachedStatement(sql: "INSERT OR REPLACE INTO group_replays (grp, bus_seq, key) VALUES (?, ?, ?)")
        for replay in changes.replaysAdded { try insertReplay.execute(arguments: [group, replay.busSeq, replay.key]) }
    }

    /// How many journaled events after `cursor` match `topics` (a group's lag).
    func count(after cursor: Int64, topics: [String]) throws -> Int64 {
        var sql = "SELECT COUNT(*) FROM events WHERE bus_seq > ?"
        var arguments: StatementArguments = [cursor]
        if !topics.isEmpty {
            sql += " AND (" + topics.map { _ in "substr(type, 1, ?) = ?" }.joined(separator: " OR ") + ")"
            for topic in topics { _ = arguments.append(contentsOf: [topic.utf8.count, topic]) }
        }
        return try queue.read { db in try Int64.fetchOne(db, sql: sql, arguments: arguments) ?? 0 }
    }
}

extension JSONValue {
    /// The strings of an array of strings (nil if it is anything else).
    var arrayOfStrings: [String]? {
        guard case .array(let items) = self else { return nil }
        var strings: [String] = []
        for item in items {
            guard case .string(let text) = item else { return nil }
            strings.append(text)
        }
        return strings
    }
}
