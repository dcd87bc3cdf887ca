// A worker's memory of which events it has acted on, for effects that have no idempotency key
// of their own: look before acting, remember after. With at-least-once delivery, a redelivered
// event is then recognised and only acknowledged again.

import Foundation
import GRDB

/// The `event_id`s a worker has finished, in its own SQLite file (WAL, `synchronous=FULL`,
/// mode 0600 in a 0700 directory). Thread-safe; disk I/O runs on GRDB's queue, never on the
/// cooperative pool.
public final class ProcessedSet: Sendable {
    public let path: String
    private let queue: DatabaseQueue

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public init(path: String) throws {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(10)
        queue = try DatabaseQueue(path: path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE processed (event_id TEXT PRIMARY KEY, group_name TEXT NOT NULL, bus_seq INTEGER NOT NULL,
                        at TEXT NOT NULL) WITHOUT ROWID;
                    """)
        }
        try migrator.migrate(queue)
        // GRDB's WAL set-up leaves synchronous=NORMAL; "remembered" must mean "on disk".
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                throw Failure(description: "SQLite refused synchronous=FULL for \(path)")
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
