// `switchboard-eto`'s memory of its check-ins: which TouchPoint response each check-in became,
// and the voids that came before their check-in. Ids only: no name, date of birth or void reason
// is kept.
//
// The worker keeps these tables in its event outbox's file (`events-outbox.sqlite`, 0600 in
// 0700), so that a check-in's response is remembered in the same commit that puts its
// `eto.response.recorded` in the outbox: one is never on disk without the other. Workers before
// that kept them in a file of their own, `eto.sqlite`; one found in the data directory is copied
// in at start, once, and renamed `eto.sqlite.imported`. A store with a file of its own
// (`init(path:)`) remains for tests of the recording alone: its caller publishes.
//
// A void names only the check-in's event id, and ETO can list responses only per subject: this
// record is how a void finds its response. A void that finds no record is remembered, so that a
// check-in arriving after it (replayed from the dead letters) is not recorded.
//
// A write started (`writes`) is noted before the response is sent to ETO and forgotten in the
// transaction that remembers its response: a check-in that finds the note here may be in ETO
// already (the worker stopped after sending), and is looked for before it is written again. The
// note that goes with the memory read is committed without an fsync: it outlives the worker's
// process, which is what it is for. A host that stops takes the member with it, and the broker's
// next delivery of the event is then attempt 2 (or, after a broker restart, not `first`), which
// looks whatever this file says (protocol section 15.2, **First delivery**).

import Foundation
import GRDB
public import Logging
public import SwitchboardBus
import SwitchboardStorage

public final class ETOCheckInStore: Sendable {
    public let path: String
    private let queue: DatabaseQueue
    /// The check-in path's reads and writes, in commits shared by the handlers that wait at the
    /// same time: one fsync, and one hop to GRDB's queue, for all of them.
    private let shared: SharedWrites
    /// The notes that a write starts (with the memory read they go with, or alone): committed
    /// without an fsync (see `memory(of:notingWriteAt:)`), so a check-in's first wait is for the
    /// queue, not for the disk.
    private let notes: SharedWrites
    /// The outbox whose file holds these tables, when the store shares it: a response's event is
    /// then enqueued in the commit that remembers the response.
    public let outbox: Outbox?

    /// A check-in's response, as recorded.
    public struct Recorded: Sendable, Hashable {
        public var checkInEventID: String
        public var siteID: Int
        public var subjectID: Int
        public var participantID: Int
        public var touchPointID: Int
        public var responseID: Int64
        /// The void that removed it, once removed.
        public var voidEventID: String?
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The name of the file older workers kept these tables in, in their data directory.
    public static let ownFileName = "eto.sqlite"

    /// A file of its own, `eto.sqlite` in `directory`: its caller publishes the events.
    public convenience init(directory: String) throws {
        try self.init(path: URL(fileURLWithPath: directory).appendingPathComponent(Self.ownFileName).path)
    }

    /// A file of its own at `path`: its caller publishes the events.
    public init(path: String) throws {
        self.path = path
        queue = try PrivateDatabase.open(path: path) { Self.register(&$0, prefix: "") }
        shared = SharedWrites(queue)
        notes = SharedWrites(queue, waitsForDisk: false)
        outbox = nil
    }

    /// The tables in `outbox`'s file, beside its events (migrations `eto-v1`, …). An `eto.sqlite`
    /// in `importing` (an older worker's data directory) is copied in first and renamed
    /// `eto.sqlite.imported`; a copy cut short by a crash is made again at the next start (rows
    /// already here are kept as they are).
    public init(sharing outbox: Outbox, importing directory: String? = nil, logger: Logger? = nil) throws {
        path = outbox.path
        queue = outbox.database
        try PrivateDatabase.migrate(queue, path: outbox.path) { Self.register(&$0, prefix: "eto-") }
        shared = SharedWrites(queue)
        notes = SharedWrites(queue, waitsForDisk: false)
        self.outbox = outbox
        if let directory {
            let own = URL(fileURLWithPath: directory).appendingPathComponent(Self.ownFileName).path
            if FileManager.default.fileExists(atPath: own) {
                let copied = try Self.copy(from: own, into: queue, path: outbox.path)
                logger?.notice(
                    "eto.sqlite copied into the event outbox's file; renamed eto.sqlite.imported",
                    metadata: ["responses": "\(copied)", "file": "\(outbox.path)"])
            }
        }
    }

    /// The tables, as `prefix` + `v1`, `v2`, `v3`: no prefix in a file of their own (as older
    /// workers made them), `eto-` in an outbox's file.
    static func register(_ migrator: inout DatabaseMigrator, prefix: String) {
        migrator.registerMigration(prefix + "v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE responses (checkin_event_id TEXT PRIMARY KEY, site_id INTEGER NOT NULL,
                        subject_id INTEGER NOT NULL, participant_id INTEGER NOT NULL, touchpoint_id INTEGER NOT NULL,
                        response_id INTEGER NOT NULL, void_event_id TEXT) WITHOUT ROWID;
                    CREATE TABLE early_voids (checkin_event_id TEXT PRIMARY KEY, void_event_id TEXT NOT NULL,
                        at TEXT NOT NULL) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration(prefix + "v2") { db in
            // A walk-in's participant add sent and not known to be answered: a redelivery
            // that finds no one waits before adding, in case the add still lands.
            try db.execute(sql: "CREATE TABLE adds (checkin_event_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID")
        }
        migrator.registerMigration(prefix + "v3") { db in
            // A response write sent (or about to be) whose response is not in `responses` yet.
            try db.execute(sql: "CREATE TABLE writes (checkin_event_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID")
        }
    }

    /// Copies an older worker's `eto.sqlite` at `own` into `queue`'s tables in one transaction,
    /// then renames it `eto.sqlite.imported`; returns how many responses it held.
    static func copy(from own: String, into queue: DatabaseQueue, path: String) throws -> Int {
        // Its schema brought to the last version first (a worker older still made only `v1`).
        try PrivateDatabase.open(path: own) { register(&$0, prefix: "") }.close()
        var responses = 0
        do {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "ATTACH DATABASE ? AS own", arguments: [own])
                defer { try? db.execute(sql: "DETACH DATABASE own") }
                try db.inTransaction(.immediate) {
                    responses = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM own.responses") ?? 0
                    for (table, columns) in [
                        ("responses", "checkin_event_id, site_id, subject_id, participant_id, touchpoint_id, response_id, void_event_id"),
                        ("early_voids", "checkin_event_id, void_event_id, at"), ("adds", "checkin_event_id, at_ms"),
                        ("writes", "checkin_event_id, at_ms"),
                    ] {
                        // A note that a write started is stale once its response is here (a copy
                        // made again after the worker recorded it).
                        let keep = table == "writes" ? "checkin_event_id NOT IN (SELECT checkin_event_id FROM main.responses)" : "true"
                        try db.execute(
                            sql:
                                "INSERT INTO main.\(table) (\(columns)) SELECT \(columns) FROM own.\(table) WHERE \(keep) ON CONFLICT DO NOTHING"
                        )
                    }
                    return .commit
                }
            }
        } catch let error as DatabaseError {
            throw StorageFault.classify(error, path: path, queue: nil)
        }
        // On disk in the outbox's file (synchronous=FULL): the old file is kept, under a name no
        // later start copies from.
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: own + suffix) {
            guard rename(own + suffix, own + ".imported" + suffix) == 0 else {
                throw Failure(description: "\(own)\(suffix) was copied but could not be renamed: errno \(errno)")
            }
        }
        return responses
    }

    /// Remembers the response a check-in became (again: the same row is kept), and forgets that
    /// its write was started, in one transaction.
    public func recorded(_ r: Recorded) async throws {
        try await shared.write { db in try Self.record(r, db) }
    }

    /// Remembers the response a check-in became, as `recorded(_:)` does, and puts `event` in the
    /// outbox in the same commit: both are on disk when this returns, or neither is.
    /// - Precondition: the store shares the outbox's file (`outbox` is not nil).
    public func recorded(_ r: Recorded, publishing event: Outbox.NewEvent) async throws {
        guard let outbox else { preconditionFailure("recorded(_:publishing:) needs a store that shares its outbox's file") }
        try await shared.write { db in
            try Self.record(r, db)
            _ = try outbox.append([event], in: db)
        }
    }

    static func record(_ r: Recorded, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO responses (checkin_event_id, site_id, subject_id, participant_id, touchpoint_id, response_id)
                VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (checkin_event_id) DO NOTHING
                """
        ).execute(arguments: [r.checkInEventID, r.siteID, r.subjectID, r.participantID, r.touchPointID, r.responseID])
        try db.cachedStatement(sql: "DELETE FROM writes WHERE checkin_event_id = ?").execute(arguments: [r.checkInEventID])
    }

    /// Notes, committed before it returns, that this check-in's response write is about to be
    /// sent (now, in ms since 1970), as `memory(of:notingWriteAt:)` does: without an fsync (see
    /// the top of this file). `recorded` forgets it.
    public func writing(_ checkInEventID: String, at milliseconds: Int64) async throws {
        try await notes.write { db in try Self.note(checkInEventID, at: milliseconds, db) }
    }

    static func note(_ checkInEventID: String, at milliseconds: Int64, _ db: Database) throws {
        try db.cachedStatement(
            sql: "INSERT INTO writes (checkin_event_id, at_ms) VALUES (?, ?) ON CONFLICT DO UPDATE SET at_ms = excluded.at_ms"
        ).execute(arguments: [checkInEventID, milliseconds])
    }

    /// Whether a response write for this check-in was started here and its response not
    /// remembered: ETO may hold it.
    public func writeStarted(_ checkInEventID: String) async throws -> Bool {
        try await queue.read { db in try Self.writeStarted(db, checkInEventID) }
    }

    static func writeStarted(_ db: Database, _ checkInEventID: String) throws -> Bool {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT at_ms FROM writes WHERE checkin_event_id = ?"), arguments: [checkInEventID])
            != nil
    }

    /// What this worker knows of a check-in when it comes: a void that came first, its response,
    /// and whether its write was started.
    public struct Memory: Sendable, Hashable {
        public var earlyVoid: String?
        public var response: Recorded?
        /// Whether a write was started before this read.
        public var writeStarted: Bool
        /// Whether this read noted that the check-in's write starts (`memory(of:notingWriteAt:)`).
        public var noted = false
    }

    /// ``earlyVoid(of:)``, ``response(of:)`` and ``writeStarted(_:)`` in one read: the ETO
    /// recorder asks all three of every check-in.
    public func memory(of checkInEventID: String) async throws -> Memory {
        try await shared.write { db in try Self.memory(db, checkInEventID) }
    }

    /// ``memory(of:)``, and in the same commit, when the check-in has neither an early void nor a
    /// response here (so it is about to be written, unless its participant is not found or a look
    /// finds its response), the note that its write starts (`writing(_:at:)`; `noted` says so):
    /// the check-in then waits for one commit before its write instead of two. That commit does not
    /// wait for the disk (`synchronous=NORMAL`, in commits of its own): the note is read back after
    /// the worker's process stops, not after its host does (see the top of this file), so a
    /// check-in's first wait is for the file's queue and not for an fsync. A note whose write never
    /// follows (a dead letter, a retry) only makes a later delivery of the check-in look, which any
    /// delivery but a first one does anyway.
    public func memory(of checkInEventID: String, notingWriteAt milliseconds: Int64) async throws -> Memory {
        try await notes.write { db in
            var memory = try Self.memory(db, checkInEventID)
            if memory.earlyVoid == nil, memory.response == nil {
                try Self.note(checkInEventID, at: milliseconds, db)
                memory.noted = true
            }
            return memory
        }
    }

    static func memory(_ db: Database, _ checkInEventID: String) throws -> Memory {
        Memory(
            earlyVoid: try earlyVoid(db, checkInEventID), response: try response(db, checkInEventID),
            writeStarted: try writeStarted(db, checkInEventID))
    }

    /// The response recorded for a check-in, if this worker recorded one.
    public func response(of checkInEventID: String) async throws -> Recorded? {
        try await queue.read { db in try Self.response(db, checkInEventID) }
    }

    static func response(_ db: Database, _ checkInEventID: String) throws -> Recorded? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT checkin_event_id, site_id, subject_id, participant_id, touchpoint_id, response_id, void_event_id
                    FROM responses WHERE checkin_event_id = ?
                    """), arguments: [checkInEventID]
        ).map {
            Recorded(
                checkInEventID: $0[0], siteID: $0[1], subjectID: $0[2], participantID: $0[3], touchPointID: $0[4], responseID: $0[5],
                voidEventID: $0[6])
        }
    }

    /// Marks a check-in's response removed by a void.
    public func voided(_ checkInEventID: String, by voidEventID: String) async throws {
        try await shared.write { db in
            try db.execute(
                sql: "UPDATE responses SET void_event_id = ? WHERE checkin_event_id = ?", arguments: [voidEventID, checkInEventID])
        }
    }

    /// Remembers a void whose check-in has no response here (yet); the first void is kept.
    public func voidedEarly(_ checkInEventID: String, by voidEventID: String, at: String) async throws {
        try await shared.write { db in
            try db.execute(
                sql: "INSERT INTO early_voids (checkin_event_id, void_event_id, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                arguments: [checkInEventID, voidEventID, at])
        }
    }

    /// Notes that a participant add for this check-in is about to be sent, or that one may have
    /// been sent by another member before this worker's delivery came (in ms since 1970): an add
    /// from then may still land.
    public func adding(_ checkInEventID: String, at milliseconds: Int64) async throws {
        try await shared.write { db in
            try db.execute(
                sql: "INSERT INTO adds (checkin_event_id, at_ms) VALUES (?, ?) ON CONFLICT DO UPDATE SET at_ms = excluded.at_ms",
                arguments: [checkInEventID, milliseconds])
        }
    }

    /// When a participant add for this check-in was last sent, if one was.
    public func addSent(_ checkInEventID: String) async throws -> Int64? {
        try await queue.read { db in
            try Int64.fetchOne(db, sql: "SELECT at_ms FROM adds WHERE checkin_event_id = ?", arguments: [checkInEventID])
        }
    }

    /// The void that came before this check-in, if one did.
    public func earlyVoid(of checkInEventID: String) async throws -> String? {
        try await queue.read { db in try Self.earlyVoid(db, checkInEventID) }
    }

    static func earlyVoid(_ db: Database, _ checkInEventID: String) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT void_event_id FROM early_voids WHERE checkin_event_id = ?"), arguments: [checkInEventID])
    }
}
