// A worker's memory of which events it has acted on, for effects that have no idempotency key
// of their own: look before acting, remember after. With at-least-once delivery, a redelivered
// event is then recognised and only acknowledged again.

import Foundation
import GRDB
import SwitchboardStorage

/// The `event_id`s a worker has finished, in its own SQLite file (WAL, `synchronous=FULL`,
/// mode 0600 in a 0700 directory). Thread-safe; disk I/O runs on GRDB's queue, never on the
/// cooperative pool.
public final class ProcessedSet: Sendable {
    public let path: String
    private let queue: DatabaseQueue

    public init(path: String) throws {
        self.path = path
        queue = try PrivateDatabase.open(path: path) { migrator in
            migrator.registerMigration("v1") { db in
                try db.execute(
                    sql: """
                        CREATE TABLE processed (event_id TEXT PRIMARY KEY, group_name TEXT NOT NULL, bus_seq INTEGER NOT NULL,
                            at TEXT NOT NULL) WITHOUT ROWID;
                        """)
            }
        }
    }

    /// Whether `eventID` was recorded as done.
    public func contains(_ eventID: String) async throws -> Bool {
        try await queue.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM processed WHERE event_id = ?", arguments: [eventID]) ?? false
        }
    }

    /// Records `eventID` as done (durably: on disk when this returns). Recording twice is fine.
    public func insert(_ eventID: String, group: String, busSeq: Int64) async throws {
        try await queue.write { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO processed (event_id, group_name, bus_seq, at) VALUES (?, ?, ?, ?)",
                arguments: [eventID, group, busSeq, ISO8601DateFormatter().string(from: Date())])
        }
    }

    /// How many events are recorded.
    public func count() async throws -> Int {
        try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM processed") ?? 0 }
    }
}
