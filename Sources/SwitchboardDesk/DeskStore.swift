// What the desk keeps on disk (one SQLite file, mode 0600, in the kiosk's data directory): the
// roster of the site's participants, so staff find people while the broker or ETO is down; the
// check-ins recorded at this desk with what became of each (the journey); and the last bus_seq
// the journey has read, so a restart catches up instead of starting over.
//
// Names and dates of birth are here as they are in the outbox beside it: on the kiosk's own
// disk, private to its user. They are never logged.

import Foundation
import GRDB
import SwitchboardStorage

/// A participant of the roster.
public struct RosterPerson: Codable, Sendable, Hashable {
    public var participantID: Int64
    public var firstName: String
    public var lastName: String
    public var dateOfBirth: String?
    public var gender: String?

    enum CodingKeys: String, CodingKey {
        case participantID = "participant_id", firstName = "first_name", lastName = "last_name", dateOfBirth = "date_of_birth", gender
    }

    public init(participantID: Int64, firstName: String, lastName: String, dateOfBirth: String? = nil, gender: String? = nil) {
        self.participantID = participantID
        self.firstName = firstName
        self.lastName = lastName
        self.dateOfBirth = dateOfBirth
        self.gender = gender
    }
}

/// One check-in recorded at this desk and what became of it.
public struct JourneyRow: Sendable, Hashable {
    public var eventID: String
    /// The local calendar day it was recorded (`YYYY-MM-DD`).
    public var day: String
    public var recordedAt: String
    /// How the page names the person (first name and last name; personal data, never logged).
    public var who: String
    public var isWalkIn: Bool
    public var bed: String?
    /// The check-in's ordering key, under which a void is published.
    public var key: String
    public var siteID: Int64
    public var programID: Int64
    public var inFileMaker = false
    public var inETO = false
    public var voidEventID: String?
    public var voidedInFileMaker = false
    public var voidedInETO = false
    /// A dead letter's code, for the check-in or its void.
    public var problem: String?
}

public final class DeskStore: Sendable {
    public let path: String
    private let queue: DatabaseQueue

    public init(path: String) throws {
        self.path = path
        queue = try PrivateDatabase.open(path: path, label: "desk") { migrator in
            migrator.registerMigration("v1") { db in
                try db.execute(
                    sql: """
                        CREATE TABLE roster (participant_id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL,
                            date_of_birth TEXT, gender TEXT, first_folded TEXT NOT NULL, last_folded TEXT NOT NULL);
                        CREATE INDEX roster_first ON roster(first_folded);
                        CREATE INDEX roster_last ON roster(last_folded);
                        CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
                        CREATE TABLE checkins (event_id TEXT PRIMARY KEY, day TEXT NOT NULL, recorded_at TEXT NOT NULL,
                            who TEXT NOT NULL, walk_in INTEGER NOT NULL, bed TEXT, ordering_key TEXT NOT NULL,
                            site_id INTEGER NOT NULL, program_id INTEGER NOT NULL,
                            in_filemaker INTEGER NOT NULL DEFAULT 0, in_eto INTEGER NOT NULL DEFAULT 0,
                            void_event_id TEXT UNIQUE, voided_filemaker INTEGER NOT NULL DEFAULT 0,
                            voided_eto INTEGER NOT NULL DEFAULT 0, problem TEXT);
                        CREATE INDEX checkins_day ON checkins(day);
                        """)
            }
        }
    }

    /// Lower case without accents: what a search compares.
    public static func fold(_ text: String) -> String {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
            .trimmingCharacters(in: .whitespaces)
    }

    // MARK: roster

    /// Adds or replaces these people.
    public func upsert(_ people: [RosterPerson]) async throws {
        try await queue.write { db in
            for person in people {
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO roster (participant_id, first_name, last_name, date_of_birth, gender, first_folded, last_folded)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        person.participantID, person.firstName, person.lastName, person.dateOfBirth, person.gender,
                        Self.fold(person.firstName), Self.fold(person.lastName),
                    ])
            }
        }
    }

    /// People whose first or last name starts with `name` (folded; every word of `name` must
    /// start one of the two), born on `dateOfBirth` when given; at most `limit`.
    public func search(name: String, dateOfBirth: String?, limit: Int = 50) async throws -> [RosterPerson] {
        let words = Self.fold(name).split(separator: " ").map(String.init).prefix(4)
        guard !words.isEmpty || dateOfBirth != nil else { return [] }
        var clauses: [String] = []
        for _ in words {
            clauses.append("(first_folded LIKE ? ESCAPE '\\' OR last_folded LIKE ? ESCAPE '\\')")
        }
        if dateOfBirth != nil { clauses.append("date_of_birth = ?") }
        let sql =
            "SELECT participant_id, first_name, last_name, date_of_birth, gender FROM roster WHERE "
            + clauses.joined(separator: " AND ") + " ORDER BY last_folded, first_folded LIMIT \(max(1, min(limit, 500)))"
        let patterns = words.map { Self.escapeLike($0) + "%" }
        return try await queue.read { db in
            var arguments: [(any DatabaseValueConvertible)?] = []
            for pattern in patterns { arguments += [pattern, pattern] }
            if let dateOfBirth { arguments.append(dateOfBirth) }
            return try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map { row in
                RosterPerson(
                    participantID: row[0], firstName: row[1], lastName: row[2], dateOfBirth: row[3], gender: row[4])
            }
        }
    }

    public func person(_ participantID: Int64) async throws -> RosterPerson? {
        try await queue.read { db in
            try Row.fetchOne(
                db, sql: "SELECT participant_id, first_name, last_name, date_of_birth, gender FROM roster WHERE participant_id = ?",
                arguments: [participantID]
            ).map { RosterPerson(participantID: $0[0], firstName: $0[1], lastName: $0[2], dateOfBirth: $0[3], gender: $0[4]) }
        }
    }

    public func rosterCount() async throws -> Int {
        try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM roster") ?? 0 }
    }

    static func escapeLike(_ text: String) -> String {
        var out = ""
        for character in text {
            if character == "%" || character == "_" || character == "\\" { out.append("\\") }
            out.append(character)
        }
        return out
    }

    // MARK: settings (the roster's mark and age, the journey's cursor)

    public func setting(_ name: String) async throws -> String? {
        try await queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM settings WHERE name = ?", arguments: [name]) }
    }

    public func set(_ name: String, _ value: String) async throws {
        try await queue.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)", arguments: [name, value])
        }
    }

    // MARK: journey

    public func record(_ row: JourneyRow) async throws {
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO checkins (event_id, day, recorded_at, who, walk_in, bed, ordering_key, site_id, program_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    row.eventID, row.day, row.recordedAt, row.who, row.isWalkIn, row.bed, row.key, row.siteID, row.programID,
                ])
        }
    }

    public func checkIn(_ eventID: String) async throws -> JourneyRow? {
        try await queue.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM checkins WHERE event_id = ?", arguments: [eventID]).map(Self.journeyRow)
        }
    }

    /// The day's check-ins, newest first.
    public func checkIns(day: String) async throws -> [JourneyRow] {
        try await queue.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM checkins WHERE day = ? ORDER BY recorded_at DESC, event_id DESC", arguments: [day])
                .map(Self.journeyRow)
        }
    }

    /// Notes the void's event id; false when the check-in is voided already (or unknown).
    public func markVoid(checkIn eventID: String, voidEventID: String) async throws -> Bool {
        try await queue.write { db in
            try db.execute(
                sql: "UPDATE checkins SET void_event_id = ? WHERE event_id = ? AND void_event_id IS NULL",
                arguments: [voidEventID, eventID])
            return db.changesCount == 1
        }
    }

    /// What an outcome event says about one of this desk's check-ins (or voids).
    public enum Outcome: Sendable, Hashable {
        case inFileMaker(checkIn: String)
        case inETO(checkIn: String)
        case voidedInFileMaker(checkIn: String)
        case voidedInETO(checkIn: String)
        /// A dead letter of the check-in or of its void.
        case problem(eventID: String, code: String)
    }

    /// Applies an outcome; false when it concerns no check-in of this desk.
    @discardableResult
    public func apply(_ outcome: Outcome) async throws -> Bool {
        try await queue.write { db in
            switch outcome {
            case .inFileMaker(let id):
                try db.execute(sql: "UPDATE checkins SET in_filemaker = 1 WHERE event_id = ?", arguments: [id])
            case .inETO(let id):
                try db.execute(sql: "UPDATE checkins SET in_eto = 1 WHERE event_id = ?", arguments: [id])
            case .voidedInFileMaker(let id):
                try db.execute(sql: "UPDATE checkins SET voided_filemaker = 1 WHERE event_id = ?", arguments: [id])
            case .voidedInETO(let id):
                try db.execute(sql: "UPDATE checkins SET voided_eto = 1 WHERE event_id = ?", arguments: [id])
            case .problem(let id, let code):
                try db.execute(
                    sql: "UPDATE checkins SET problem = ? WHERE event_id = ? OR void_event_id = ?", arguments: [code, id, id])
            }
            return db.changesCount > 0
        }
    }

    static func journeyRow(_ row: Row) -> JourneyRow {
        var journey = JourneyRow(
            eventID: row["event_id"], day: row["day"], recordedAt: row["recorded_at"], who: row["who"], isWalkIn: row["walk_in"],
            bed: row["bed"], key: row["ordering_key"], siteID: row["site_id"], programID: row["program_id"])
        journey.inFileMaker = row["in_filemaker"]
        journey.inETO = row["in_eto"]
        journey.voidEventID = row["void_event_id"]
        journey.voidedInFileMaker = row["voided_filemaker"]
        journey.voidedInETO = row["voided_eto"]
        journey.problem = row["problem"]
        return journey
    }
}
