// Checkpoints the SQLite journal's WAL off the broker thread.
//
// SQLite's automatic checkpoint runs inside the commit that takes the WAL past 1,000 pages: on
// the broker thread, which then copies about 4 MB into the database file and waits for its
// fsync (about 5 ms) while ingest waits behind it. Here a thread of its own, on its own
// connection, does that bulk copy with PASSIVE checkpoints, which neither wait for the broker's
// commits nor hold them up.
//
// A WAL starts over (at its next commit) only once a checkpoint has copied every frame in it,
// and commits keep adding frames while the background checkpoint runs. So when the background
// has brought the frames not yet copied under `tail`, the broker thread copies those few itself,
// after its commit; its next commit then starts the WAL over. Past `bound` frames (the
// background cannot keep up, or a reader on another connection pins the WAL) the broker thread
// checkpoints whatever is left, as SQLite's automatic checkpoint did at 1,000.
//
// Every decision here is about cost only: a checkpoint at any time, by either connection, is
// always safe, and a commit is durable in the WAL whether or not one runs.

import Foundation
import GRDBSQLite
import Synchronization
import ZeroMQ

/// The background checkpointer of one journal file. The broker's connection calls
/// `committed(connection:frames:)` from its WAL hook, after each commit, on the broker thread.
final class JournalCheckpointer: Sendable {
    /// WAL sizes, in frames (pages of the database, 4 KiB each by default).
    struct Limits: Sendable {
        /// The background starts copying at this many frames (SQLite's automatic checkpoint's
        /// default).
        var start: Int32 = 1000
        /// The broker thread copies what is left itself when at most this many frames are not yet
        /// copied.
        var tail: Int32 = 256
        /// The broker thread copies everything left past this many frames (about 40 MB of WAL).
        var bound: Int32 = 10_000
    }

    /// What has run, for tests and the broker's metrics.
    struct Counts: Sendable, Equatable {
        /// Checkpoints the background thread completed (whatever they copied).
        var background = 0
        /// Checkpoints the broker thread ran because only a tail was left.
        var tails = 0
        /// Checkpoints the broker thread ran because the WAL was past `bound`.
        var bounded = 0
        /// Commits that found the WAL started over.
        var restarts = 0
        /// Checkpoints (either thread) that SQLite refused, other than with SQLITE_BUSY.
        var failed = 0
    }

    private struct State {
        /// The WAL's generation: how many times the hook saw it start over.
        var generation = 0
        /// The frames the last commit left in the WAL.
        var frames: Int32 = 0
        /// The frames the last checkpoint left copied, and in which generation of the WAL.
        var copied: (generation: Int, frames: Int32)?
        /// Whether the background thread has been asked to checkpoint and has not finished.
        var requested = false
        var stopping = false
        var counts = Counts()
    }

    let limits: Limits
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// Opens a second connection to `path` (an existing WAL-mode file) and starts the thread.
    init(path: String, limits: Limits) throws {
        self.limits = limits
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let connection = opened else {
            let reason = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(opened)
            throw JournalFailure(description: "cannot open a checkpointing connection to \(path): \(reason)")
        }
        // The checkpoint fsyncs the WAL before copying and the database file after, at FULL.
        sqlite3_busy_timeout(connection, 10_000)
        sqlite3_exec(connection, "PRAGMA synchronous = FULL", nil, nil, nil)
        let handle = SendableConnection(pointer: connection)
        Thread.start(named: "broker-wal") { [self] in serve(handle) }
    }

    var counts: Counts { state.withLock { $0.counts } }

    /// The frames the last commit left in the WAL.
    var frames: Int32 { state.withLock { $0.frames } }

    /// Called after each commit on the broker's connection with the frames now in its WAL.
    func committed(connection: OpaquePointer, frames: Int32) {
        enum Step { case none, wake, copy(bounded: Bool) }
        let limits = limits
        let step: Step = state.withLock { state in
            if frames < state.frames {
                // The commit wrote at the WAL's start again: a new generation.
                state.generation += 1
                state.counts.restarts += 1
            }
            state.frames = frames
            guard frames >= limits.start, !state.stopping else { return .none }
            if frames >= limits.bound { return .copy(bounded: true) }
            if let copied = state.copied, copied.generation == state.generation, frames - copied.frames <= limits.tail {
                return .copy(bounded: false)
            }
            guard !state.requested else { return .none }
            state.requested = true
            return .wake
        }
        switch step {
        case .none:
            return
        case .wake:
            wake.signal()
        case .copy(let bounded):
            let (code, done) = Self.checkpoint(connection)
            state.withLock { state in
                switch code {
                case SQLITE_OK:
                    state.copied = (state.generation, done)
                    if bounded { state.counts.bounded += 1 } else { state.counts.tails += 1 }
                case SQLITE_BUSY:
                    // The background holds the checkpoint lock; the next commit tries again.
                    break
                default:
                    state.counts.failed += 1
                }
            }
        }
    }

    /// Ends the thread and closes its connection; returns once both are done. Call once, before
    /// the broker's connection closes (the last connection to close checkpoints and removes the
    /// WAL).
    func stop() {
        state.withLock { $0.stopping = true }
        wake.signal()
        finished.wait()
    }

    private func serve(_ handle: SendableConnection) {
        defer {
            sqlite3_close_v2(handle.pointer)
            finished.signal()
        }
        while true {
            wake.wait()
            let (stopping, generation) = state.withLock { ($0.stopping, $0.generation) }
            if stopping { return }
            let (code, done) = Self.checkpoint(handle.pointer)
            state.withLock { state in
                state.requested = false
                switch code {
                case SQLITE_OK:
                    // Tagged with the generation read before it started: a WAL that started over
                    // meanwhile makes the figure stale, and the hook ignores it.
                    state.copied = (generation, done)
                    state.counts.background += 1
                case SQLITE_BUSY: break
                default: state.counts.failed += 1
                }
            }
        }
    }

    /// One PASSIVE checkpoint on `connection`: SQLite's result code and the frames it left
    /// copied.
    private static func checkpoint(_ connection: OpaquePointer) -> (Int32, Int32) {
        var log: Int32 = 0
        var done: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(connection, "main", SQLITE_CHECKPOINT_PASSIVE, &log, &done)
        return (code, done)
    }
}

/// The checkpointing connection, handed to its thread once; only that thread uses it after.
private struct SendableConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}
