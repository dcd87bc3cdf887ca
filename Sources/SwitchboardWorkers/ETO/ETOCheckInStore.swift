// `switchboard-eto`'s memory, one SQLite file in its data directory (`eto.sqlite`, 0600 in 0700,
// through PrivateDatabase): which TouchPoint response each check-in became, and the voids that
// came before their check-in. Ids only: no name, date of birth or void reason is kept.
//
// A void names only the check-in's event id, and ETO can list responses only per subject: this
// record is how a void finds its response. A void that finds no record is remembered, so that a
// check-in arriving after it (replayed from the dead letters) is not recorded.
//
// A write started (`writes`) is noted, durably, before the response is sent to ETO and forgotten
// in the transaction that remembers its response: a check-in that finds the note here may be in
// ETO already (the worker stopped after sending), and is looked for before it is written again.

import Foundation
import GRDB
import SwitchboardStorage

public final class ETOCheckInStore: Sendable {
    public let path: String
    private let queue: DatabaseQueue
    /// The check-in path's reads and writes, in commits shared by the handlers that wait at the
    /// same time: one fsync, and one hop to GRDB's queue, for all of them.
    private let shared: SharedWrites

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

    /// The file `eto.sqlite` in `directory`.
    public convenience init(directory: String) throws {
        try self.init(path: URL(fileURLWithPath: directory).appendingPathComponent("eto.sqlite").path)
    }

    public init(path: String) throws {
        self.path = path
        let queue = try PrivateDatabase.open(path: path) { migrator in
            migrator.registerMigration("v1") { db in
                try db.execute(
                    sql: """
                        CREATE TABLE responses (checkin_event_id TEXT PRIMARY KEY, site_id INTEGER NOT NULL,
                            subject_id INTEGER NOT NULL, participant_id INTEGER NOT NULL, touchpoint_id INTEGER NOT NULL,
                            response_id INTEGER NOT NULL, void_event_id TEXT) WITHOUT ROWID;
                        CREATE TABLE early_voids (checkin_event_id TEXT PRIMARY KEY, void_event_id TEXT NOT NULL,
                            at TEXT NOT NULL) WITHOUT ROWID;
                        """)
            }
            migrator.registerMigration("v2") { db in
                // A walk-in's participant add sent and not known to be answered: a redelivery
                // that finds no one waits before adding, in case the add still lands.
                try db.execute(sql: "CREATE TABLE adds (checkin_event_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID")
            }
            migrator.registerMigration("v3") { db in
                // A response write sent (or about to be) whose response is not in `responses` yet.
                try db.execute(sql: "CREATE TABLE writes (checkin_event_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL) WITHOUT ROWID")
            }
        }
        self.queue = queue
        shared = SharedWrites(queue)
    }

    /// Remembers the response a check-in became (again: the same row is kept), and forgets that
    /// its write was started, in one transaction.
    public func recorded(_ r: Recorded) async throws {
        try await shared.write { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO responses (checkin_event_id, site_id, subject_id, participant_id, touchpoint_id, response_id)
                    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (checkin_event_id) DO NOTHING
                    """
            ).execute(arguments: [r.checkInEventID, r.siteID, r.subjectID, r.participantID, r.touchPointID, r.responseID])
            try db.cachedStatement(sql: "DELETE FROM writes WHERE checkin_event_id = ?").execute(arguments: [r.checkInEventID])
        }
    }

    /// Notes, on disk before it returns, that this check-in's response write is about to be sent
    /// (now, in ms since 1970). `recorded` forgets it.
    public func writing(_ checkInEventID: String, at milliseconds: Int64) async throws {
        try await shared.write { db in
            try db.cachedStatement(
                sql: "INSERT INTO writes (checkin_event_id, at_ms) VALUES (?, ?) ON CONFLICT DO UPDATE SET at_ms = excluded.at_ms"
            ).execute(arguments: [checkInEventID, milliseconds])
        }
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
        public var writeStarted: Bool
    }

    /// ``earlyVoid(of:)``, ``response(of:)`` and ``writeStarted(_:)`` in one read: the ETO
    /// recorder asks all three of every check-in.
    public func memory(of checkInEventID: String) async throws -> Memory {
        try await shared.write { db in
            Memory(
                earlyVoid: try Self.earlyVoid(db, checkInEventID), response: try Self.response(db, checkInEventID),
                writeStarted: try Self.writeStarted(db, checkInEventID))
        }
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
