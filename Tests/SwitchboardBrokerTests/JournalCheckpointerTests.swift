import Foundation
import GRDB
import GRDBSQLite
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

@Suite("Journal checkpoints")
struct JournalCheckpointerTests {
    /// A batch of `count` check-ins from `producer`, numbered from `from`.
    func batch(_ producer: String, from: Int64, count: Int) -> [PendingEvent] {
        (from..<from + Int64(count)).map { seq in
            let header = EventHeader(
                eventID: UUIDv7.string(), type: CheckIn.type, producer: producer, producerSeq: seq, schema: CheckIn.schema,
                session: "s")
            return PendingEvent(
                header: header, headerFields: JSONValue.parse(header.wireJSON())!.object!, rawHeader: header.wireJSON(),
                parent: Data("{}".utf8), metadata: Data("{}".utf8), content: Events.checkIn(), receivedAt: 1000)
        }
    }

    /// The WAL file's size in frames of a 4 KiB page (each frame has a 24-byte header; the file a
    /// 32-byte one). The file is not truncated when the WAL starts over, so this is the most
    /// frames it ever held.
    func walFileFrames(_ path: String) -> Int {
        let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        return max(size - 32, 0) / (4096 + 24)
    }

    @Test("the background thread copies the whole WAL, off the committing thread, and the next commit starts it over")
    func backgroundCopiesAll() async throws {
        let directory = try TemporaryDirectory("checkpoint")
        defer { directory.remove() }
        let journal = try Journal(
            path: directory.path("journal.sqlite"), checkpoints: .init(start: 64, tail: 32, bound: 100_000))
        var seq: Int64 = 1
        func commit() throws {
            let outcomes = try journal.append(batch("k1", from: seq, count: 10))
            #expect(outcomes.allSatisfy { if case .stored = $0 { true } else { false } })
            seq += 10
        }
        while journal.walFrames < 64 { try commit() }
        // The commit that crossed 64 frames woke the background thread: it copies every frame.
        try await waitUntil("the background checkpoint") { journal.checkpoints.background == 1 }
        let before = journal.walFrames
        try commit()
        #expect(journal.checkpoints.restarts == 1)
        #expect(journal.walFrames < before)
        #expect(journal.checkpoints.tails == 0, "nothing was left to copy on the committing thread")
        #expect(journal.checkpoints.bounded == 0)
        #expect(journal.checkpoints.failed == 0)
        #expect(walFileFrames(journal.path) <= Int(before) + 32)
        try journal.close()

        let reopened = try Journal(path: directory.path("journal.sqlite"))
        #expect(reopened.head == seq - 1)
        let read = try reopened.read(from: 1, to: nil, topics: [], limit: 10_000, scanWindow: 10_000, excluding: [], outcomes: nil)
        #expect(read.events.count == Int(seq - 1))
        try reopened.close()
    }

    @Test(
        "frames written while the background copies are a tail: the committing connection copies it, and the next commit starts the WAL over"
    )
    func tailOnTheCommittingConnection() async throws {
        let directory = try TemporaryDirectory("checkpoint")
        defer { directory.remove() }
        let path = directory.path("journal.sqlite")
        let journal = try Journal(path: path, checkpoints: .init(start: 64, tail: 32, bound: 100_000))
        var seq: Int64 = 1
        func commit() throws {
            _ = try journal.append(batch("k1", from: seq, count: 10))
            seq += 10
        }
        while journal.walFrames < 56 { try commit() }
        // A reader's snapshot stands in for commits made while the background copies: it may
        // copy no frame written after the snapshot, so those are left over.
        let snapshot = try Snapshot(path)
        while journal.walFrames < 64 { try commit() }
        // Awaited while the snapshot holds: the background copies up to it, no further.
        try await waitUntil("the background checkpoint") { journal.checkpoints.background == 1 }
        #expect(journal.checkpoints.tails == 0)
        snapshot.end()

        try commit()
        #expect(journal.checkpoints.tails == 1, "at most 32 frames were left: copied after the commit, on its connection")
        #expect(journal.checkpoints.restarts == 0)
        let before = journal.walFrames
        try commit()
        #expect(journal.checkpoints.restarts == 1)
        #expect(journal.walFrames < before)
        #expect(journal.checkpoints.bounded == 0)
        #expect(journal.checkpoints.failed == 0)
        try journal.close()
    }

    @Test("under continuous commits the WAL stays within its bound and keeps starting over")
    func continuousCommitsStayBounded() throws {
        let directory = try TemporaryDirectory("checkpoint")
        defer { directory.remove() }
        let journal = try Journal(path: directory.path("journal.sqlite"), checkpoints: .init(start: 64, tail: 32, bound: 256))
        var seq: Int64 = 1
        for _ in 0..<1_000 {
            _ = try journal.append(batch("k1", from: seq, count: 10))
            seq += 10
        }
        let counts = journal.checkpoints
        // About 4 frames a commit, 4,000 in all: without checkpoints the WAL would hold them all.
        #expect(counts.restarts >= 5, "\(counts)")
        #expect(counts.failed == 0)
        #expect(walFileFrames(journal.path) <= 256 + 256, "\(walFileFrames(journal.path)) frames, \(counts)")
        #expect(journal.count == 10_000)
        try journal.close()
    }

    @Test("a reader that pins the WAL holds it past the bound; once it ends, the broker's connection copies it all and it starts over")
    func pinnedReader() throws {
        let directory = try TemporaryDirectory("checkpoint")
        defer { directory.remove() }
        let path = directory.path("journal.sqlite")
        let journal = try Journal(path: path, checkpoints: .init(start: 32, tail: 16, bound: 128))
        var seq: Int64 = 1
        _ = try journal.append(batch("k1", from: seq, count: 10))
        seq += 10

        let snapshot = try Snapshot(path)
        #expect(snapshot.count == 10)
        while journal.walFrames < 256 {
            _ = try journal.append(batch("k1", from: seq, count: 10))
            seq += 10
        }
        #expect(journal.checkpoints.restarts == 0, "a pinned WAL cannot start over")
        #expect(journal.checkpoints.bounded > 0, "past the bound, each commit tries")
        snapshot.end()

        let pinned = journal.walFrames
        for _ in 0..<3 {
            _ = try journal.append(batch("k1", from: seq, count: 10))
            seq += 10
        }
        #expect(journal.checkpoints.restarts == 1)
        #expect(journal.walFrames < pinned)
        #expect(journal.checkpoints.failed == 0)
        try journal.close()
    }

    @Test("closing ends the checkpointer's thread and connection: the last close copies the WAL and removes it")
    func closeRemovesTheWAL() throws {
        let directory = try TemporaryDirectory("checkpoint")
        defer { directory.remove() }
        let path = directory.path("journal.sqlite")
        let journal = try Journal(path: path, checkpoints: .init(start: 16, tail: 8, bound: 64))
        for round in 0..<50 { _ = try journal.append(batch("k1", from: Int64(round * 10 + 1), count: 10)) }
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try journal.close()
        try journal.close()  // a second close does nothing
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "no other connection kept the WAL")

        let reopened = try Journal(path: path)
        #expect(reopened.count == 500)
        try reopened.close()
    }
}

/// A read transaction on a connection of its own, held until `end()`: its snapshot of the journal
/// pins the WAL (no checkpoint may copy a frame written after it).
final class Snapshot {
    private var connection: OpaquePointer?
    /// The events the snapshot holds.
    private(set) var count: Int64 = -1

    init(_ path: String) throws {
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY, nil) == SQLITE_OK,
            sqlite3_exec(connection, "BEGIN", nil, nil, nil) == SQLITE_OK
        else { throw JournalFailure(description: "cannot open a snapshot of \(path)") }
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(connection, "SELECT COUNT(*) FROM events", -1, &statement, nil) == SQLITE_OK,
            sqlite3_step(statement) == SQLITE_ROW
        else { throw JournalFailure(description: "cannot read \(path)") }
        count = sqlite3_column_int64(statement, 0)
    }

    func end() {
        sqlite3_exec(connection, "COMMIT", nil, nil, nil)
        sqlite3_close_v2(connection)
        connection = nil
    }

    deinit { if connection != nil { end() } }
}
