import Foundation
import GRDB
import SwitchboardStorage
import SwitchboardTesting
import Synchronization
import Testing

@Suite("Shared writes to one SQLite file")
struct SharedWritesTests {
    struct Refused: Error, Equatable {
        var index: Int
    }

    /// Counts the commits made on a connection.
    final class Commits: TransactionObserver, Sendable {
        let made = Mutex(0)
        var count: Int { made.withLock { $0 } }
        func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }
        func databaseDidChange(with event: DatabaseEvent) {}
        func databaseDidCommit(_ db: Database) { made.withLock { $0 += 1 } }
        func databaseDidRollback(_ db: Database) {}
    }

    /// A first write that holds its commit (and GRDB's queue) until released.
    final class Hold: Sendable {
        let release = DispatchSemaphore(value: 0)
        let running = Mutex(false)
        var started: Bool { running.withLock { $0 } }

        func write(_ shared: SharedWrites) -> Task<Int, any Error> {
            Task {
                try await shared.write { db in
                    self.running.withLock { $0 = true }
                    self.release.wait()
                    try db.execute(sql: "INSERT INTO t VALUES (0)")
                    return 0
                }
            }
        }
    }

    static func open(_ directory: TemporaryDirectory) throws -> DatabaseQueue {
        try PrivateDatabase.open(path: directory.path("shared.sqlite")) { migrator in
            migrator.registerMigration("v1") { db in try db.execute(sql: "CREATE TABLE t (n INTEGER PRIMARY KEY)") }
        }
    }

    @Test("writes that wait while a commit runs share the next one; one that throws is undone alone, and each caller gets its own answer")
    func writesShareCommits() async throws {
        let directory = try TemporaryDirectory("shared-writes")
        defer { directory.remove() }
        let queue = try Self.open(directory)
        let commits = Commits()
        queue.add(transactionObserver: commits, extent: .databaseLifetime)
        let shared = SharedWrites(queue)

        // The first write holds its commit until 199 more wait behind it.
        let hold = Hold()
        let first = hold.write(shared)
        try await waitUntil("the first write runs") { hold.started }
        let results = try await withThrowingTaskGroup(of: Result<Int, Refused>.self) { group in
            for index in 1..<200 {
                group.addTask {
                    do {
                        return .success(
                            try await shared.write { db in
                                try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [index])
                                if index % 10 == 0 { throw Refused(index: index) }
                                return index
                            })
                    } catch let refused as Refused {
                        return .failure(refused)
                    }
                }
            }
            // Released either way: a commit held on would keep every write, and the test, waiting.
            do {
                try await waitUntil("199 writes wait") { shared.waiting == 199 }
            } catch {
                hold.release.signal()
                throw error
            }
            hold.release.signal()
            return try await group.reduce(into: [Result<Int, Refused>]()) { $0.append($1) }
        }
        #expect(try await first.value == 0)
        let kept = results.compactMap { try? $0.get() }.sorted()
        let refused = results.compactMap { if case .failure(let r) = $0 { r.index } else { nil } }.sorted()
        #expect(kept == (1..<200).filter { $0 % 10 != 0 })
        #expect(refused == Array(stride(from: 10, to: 200, by: 10)))
        let stored = try await queue.read { db in try Int.fetchAll(db, sql: "SELECT n FROM t ORDER BY n") }
        #expect(stored == [0] + kept, "a write that threw left nothing, the others are all there")
        #expect(commits.count == 2, "the first write's commit, then one for the 199 that waited")

        // The commit loop ended with the burst; a write after it starts it again.
        #expect(
            try await shared.write { db in
                try db.execute(sql: "INSERT INTO t VALUES (500)"); return 500
            } == 500)
        #expect(commits.count == 3)

        // A write alone that throws after a statement: its waiter gets the error, and nothing of
        // it is kept.
        await #expect(throws: Refused(index: 600)) {
            try await shared.write { db in
                try db.execute(sql: "INSERT INTO t VALUES (600)")
                throw Refused(index: 600)
            }
        }
        let after = try await queue.read { db in try Int.fetchAll(db, sql: "SELECT n FROM t WHERE n >= 500 ORDER BY n") }
        #expect(after == [500])
    }

    @Test("when SQLite ends the transaction under one write, every write of that commit fails and none is kept")
    func transactionEndedFailsTheCommit() async throws {
        let directory = try TemporaryDirectory("shared-writes")
        defer { directory.remove() }
        let queue = try Self.open(directory)
        let shared = SharedWrites(queue)
        let hold = Hold()
        let first = hold.write(shared)
        try await waitUntil("the first write runs") { hold.started }
        let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 1...5 {
                group.addTask {
                    do {
                        try await shared.write { db in
                            try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [index])
                            // What a full disk or an I/O error does to a transaction, done on purpose.
                            if index == 3 { try db.execute(sql: "ROLLBACK") }
                        }
                        return true
                    } catch {
                        return false
                    }
                }
            }
            // Released either way: a commit held on would keep every write, and the test, waiting.
            do {
                try await waitUntil("5 writes wait") { shared.waiting == 5 }
            } catch {
                hold.release.signal()
                throw error
            }
            hold.release.signal()
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(try await first.value == 0)
        #expect(outcomes == [false, false, false, false, false])
        let stored = try await queue.read { db in try Int.fetchAll(db, sql: "SELECT n FROM t ORDER BY n") }
        #expect(stored == [0])
        // The next write is committed as usual.
        try await shared.write { db in try db.execute(sql: "INSERT INTO t VALUES (9)") }
        #expect(try await queue.read { db in try Int.fetchAll(db, sql: "SELECT n FROM t ORDER BY n") } == [0, 9])
    }

    @Test(
        "commits that do not wait for the disk run at synchronous=NORMAL, are read by another connection, and set the file back to FULL, a failed one too"
    )
    func commitsWithoutFsync() async throws {
        let directory = try TemporaryDirectory("shared-writes")
        defer { directory.remove() }
        let queue = try Self.open(directory)
        let durable = SharedWrites(queue)
        let quick = SharedWrites(queue, waitsForDisk: false)
        // PRAGMA synchronous: 1 is NORMAL (no fsync at commit in WAL mode), 2 is FULL.
        let synchronous = { @Sendable (db: Database) throws -> Int in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
        let inQuick = try await quick.write { db in
            try db.execute(sql: "INSERT INTO t VALUES (1)")
            return try synchronous(db)
        }
        #expect(inQuick == 1)
        #expect(try await queue.read(synchronous) == 2)
        let inDurable = try await durable.write { db in
            try db.execute(sql: "INSERT INTO t VALUES (2)")
            return try synchronous(db)
        }
        #expect(inDurable == 2)
        // Committed: another connection to the file reads both rows.
        let other = try DatabaseQueue(path: directory.path("shared.sqlite"))
        #expect(try await other.read { db in try Int.fetchAll(db, sql: "SELECT n FROM t ORDER BY n") } == [1, 2])
        try other.close()
        // A failed quick commit leaves the file at FULL too, and keeps nothing of it.
        await #expect(throws: Refused(index: 3)) {
            try await quick.write { db in
                try db.execute(sql: "INSERT INTO t VALUES (3)")
                throw Refused(index: 3)
            }
        }
        #expect(try await queue.read(synchronous) == 2)
        #expect(try await queue.read { db in try Int.fetchAll(db, sql: "SELECT n FROM t ORDER BY n") } == [1, 2])
    }
}
