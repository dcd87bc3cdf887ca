// `switchboard-directory`'s memory, one SQLite file in its data directory (0600 in 0700, WAL,
// synchronous=FULL, through PrivateDatabase): the accepted list (the snapshot the poll diffs
// against), the list a suspect poll held back, and the bus requests it applied, keyed by event id.
//
// The applied requests make the syncer's effects idempotent, and live in the same file as the
// snapshot on purpose: "request applied" and "the snapshot knows the person" commit in one
// transaction, so no crash can leave a person the syncer added looking new to its next poll.

import Foundation
import GRDB
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardStorage

public final class DirectorySyncStore: Sendable {
    public let path: String
    private let queue: DatabaseQueue

    /// What a poll needs to decide.
    public struct PollState: Sendable {
        public var snapshot: [DirectoryEntry]?
        public var heldBack: [DirectoryEntry]?
        public var intents: [DirectoryIntent]
    }

    public init(path: String) throws {
        self.path = path
        queue = try PrivateDatabase.open(path: path) { migrator in
            migrator.registerMigration("v1") { db in
                try db.execute(
                    sql: """
                        CREATE TABLE people (person_id INTEGER PRIMARY KEY, name TEXT NOT NULL, office TEXT NOT NULL);
                        CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                        CREATE TABLE applied (event_id TEXT PRIMARY KEY, action TEXT NOT NULL, name TEXT, office TEXT,
                            person_id INTEGER, done INTEGER NOT NULL DEFAULT 0, at TEXT NOT NULL) WITHOUT ROWID;
                        """)
            }
        }
    }

    public func pollState() async throws -> PollState {
        try await queue.read { db in
            let baseline = try String.fetchOne(db, sql: "SELECT value FROM state WHERE key = 'baseline'") != nil
            let snapshot = baseline ? try Self.people(db) : nil
            let heldBack = try String.fetchOne(db, sql: "SELECT value FROM state WHERE key = 'held_back'").map {
                try JSONDecoder().decode([DirectoryEntry].self, from: Data($0.utf8))
            }
            let intents = try Row.fetchAll(db, sql: "SELECT event_id, action, name, office, person_id FROM applied WHERE done = 0")
                .compactMap { row -> DirectoryIntent? in
                    guard let action = DirectoryIntent.Action(rawValue: row[1]) else { return nil }
                    return DirectoryIntent(eventID: row[0], action: action, name: row[2], office: row[3], personID: row[4])
                }
            return PollState(snapshot: snapshot, heldBack: heldBack, intents: intents)
        }
    }

    private static func people(_ db: Database) throws -> [DirectoryEntry] {
        try Row.fetchAll(db, sql: "SELECT person_id, name, office FROM people ORDER BY person_id").map {
            DirectoryEntry(id: $0[0], name: $0[1], office: $0[2])
        }
    }

    /// The accepted list, or nil before the first poll was accepted.
    public func snapshot() async throws -> [DirectoryEntry]? { try await pollState().snapshot }

    /// Remembers an accepted poll: the new snapshot, no list held back, the intents it settled.
    public func accept(_ changes: PollChanges) async throws {
        try await queue.write { db in
            try db.execute(sql: "DELETE FROM people")
            let insert = try db.cachedStatement(sql: "INSERT INTO people (person_id, name, office) VALUES (?, ?, ?)")
            for person in changes.snapshot { try insert.execute(arguments: [person.id, person.name, person.office]) }
            try db.execute(sql: "INSERT OR REPLACE INTO state (key, value) VALUES ('baseline', ?)", arguments: [Timestamp.now()])
            try db.execute(sql: "DELETE FROM state WHERE key = 'held_back'")
            for (eventID, personID) in changes.adopted {
                try db.execute(sql: "UPDATE applied SET person_id = ? WHERE event_id = ?", arguments: [personID, eventID])
            }
        }
    }

    /// Remembers a list held back by the guard.
    public func holdBack(_ list: [DirectoryEntry]) async throws {
        let text = String(decoding: try JSONEncoder().encode(list), as: UTF8.self)
        try await queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO state (key, value) VALUES ('held_back', ?)", arguments: [text])
        }
    }

    /// The request `eventID` as recorded: nil when never started.
    public func intent(_ eventID: String) async throws -> (intent: DirectoryIntent, done: Bool)? {
        try await queue.read { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT action, name, office, person_id, done FROM applied WHERE event_id = ?", arguments: [eventID]),
                let action = DirectoryIntent.Action(rawValue: row[0])
            else { return nil }
            let done: Int = row[4]
            return (DirectoryIntent(eventID: eventID, action: action, name: row[1], office: row[2], personID: row[3]), done != 0)
        }
    }

    /// Records that applying `intent` has started (before the Directory call). Recording again
    /// keeps the first record, but fills in a person id it lacked.
    public func begin(_ intent: DirectoryIntent) async throws {
        try await queue.write { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO applied (event_id, action, name, office, person_id, at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [intent.eventID, intent.action.rawValue, intent.name, intent.office, intent.personID, Timestamp.now()])
            if let personID = intent.personID {
                try db.execute(
                    sql: "UPDATE applied SET person_id = ? WHERE event_id = ? AND person_id IS NULL", arguments: [personID, intent.eventID])
            }
        }
    }

    /// Records `eventID` as applied and, in the same transaction, puts `added` into the snapshot
    /// or takes `removed` out of it (only once a snapshot exists: before the first poll there is
    /// nothing to keep in step).
    public func finish(_ intent: DirectoryIntent, added: DirectoryEntry? = nil, removed: Int? = nil) async throws {
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO applied (event_id, action, name, office, person_id, done, at) VALUES (?, ?, ?, ?, ?, 1, ?)
                    ON CONFLICT (event_id) DO UPDATE SET done = 1, person_id = excluded.person_id
                    """,
                arguments: [
                    intent.eventID, intent.action.rawValue, intent.name, intent.office, added?.id ?? removed ?? intent.personID,
                    Timestamp.now(),
                ])
            guard try String.fetchOne(db, sql: "SELECT value FROM state WHERE key = 'baseline'") != nil else { return }
            if let added {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO people (person_id, name, office) VALUES (?, ?, ?)",
                    arguments: [added.id, added.name, added.office])
            }
            if let removed { try db.execute(sql: "DELETE FROM people WHERE person_id = ?", arguments: [removed]) }
        }
    }
}
