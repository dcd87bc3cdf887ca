// Writes to one SQLite file from callers that run at the same time (a worker's concurrent
// handlers), committed together: whoever asks while a commit is under way waits for the next
// one, which carries every write that came meanwhile. A commit is one transaction and one fsync
// (the file is `synchronous=FULL`), run on GRDB's queue, however many writes it carries; a caller
// is answered only after the commit its write was in, so "on disk when it returns" holds for each
// of them as it would alone.

package import GRDB
import Synchronization

/// Items from concurrent callers, written by `commit` in one transaction per batch.
package final class SharedCommits<Item: Sendable, Answer: Sendable>: Sendable {
    private let queue: DatabaseQueue
    /// Writes a batch in the transaction it is given: one answer per item, in their order. An
    /// item's failure that the others can outlive is its answer; a throw fails the whole batch
    /// (and rolls it back).
    private let commit: @Sendable ([Item], Database) throws -> [Result<Answer, any Error>]
    /// Whether a commit waits for the disk (`synchronous=FULL`, the file's setting) or only for
    /// the write-ahead log's write (`NORMAL`: no fsync, so it outlives this process but not a
    /// power cut or the host's crash).
    private let waitsForDisk: Bool
    private let state = Mutex<(waiting: [(item: Item, reply: CheckedContinuation<Answer, any Error>)], committing: Bool)>(([], false))

    /// - Parameter waitsForDisk: false commits without an fsync, the connection set back to
    ///   `synchronous=FULL` after each: only for writes whose loss with the host costs nothing
    ///   another record does not cover. Such commits still queue behind the file's others on
    ///   GRDB's queue, but never wait for one of their own.
    package init(
        _ queue: DatabaseQueue, waitsForDisk: Bool = true,
        commit: @escaping @Sendable ([Item], Database) throws -> [Result<Answer, any Error>]
    ) {
        self.queue = queue
        self.waitsForDisk = waitsForDisk
        self.commit = commit
    }

    /// How many items wait for a commit that has not started.
    package var waiting: Int { state.withLock { $0.waiting.count } }

    /// Writes `item` in the next shared commit; returns its answer once that commit is on disk.
    package func submit(_ item: Item) async throws -> Answer {
        try await withCheckedThrowingContinuation { (reply: CheckedContinuation<Answer, any Error>) in
            let leads = state.withLock { state -> Bool in
                state.waiting.append((item, reply))
                guard !state.committing else { return false }
                state.committing = true
                return true
            }
            // The commits run on GRDB's own queue, where the first caller puts one: no caller's
            // task owns it (cancelling that caller must not cancel the others' writes), and no
            // task of ours is made or resumed to run it.
            if leads { queue.asyncWriteWithoutTransaction { db in self.commitNext(db) } }
        }
    }

    /// Commits what waits and answers its callers once the commit is on disk (or failed). When
    /// more came meanwhile, the next commit goes to the back of GRDB's queue, behind the file's
    /// other work (an outbox's ACKed deletes, its reads), which a loop here would hold up.
    private func commitNext(_ db: Database) {
        let batch = state.withLock { state in
            let batch = state.waiting
            state.waiting = []
            return batch
        }
        if !batch.isEmpty {
            var answers: [Result<Answer, any Error>] = []
            do {
                if !waitsForDisk { try db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute() }
                defer { if !waitsForDisk { try? db.cachedStatement(sql: "PRAGMA synchronous = FULL").execute() } }
                try db.inTransaction(.immediate) {
                    // A closure, not `\.item`: a key path into this generic tuple is built at run time, each call.
                    answers = try commit(batch.map { $0.item }, db)
                    return .commit
                }
                precondition(answers.count == batch.count, "a shared commit answers each of its items")
                for (waiter, answer) in zip(batch, answers) { waiter.reply.resume(with: answer) }
            } catch {
                // None of the batch is on disk: every caller of it gets the error.
                for waiter in batch { waiter.reply.resume(throwing: error) }
            }
        }
        let more = state.withLock { state in
            if state.waiting.isEmpty { state.committing = false }
            return state.committing
        }
        if more { queue.asyncWriteWithoutTransaction { db in self.commitNext(db) } }
    }
}

/// A write of any kind to a ``SharedWrites`` file: its statements and its result.
package struct SharedWrite: Sendable {
    package var body: @Sendable (Database) throws -> any Sendable
}

/// Any writes, each in a savepoint of its own: one that throws is undone and answered with its
/// error, and the others in the commit are kept. A failure SQLite ends the whole transaction for
/// (a full disk, an I/O error), and a failed commit, are every waiter's error, and none of their
/// writes is kept.
package typealias SharedWrites = SharedCommits<SharedWrite, any Sendable>

extension SharedCommits where Item == SharedWrite, Answer == any Sendable {
    package convenience init(_ queue: DatabaseQueue, waitsForDisk: Bool = true) {
        self.init(queue, waitsForDisk: waitsForDisk) { writes, db in
            // A write alone needs no savepoint: its throw rolls back the transaction, which
            // holds nothing else, and is its waiter's answer.
            if writes.count == 1 { return [.success(try writes[0].body(db))] }
            // The savepoint's statements are prepared once per connection, not per write.
            let begin = try db.cachedStatement(sql: "SAVEPOINT shared_write")
            let release = try db.cachedStatement(sql: "RELEASE SAVEPOINT shared_write")
            let undo = try db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT shared_write")
            return try writes.map { write in
                try begin.execute()
                do {
                    let value = try write.body(db)
                    try release.execute()
                    return .success(value)
                } catch {
                    // When SQLite ended the whole transaction under a write, GRDB refuses every
                    // later statement of it (SQLITE_ABORT), these too: the batch fails.
                    try undo.execute()
                    try release.execute()
                    return .failure(error)
                }
            }
        }
    }

    /// Runs `body` in the next shared commit; returns its result once that commit is on disk.
    package func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        // The answer is what `body` returned, so it is a `T`.
        try await submit(SharedWrite(body: body)) as! T
    }
}
