import Foundation
import GRDBSQLite

/// Reads a broker journal file directly, the way an auditor would: for tests to check what is
/// on disk independently of the broker's own code.
public enum JournalFile {
    public static func rows(at path: String) throws -> [(busSeq: Int64, eventID: String, producer: String, producerSeq: Int64)] {
        try query(path, "SELECT bus_seq, event_id, producer, producer_seq FROM events ORDER BY bus_seq") { statement in
            (sqlite3_column_int64(statement, 0), text(statement, 1), text(statement, 2), sqlite3_column_int64(statement, 3))
        }
    }

    /// The content frames of the journaled events of `type`, in `bus_seq` order, as text.
    public static func contents(at path: String, type: String) throws -> [String] {
        try query(path, "SELECT CAST(content AS TEXT) FROM events WHERE type = '\(type)' ORDER BY bus_seq") { text($0, 0) }
    }

    /// The header frames of every journaled event, in `bus_seq` order, as text.
    public static func headers(at path: String) throws -> [String] {
        try query(path, "SELECT CAST(header AS TEXT) FROM events ORDER BY bus_seq") { text($0, 0) }
    }

    /// A consumer group's cursor as committed (nil: no such group).
    public static func groupCursor(at path: String, group: String) throws -> Int64? {
        try query(path, "SELECT cursor FROM groups WHERE name = '\(group)'") { sqlite3_column_int64($0, 0) }.first
    }

    /// `SELECT COUNT(*) FROM <table>`; 0 if the file or table does not exist yet.
    public static func count(at path: String, table: String) -> Int {
        guard FileManager.default.fileExists(atPath: path) else { return 0 }
        return (try? query(path, "SELECT COUNT(*) FROM \(table)") { Int(sqlite3_column_int64($0, 0)) })?.first ?? 0
    }

    /// The first column of the first row of `sql`, as an integer (nil: no row).
    public static func integer(at path: String, _ sql: String) throws -> Int64? {
        try query(path, sql) { sqlite3_column_int64($0, 0) }.first
    }

    /// `PRAGMA integrity_check` of any SQLite file (a journal, an outbox): "ok" when sound.
    public static func integrityCheck(at path: String) throws -> String {
        try query(path, "PRAGMA integrity_check") { text($0, 0) }.joined(separator: "; ")
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func text(_ statement: OpaquePointer?, _ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement, column) else { return "" }
        return String(cString: pointer)
    }

    static func query<T>(_ path: String, _ sql: String, row: (OpaquePointer?) -> T) throws -> [T] {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else {
            sqlite3_close(db)
            throw Failure(description: "cannot open \(path)")
        }
        defer { sqlite3_close(db) }
        sqlite3_busy_timeout(db, 5000)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
            throw Failure(description: "cannot prepare \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(statement) }
        var rows: [T] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_ROW {
                rows.append(row(statement))
            } else if rc == SQLITE_DONE {
                return rows
            } else {
                throw Failure(description: "query failed: \(String(cString: sqlite3_errmsg(db)))")
            }
        }
    }
}
