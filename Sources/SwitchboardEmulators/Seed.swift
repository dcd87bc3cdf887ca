public import Foundation

/// The data the emulators start from, and the shape their state is saved in (`--state FILE`
/// writes this same document back). The bundled seed (`Resources/seed.json`) tells one story: an
/// enterprise with three shelters, their programs and participants, a FileMaker file `Shelter`
/// with layouts `CheckIns`, `Participants` and `Staff`, directory users with their people, and an
/// SAP application for the outreach phones. Bring your own with `--seed FILE`.
public struct EmulatorSeed: Codable, Sendable {
    public var eto: ETOSeed
    public var filemaker: FileMakerSeed
    public var directory: DirectorySeed
    public var sap: SAPSeed

    /// The seed shipped with the emulator.
    public static func bundled() throws -> EmulatorSeed {
        guard let url = Bundle.module.url(forResource: "seed", withExtension: "json") else {
            throw EmulatorError("the bundled seed (seed.json) is missing from the SwitchboardEmulators resources")
        }
        return try load(from: url)
    }

    /// Reads a seed or saved state; errors name the file and the field that is wrong.
    public static func load(from url: URL) throws -> EmulatorSeed {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw EmulatorError("cannot read seed file \(url.path): \(error.localizedDescription)")
        }
        return try decode(data, source: url.path)
    }

    public static func decode(_ data: Data, source: String) throws -> EmulatorSeed {
        do {
            let seed = try JSONDecoder().decode(EmulatorSeed.self, from: data)
            try seed.validate()
            return seed
        } catch let error as EmulatorError {
            throw EmulatorError("seed \(source): \(error.message)")
        } catch let DecodingError.keyNotFound(key, context) {
            throw EmulatorError("seed \(source): missing field \(Self.path(context.codingPath + [key]))")
        } catch let DecodingError.typeMismatch(type, context) {
            throw EmulatorError("seed \(source): \(Self.path(context.codingPath)) should be \(type)")
        } catch let DecodingError.valueNotFound(type, context) {
            throw EmulatorError("seed \(source): \(Self.path(context.codingPath)) should be \(type), not null")
        } catch let DecodingError.dataCorrupted(context) {
            throw EmulatorError("seed \(source): \(context.debugDescription) at \(Self.path(context.codingPath))")
        } catch {
            throw EmulatorError("seed \(source): \(error)")
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        let text = codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        return text.hasPrefix(".") ? String(text.dropFirst()) : (text.isEmpty ? "(top level)" : text)
    }

    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Cross-references a JSON Schema cannot express: ids unique, references resolvable.
    func validate() throws {
        func unique<T: Hashable>(_ values: [T], _ what: String) throws {
            var seen = Set<T>()
            for value in values where !seen.insert(value).inserted {
                throw EmulatorError("\(what) \(value) appears twice")
            }
        }
        try unique(eto.enterprises.map(\.guid), "eto enterprise guid")
        try unique(eto.enterprises.flatMap(\.sites).map(\.id), "eto site id")
        try unique(eto.enterprises.flatMap(\.sites).flatMap(\.programs).map(\.id), "eto program id")
        try unique(eto.participants.map(\.id), "eto participant id")
        let sites = Set(eto.enterprises.flatMap(\.sites).map(\.id))
        for participant in eto.participants where !sites.contains(participant.siteID) {
            throw EmulatorError("eto participant \(participant.id) names site \(participant.siteID), which does not exist")
        }
        for database in filemaker.databases {
            let tables = Set(database.tables.map(\.name))
            for layout in database.layouts where !tables.contains(layout.table) {
                throw EmulatorError("filemaker layout \(layout.name) names table \(layout.table), which does not exist")
            }
            let fields = Dictionary(database.tables.map { ($0.name, Set($0.fields.map(\.name))) }, uniquingKeysWith: { a, _ in a })
            for layout in database.layouts {
                let portals = layout.portals ?? []
                try unique(portals.map(\.name), "filemaker portal of layout \(layout.name):")
                for portal in portals {
                    let what = "filemaker portal \(portal.name) of layout \(layout.name)"
                    guard let related = fields[portal.table] else {
                        throw EmulatorError("\(what) names table \(portal.table), which does not exist")
                    }
                    guard fields[layout.table]?.contains(portal.matchField) == true else {
                        throw EmulatorError("\(what) matches on \(layout.table)::\(portal.matchField), which does not exist")
                    }
                    guard related.contains(portal.relatedField) else {
                        throw EmulatorError("\(what) matches on \(portal.table)::\(portal.relatedField), which does not exist")
                    }
                }
            }
            try unique(database.layouts.map(\.name), "filemaker layout")
        }
        try unique(directory.users.map(\.name), "directory user name")
        try unique(directory.users.map(\.id), "directory user id")
        let users = Set(directory.users.map(\.id))
        for person in directory.people where !users.contains(person.user) {
            throw EmulatorError("directory person \(person.id) belongs to user \(person.user), who does not exist")
        }
        try unique(sap.applications.map(\.id), "sap application")
    }
}

// MARK: ETO

public struct ETOSeed: Codable, Sendable {
    /// How long an SSO token from SSOAuthenticate lives (minutes from issue).
    public var ssoTokenMinutes: Int
    public var accounts: [Account]
    public var enterprises: [Enterprise]
    public var participants: [Participant]
    public var touchPoints: [TouchPoint]
    public var responses: [Response]
    public var nextEnrollmentID: Int
    public var nextResponseID: Int
    /// The last participant change number handed out (`Actor.svc/participants`' `ChangedSince`);
    /// absent in older seeds: the highest `changeSeq` of any participant.
    public var lastChange: Int64?

    public struct Account: Codable, Sendable {
        public var email: String
        public var password: String
        /// Enterprises this account may enter (all when absent).
        public var enterprises: [String]?
    }

    public struct Enterprise: Codable, Sendable {
        public var guid: String
        public var name: String
        public var sites: [Site]
    }

    public struct Site: Codable, Sendable {
        public var id: Int
        public var name: String
        public var idleTimeoutMinutes: Int
        public var securityTokenRecycleMinutes: Int
        public var timeZone: String
        public var programs: [Program]
    }

    public struct Program: Codable, Sendable {
        public var id: Int
        public var name: String
        public var disabled: Bool
        public var confidential: Bool
        public var guid: String
    }

    public struct Participant: Codable, Sendable {
        public var id: Int
        public var siteID: Int
        public var firstName: String
        public var middleInitial: String
        public var lastName: String
        /// Milliseconds since 1970, UTC midnight of the birthday.
        public var dateOfBirth: Int64
        public var caseNumber: String
        /// 0 male, 1 female, 2 unknown.
        public var gender: Int
        public var disabled: Bool
        public var subjectID: Int
        public var guid: String
        public var enrollments: [Enrollment]
        /// The change number of the participant's last add or change (absent: 0, seeded).
        public var changeSeq: Int64?
    }

    public struct Enrollment: Codable, Sendable {
        public var id: Int
        public var programID: Int
        public var startDate: Int64
    }

    public struct TouchPoint: Codable, Sendable {
        public var id: Int
        public var name: String
        public var elements: [Element]
    }

    public struct Element: Codable, Sendable {
        public var id: Int
        /// 4 single choice, 5 text, 9 date, 29 file attachment.
        public var type: Int
        public var name: String
        public var choices: [Int]?
    }

    public struct Response: Codable, Sendable {
        public var id: Int
        public var touchPointID: Int
        public var subjectID: Int
        public var programID: Int
        public var created: Int64
        public var elements: [ResponseElement]
        /// Deleted through `TouchPointResponseDelete`: hidden from every read, its id never reused.
        public var deleted: Bool?
    }

    public struct ResponseElement: Codable, Sendable {
        public var elementID: Int
        public var elementType: Int
        public var value: String?
        public var choices: [Int]?
    }
}

// MARK: FileMaker

public struct FileMakerSeed: Codable, Sendable {
    /// Minutes a token lives after the last call that used it (15 on real servers).
    public var sessionIdleMinutes: Int
    /// Concurrent sessions the server allows before refusing log-ins with 812.
    public var sessionLimit: Int
    public var databases: [Database]

    public struct Database: Codable, Sendable {
        public var name: String
        public var accounts: [Account]
        public var tables: [Table]
        public var layouts: [Layout]
        public var scripts: [Script]
    }

    public struct Account: Codable, Sendable {
        public var username: String
        public var password: String
    }

    public struct Table: Codable, Sendable {
        public var name: String
        public var fields: [Field]
        public var records: [Record]
        public var nextRecordID: Int
        public var nextSerial: Int
    }

    public struct Field: Codable, Sendable {
        public var name: String
        /// `text`, `number`, `date`, `time`, `timeStamp` or `container`.
        public var type: String
        public var unique: Bool?
        public var global: Bool?
        /// `serial` or `creationTimestamp`.
        public var autoEnter: String?
    }

    public struct Record: Codable, Sendable {
        public var recordId: Int
        public var modId: Int
        public var fieldData: [String: SeedValue]
    }

    public struct Layout: Codable, Sendable {
        public var name: String
        public var table: String
        /// Portals on the layout, in the order the layout shows them; absent when it has none.
        public var portals: [Portal]?
    }

    /// A portal: the records of `table` whose `relatedField` equals the layout record's
    /// `matchField` (an equi-join, as a FileMaker relationship with one `=` predicate).
    public struct Portal: Codable, Sendable {
        /// Its name in `portalData`, `portalMetaData` and the `portal` parameter.
        public var name: String
        /// The related table; its fields show as `Table::Field` in the portal's rows.
        public var table: String
        /// A field of the layout's table.
        public var matchField: String
        /// A field of the related table.
        public var relatedField: String
    }

    public struct Script: Codable, Sendable {
        public var name: String
        /// `echo` (returns its parameter), `count` (records on `layout`) or `fail` (scriptError `error`).
        public var action: String
        public var layout: String?
        public var error: String?
    }
}

/// A field value in a seed: FileMaker stores text and numbers.
public enum SeedValue: Codable, Sendable, Equatable {
    case text(String)
    case number(Double)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else {
            self = .text(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .text(let s): try container.encode(s)
        case .number(let n): try container.encode(n)
        }
    }
}

// MARK: Directory

public struct DirectorySeed: Codable, Sendable {
    public var users: [User]
    public var people: [Person]
    public var nextUserID: Int
    public var nextPersonID: Int

    public struct User: Codable, Sendable {
        public var id: Int
        public var name: String
        public var password: String
        public var key: String
    }

    public struct Person: Codable, Sendable {
        public var id: Int
        public var name: String
        public var office: String
        public var user: Int
    }
}

// MARK: SAP Mobile Services

public struct SAPSeed: Codable, Sendable {
    public var applications: [Application]

    public struct Application: Codable, Sendable {
        public var id: String
        public var name: String
        /// Registers without credentials when true.
        public var anonymous: Bool
        public var users: [User]
        public var connections: [Connection]
    }

    public struct User: Codable, Sendable {
        public var username: String
        public var password: String
        /// A user who may sign in but is refused registration (403).
        public var canRegister: Bool
    }

    public struct Connection: Codable, Sendable {
        public var id: String
        public var user: String
        public var deviceType: String
        public var deviceModel: String
        public var applicationVersion: String
        public var created: Int64
    }
}

/// A configuration or seed problem, worded for the person running the emulator.
public struct EmulatorError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
