// Writes to one SQLite file from callers that run at the same time (a worker's concurrent
// handlers), committed together: whoever asks while a commit is under way waits for the next
// one, which carries every write that came meanwhile. A commit is one transaction and one fsync
// (the file is `synchronous=FULL`), and one hop to GRDB's queue and back, however many writes it
// carries; a caller is answered only after the commit its write was in, so "on disk when it
// returns" holds for each of them as it would alone.

package import GRDB
import Synchronization

/// Items from concurrent callers, written by `commit` in one transaction per batch.
package final class SharedCommits<Item: Sendable, Answer: Sendable>: Sendable {
    private let queue: DatabaseQueue
    /// Writes a batch in the transaction it is given: one answer per item, in their order. An
    /// item's failure that the others can outlive is its answer; a throw fails the whole batch
    /// (and rolls it back).
    private let commit: @Sendable ([Item], Database) throws -> [Result<Answer, any Error>]
    private let state = Mutex<(waiting: [(item: Item, reply: CheckedContinuation<Answer, any Error>)], committing: Bool)>(([], false))

    package init(_ queue: DatabaseQueue, commit: @escaping @Sendable ([Item], Database) throws -> [Result<Answer, any Error>]) {
        self.queue = queue
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
            // Unstructured on purpose: the commit serves every caller waiting for it, so no one
            // caller's task may own it (cancelling that caller must not cancel the others'
            // writes). It ends as soon as nobody waits, and every waiter is always answered.
            if leads { Task { await self.commitAll() } }
        }
    }

    /// Commits what waits, again and again, until nothing does.
    private func commitAll() async {
        while true {
            let batch = state.withLock { state in
                let batch = state.waiting
                state.waiting = []
                if batch.isEmpty { state.committing = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            let items = batch.map(\.item)
            let commit = self.commit
            do {
                let answers = try await queue.write { db in try commit(items, db) }
                precondition(answers.count == batch.count, "a shared commit answers each of its items")
                for (waiter, answer) in zip(batch, answers) { waiter.reply.resume(with: answer) }
            } catch {
                // None of the batch is on disk: every caller of it gets the error.
                for waiter in batch { waiter.reply.resume(throwing: error) }
            }
        }
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
    package convenience init(_ queue: DatabaseQueue) {
        self.init(queue) { writes, db in
            writes.map { write in
                // When SQLite ended the whole transaction under a write, GRDB refuses every
                // later statement of it (SQLITE_ABORT), its commit too: the batch fails.
                Result {
                    var value: (any Sendable)?
                    try db.inSavepoint {
                        value = try write.body(db)
                        return .commit
                    }
                    return value!
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
