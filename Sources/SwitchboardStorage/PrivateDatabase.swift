// The one way our processes open a SQLite file of their own (the broker's journal, an outbox, a
// worker's processed set, the Directory syncer's store): private, WAL, and durable when a
// write returns.

import Foundation
package import GRDB
import GRDBSQLite
import SwitchboardRuntime

/// Opens SQLite files that hold what must survive a crash.
package enum PrivateDatabase {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Runs the migrations `register` adds on a file `open` opened: a second owner of tables in
    /// the same file (its identifiers must not be the first owner's) migrates its own.
    package static func migrate(_ queue: DatabaseQueue, path: String, register: (inout DatabaseMigrator) -> Void) throws {
        var migrator = DatabaseMigrator()
        register(&migrator)
        do {
            try migrator.migrate(queue)
        } catch let error as DatabaseError {
            throw StorageFault.classify(error, path: path, queue: queue)
        }
    }

    /// Opens (or creates) the file at `path`: mode 0600 in a directory made 0700, WAL,
    /// `synchronous=FULL` (checked: a write is on disk when it returns; GRDB's WAL set-up would
    /// leave NORMAL), migrated by what `register` adds.
    /// - Parameter label: names the database in GRDB's dispatch queues (and so in stack traces).
    package static func open(
        path: String, label: String? = nil, register: (inout DatabaseMigrator) -> Void
    ) throws -> DatabaseQueue {
        let directory = PrivateFiles.parentDirectory(of: path)
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
        configuration.label = label
        // GRDB's WAL set-up switches to synchronous=NORMAL after prepareDatabase runs; a write
        // (an ACK, an outbox entry) must mean "on disk", so it is set FULL again after the
        // migrations, and checked.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            // A full disk shows first here: the WAL index (-shm) cannot be made.
            throw StorageFault.classify(error, path: path, queue: nil)
        }
        // SQLite opens a file it may not write read-only, silently, and every later write then
        // fails (SQLITE_READONLY) — for good, even once the file system is writable again,
        // because the connection stays read-only. A program refuses to start instead, and says why.
        let readOnly = queue.inDatabase { db in sqlite3_db_readonly(db.sqliteConnection, "main") == 1 }
        if readOnly {
            try? queue.close()
            let cause = StorageFault.probe(directory: PrivateFiles.parentDirectory(of: path))
            throw StorageFault(
                cause: cause == .readOnly ? .readOnly : .notWritable, path: path, detail: "SQLite can only open it for reading")
        }
        try migrate(queue, path: path, register: register)
        do {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                    throw Failure(description: "SQLite refused synchronous=FULL for \(path)")
                }
            }
        } catch let error as DatabaseError {
            throw StorageFault.classify(error, path: path, queue: queue)
        }
        return queue
    }
}
