// ETO's WCF JSON shapes, with Swift names. Decoding is lenient where the public record shows
// fields missing or null in real responses (middle initials, case numbers, GUIDs), strict where
// a missing value would make the result useless (ids, names).

public import Foundation
public import SwitchboardHTTP

/// Types of the ETO (Efforts to Outcomes) web services; the client is ``ETOClient``.
public enum ETO {
    /// An enterprise the account may log into (`GetSSOEnterprises`).
    public struct Enterprise: Codable, Hashable, Sendable {
        public var guid: String
        public var name: String

        public init(guid: String, name: String) {
            self.guid = guid
            self.name = name
        }

        enum CodingKeys: String, CodingKey {
            case guid = "Key"
            case name = "Value"
        }
    }

    /// A site of an enterprise (`GetSSOSites`).
    public struct Site: Codable, Hashable, Sendable {
        public var id: Int
        public var name: String

        public init(id: Int, name: String) {
            self.id = id
            self.name = name
        }

        enum CodingKeys: String, CodingKey {
            case id = "Key"
            case name = "Value"
        }
    }

    /// A site's settings (`GetSiteInfo`); the token lifetimes decide when a session is recycled.
    public struct SiteInfo: Codable, Hashable, Sendable {
        public var siteID: Int?
        public var siteName: String?
        public var idleTimeoutMinutes: Int?
        public var securityTokenRecycleIntervalMinutes: Int?
        public var timeZone: String?

        enum CodingKeys: String, CodingKey {
            case siteID = "SiteID"
            case siteName = "SiteName"
            case idleTimeoutMinutes = "IdleTimeout_ThresholdInMinutes"
            case securityTokenRecycleIntervalMinutes = "SecurityTokenRecycleIntervalInMinutes"
            case timeZone = "TimeZone"
        }
    }

    /// A program of a site (`GetPrograms`).
    public struct Program: Codable, Hashable, Sendable {
        public var id: Int
        public var name: String
        public var disabled: Bool
        public var confidential: Bool
        public var guid: String?

        public init(id: Int, name: String, disabled: Bool = false, confidential: Bool = false, guid: String? = nil) {
            self.id = id
            self.name = name
            self.disabled = disabled
            self.confidential = confidential
            self.guid = guid
        }

        enum CodingKeys: String, CodingKey {
            case id = "ID"
            case name = "Name"
            case disabled = "Disabled"
            case confidential = "Confidential"
            case guid = "GUID"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(Int.self, forKey: .id)
            name = try c.decode(String.self, forKey: .name)
            disabled = try c.decodeIfPresent(Bool.self, forKey: .disabled) ?? false
            confidential = try c.decodeIfPresent(Bool.self, forKey: .confidential) ?? false
            guid = try c.decodeIfPresent(String.self, forKey: .guid)
        }
    }

    /// ETO's gender codes. Codes other than 0 and 1 read as ``unknown``.
    public enum Gender: Int, Codable, Hashable, Sendable {
        case male = 0
        case female = 1
        case unknown = 2

        public init(from decoder: any Decoder) throws {
            let code = try decoder.singleValueContainer().decode(Int.self)
            self = Gender(rawValue: code) ?? .unknown
        }
    }

    /// A participant (`Actor.svc/participant/{CLID}`).
    public struct Participant: Codable, Hashable, Sendable {
        /// The CLID.
        public var id: Int
        public var firstName: String
        public var middleInitial: String?
        public var lastName: String
        public var dateOfBirth: WCFDate?
        public var caseNumber: String?
        public var gender: Gender?
        public var disabled: Bool?
        /// The id TouchPoint responses are recorded against.
        public var subjectID: Int?
        public var guid: String?

        enum CodingKeys: String, CodingKey {
            case id = "ID"
            case firstName = "FirstName"
            case middleInitial = "MiddleInitial"
            case lastName = "LastName"
            case dateOfBirth = "DateOfBirth"
            case caseNumber = "CaseNumber"
            case gender = "Gender"
            case disabled = "Disabled"
            case subjectID = "SubjectID"
            case guid = "GUID"
        }
    }

    /// One hit of `Search.svc/Search/{programId}/{text}`.
    public struct SearchHit: Codable, Hashable, Sendable {
        public var clid: Int
        public var firstName: String
        public var lastName: String
        public var dateOfBirth: WCFDate?
        public var caseNumber: String?
        public var programStartDate: WCFDate?

        public init(
            clid: Int, firstName: String, lastName: String, dateOfBirth: WCFDate? = nil, caseNumber: String? = nil,
            programStartDate: WCFDate? = nil
        ) {
            self.clid = clid
            self.firstName = firstName
            self.lastName = lastName
            self.dateOfBirth = dateOfBirth
            self.caseNumber = caseNumber
            self.programStartDate = programStartDate
        }

        enum CodingKeys: String, CodingKey {
            case clid = "CLID"
            case firstName = "FName"
            case lastName = "LName"
            case dateOfBirth = "DOB"
            case caseNumber = "CaseNumber"
            case programStartDate = "ProgramStartDate"
        }
    }

    /// A TouchPoint element's type. Seen in the public record: 4 single choice, 5 text, 9 date,
    /// 29 file attachment; others pass through as their number.
    public struct ElementType: RawRepresentable, Codable, Hashable, Sendable {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int.self) }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(rawValue)
        }

        public static let singleChoice = ElementType(rawValue: 4)
        public static let text = ElementType(rawValue: 5)
        public static let date = ElementType(rawValue: 9)
        public static let fileAttachment = ElementType(rawValue: 29)
    }

    /// One answered element of a TouchPoint response.
    public struct ResponseElement: Codable, Hashable, Sendable {
        public var elementID: Int
        public var elementType: ElementType
        /// The answer of text, date (`MM/dd/yyyy`) and file elements.
        public var value: String?
        /// The chosen `TouchPointElementChoiceID`s of choice elements.
        public var choiceIDs: [Int]?

        public init(elementID: Int, elementType: ElementType, value: String? = nil, choiceIDs: [Int]? = nil) {
            self.elementID = elementID
            self.elementType = elementType
            self.value = value
            self.choiceIDs = choiceIDs
        }

        /// A text element (type 5).
        public static func text(_ elementID: Int, _ value: String) -> ResponseElement {
            ResponseElement(elementID: elementID, elementType: .text, value: value)
        }

        /// A single-choice element (type 4).
        public static func singleChoice(_ elementID: Int, choiceID: Int) -> ResponseElement {
            ResponseElement(elementID: elementID, elementType: .singleChoice, choiceIDs: [choiceID])
        }

        /// A date element (type 9), written `MM/dd/yyyy` as the calendar day of `date` in `timeZone`
        /// (the site's time zone: a night of shelter is a local day).
        public static func date(_ elementID: Int, _ date: Date, timeZone: TimeZone) -> ResponseElement {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = timeZone
            let day = calendar.dateComponents([.year, .month, .day], from: date)
            func two(_ n: Int) -> String { n < 10 ? "0\(n)" : String(n) }
            let text = "\(two(day.month ?? 1))/\(two(day.day ?? 1))/\(day.year ?? 1970)"
            return ResponseElement(elementID: elementID, elementType: .date, value: text)
        }

        /// A file-attachment element (type 29). Its value's wire form is undocumented; the
        /// caller supplies it as ETO expects it.
        public static func fileAttachment(_ elementID: Int, value: String) -> ResponseElement {
            ResponseElement(elementID: elementID, elementType: .fileAttachment, value: value)
        }

        struct Choice: Codable, Hashable {
            var id: Int
            enum CodingKeys: String, CodingKey { case id = "TouchPointElementChoiceID" }
        }

        enum CodingKeys: String, CodingKey {
            case elementID = "ElementID"
            case elementType = "ElementType"
            case value = "Value"
            case choices = "ResponseElementChoices"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            elementID = try c.decode(Int.self, forKey: .elementID)
            elementType = try c.decode(ElementType.self, forKey: .elementType)
            value = try c.decodeIfPresent(String.self, forKey: .value)
            choiceIDs = try c.decodeIfPresent([Choice].self, forKey: .choices)?.map(\.id)
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(elementID, forKey: .elementID)
            try c.encode(elementType, forKey: .elementType)
            try c.encodeIfPresent(value, forKey: .value)
            try c.encodeIfPresent(choiceIDs?.map(Choice.init(id:)), forKey: .choices)
        }
    }

    /// A response to a TouchPoint (how a shelter check-in is recorded).
    public struct TouchPointResponse: Codable, Hashable, Sendable {
        /// Set by ETO; `nil` on a response to add.
        public var id: Int64?
        public var touchPointID: Int
        public var subjectID: Int
        public var programID: Int
        public var created: WCFDate?
        public var elements: [ResponseElement]

        public init(touchPointID: Int, subjectID: Int, programID: Int, created: Date? = nil, elements: [ResponseElement]) {
            self.touchPointID = touchPointID
            self.subjectID = subjectID
            self.programID = programID
            self.created = created.map { WCFDate($0) }
            self.elements = elements
        }

        enum CodingKeys: String, CodingKey {
            case id = "TouchPointResponseID"
            case touchPointID = "TouchPointID"
            case subjectID = "SubjectID"
            case programID = "ProgramID"
            case created = "ResponseCreatedDate"
            case elements = "ResponseElements"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decodeIfPresent(Int64.self, forKey: .id)
            touchPointID = try c.decode(Int.self, forKey: .touchPointID)
            subjectID = try c.decode(Int.self, forKey: .subjectID)
            programID = try c.decode(Int.self, forKey: .programID)
            created = try c.decodeIfPresent(WCFDate.self, forKey: .created)
            elements = try c.decodeIfPresent([ResponseElement].self, forKey: .elements) ?? []
        }
    }
}
