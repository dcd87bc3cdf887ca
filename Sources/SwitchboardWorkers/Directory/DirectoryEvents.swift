// The events of `switchboard-directory` (protocol/README.md section 16.3). One shape serves two
// purposes, told apart by `source`:
//
// - a *fact*: `source` is `directory`. The syncer saw this in the Directory (a person with this
//   Directory id was added or is gone). Nobody applies a fact to the Directory: it is there.
// - a *request*: any other `source` (`operator`, `kiosk`, another system's name). Someone asks the
//   syncer to make it so: add a person (no id: the Directory assigns ids), delete one.
//
// Loops are broken by that split: the syncer publishes facts only and applies requests only.

import Foundation
import SwitchboardProtocol

/// The `source` of a fact: what the syncer saw in the Directory.
public let directorySource = "directory"

/// The content of `person.created` (schema `person.created/1`).
public struct PersonCreated: Codable, Sendable, Hashable {
    public static let type = "person.created"
    public static let schema = "person.created/1"

    /// The Directory's id: present in facts (`source` = `directory`), absent in requests.
    public var personID: Int?
    public var name: String
    public var office: String
    public var source: String

    enum CodingKeys: String, CodingKey {
        case personID = "person_id", name, office, source
    }

    public init(personID: Int?, name: String, office: String, source: String) {
        self.personID = personID
        self.name = name
        self.office = office
        self.source = source
    }

    public var isFact: Bool { source == directorySource }
}

/// The content of `person.deleted` (schema `person.deleted/1`).
public struct PersonDeleted: Codable, Sendable, Hashable {
    public static let type = "person.deleted"
    public static let schema = "person.deleted/1"

    /// The Directory's id. A request names the person by it, or by `name` and `office`.
    public var personID: Int?
    public var name: String?
    public var office: String?
    public var source: String

    enum CodingKeys: String, CodingKey {
        case personID = "person_id", name, office, source
    }

    public init(personID: Int?, name: String?, office: String?, source: String) {
        self.personID = personID
        self.name = name
        self.office = office
        self.source = source
    }

    public var isFact: Bool { source == directorySource }
}

/// The content of `directory.sync.suspect` (schema `directory.sync.suspect/1`): a poll saw a list
/// that lost too many people at once; the syncer publishes nothing from it until the next poll
/// sees the same list. Counts only: no names.
public struct DirectorySyncSuspect: Codable, Sendable, Hashable {
    public static let type = "directory.sync.suspect"
    public static let schema = "directory.sync.suspect/1"

    /// The Directory user whose list it is.
    public var account: String
    /// People in the last list the syncer accepted.
    public var previous: Int
    /// People in the list it holds back.
    public var current: Int
    /// People of `previous` that are not in `current`.
    public var missing: Int
    /// The share of `previous` that may go missing in one poll (`--max-missing`).
    public var maxMissing: Double
    public var at: String

    enum CodingKeys: String, CodingKey {
        case account, previous, current, missing, maxMissing = "max_missing", at
    }

    public init(account: String, previous: Int, current: Int, missing: Int, maxMissing: Double, at: String) {
        self.account = account
        self.previous = previous
        self.current = current
        self.missing = missing
        self.maxMissing = maxMissing
        self.at = at
    }
}

extension PersonCreated {
    /// What breaks the schema's rules (the ones a decoder does not check), or nil.
    public var problem: String? {
        if let problem = PersonRules.problem(name: name, office: office, source: source) { return problem }
        if let personID, personID < 1 { return "person_id must be a positive number" }
        if isFact, personID == nil { return "a fact (source directory) carries the Directory's person_id" }
        if !isFact, personID != nil { return "a request to add a person carries no person_id: the Directory assigns ids" }
        return nil
    }
}

extension PersonDeleted {
    /// What breaks the schema's rules (the ones a decoder does not check), or nil.
    public var problem: String? {
        if let problem = PersonRules.problem(name: name, office: office, source: source) { return problem }
        if let personID, personID < 1 { return "person_id must be a positive number" }
        if isFact, personID == nil || name == nil || office == nil {
            return "a fact (source directory) carries person_id, name and office"
        }
        if !isFact, personID == nil, name == nil || office == nil { return "a request to delete names person_id, or name and office" }
        return nil
    }
}

/// The rules beyond a decoder's that both person events share.
enum PersonRules {
    /// Why a person event cannot be applied, or nil.
    static func problem(name: String?, office: String?, source: String) -> String? {
        if source.wholeMatch(of: /^[a-z][a-z0-9_-]{0,63}$/) == nil {
            return "source '\(source)' must be 1–64 of a–z 0–9 _ - starting with a letter"
        }
        for (field, value) in [("name", name), ("office", office)] {
            guard let value else { continue }
            if value.count > 200 { return "\(field) is longer than 200 characters" }
            if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                return "\(field) contains a control character"
            }
        }
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { return "name is blank" }
        return nil
    }
}
