// The Data API's record shapes. Field values arrive as JSON strings or numbers (a number field
// holds a number, everything else text, and an empty field is ""), record and modification ids
// as strings. Find requests are built as values: fields AND'd within a request, requests OR'd,
// `omit` requests taking their matches out, in order.

import Foundation
import SwitchboardHTTP

/// Types of the Claris FileMaker Data API; the client is ``FileMakerClient``.
public enum FileMaker {
    /// A field's value: text or a number.
    public enum FieldValue: Codable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
        ExpressibleByFloatLiteral
    {
        case text(String)
        case number(Double)

        public init(stringLiteral value: String) { self = .text(value) }
        public init(integerLiteral value: Int) { self = .number(Double(value)) }
        public init(floatLiteral value: Double) { self = .number(value) }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let text = try? c.decode(String.self) {
                self = .text(text)
            } else if let number = try? c.decode(Double.self) {
                self = .number(number)
            } else if c.decodeNil() {
                self = .text("")
            } else {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "a FileMaker field value must be text or a number")
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            switch self {
            case .text(let text): try c.encode(text)
            case .number(let number):
                if let whole = Int64(exactly: number) { try c.encode(whole) } else { try c.encode(number) }
            }
        }

        /// The value as FileMaker shows it: numbers without a trailing `.0`.
        public var description: String {
            switch self {
            case .text(let text): return text
            case .number(let number): return Int64(exactly: number).map(String.init) ?? String(number)
            }
        }

        public var text: String? {
            if case .text(let text) = self { return text }
            return nil
        }

        /// The number of a number value, or of text that reads as one.
        public var number: Double? {
            switch self {
            case .number(let number): return number
            case .text(let text): return Double(text.trimmingCharacters(in: .whitespaces))
            }
        }
    }

    /// One record of a found set, with the rows of the layout's portals.
    public struct Record: Codable, Hashable, Sendable {
        public var recordId: String
        public var modId: String
        public var fieldData: [String: FieldValue]
        /// Portal name → its rows (related records), as the server returned them: only the
        /// portals asked for, and only the rows of each portal's window.
        public var portalData: [String: [PortalRecord]]
        /// Per portal, how many related records there are and how many came; `nil` when the
        /// server sent none (older servers, layouts without portals).
        public var portalDataInfo: [PortalDataInfo]?

        public init(
            recordId: String, modId: String, fieldData: [String: FieldValue], portalData: [String: [PortalRecord]] = [:],
            portalDataInfo: [PortalDataInfo]? = nil
        ) {
            self.recordId = recordId
            self.modId = modId
            self.fieldData = fieldData
            self.portalData = portalData
            self.portalDataInfo = portalDataInfo
        }

        enum CodingKeys: String, CodingKey { case recordId, modId, fieldData, portalData, portalDataInfo }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            recordId = try c.decode(FileMakerID.self, forKey: .recordId).value
            modId = try c.decode(FileMakerID.self, forKey: .modId).value
            fieldData = try c.decodeIfPresent([String: FieldValue].self, forKey: .fieldData) ?? [:]
            portalData = try c.decodeIfPresent([String: [PortalRecord]].self, forKey: .portalData) ?? [:]
            portalDataInfo = try c.decodeIfPresent([PortalDataInfo].self, forKey: .portalDataInfo)
        }

        public subscript(field: String) -> FieldValue? { fieldData[field] }
    }

    /// One row of a portal: a related record. Its fields are named as the portal shows them,
    /// `Table::Field` (the related table occurrence's name first).
    public struct PortalRecord: Codable, Hashable, Sendable {
        public var recordId: String
        public var modId: String
        public var fieldData: [String: FieldValue]

        public init(recordId: String, modId: String, fieldData: [String: FieldValue]) {
            self.recordId = recordId
            self.modId = modId
            self.fieldData = fieldData
        }

        /// On the wire a row is flat: `{"recordId":"7","CheckIns::Bed":"Bed 3",…,"modId":"0"}`.
        private struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
            static let recordId = Key(stringValue: "recordId")
            static let modId = Key(stringValue: "modId")
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Key.self)
            recordId = try c.decode(FileMakerID.self, forKey: .recordId).value
            modId = try c.decode(FileMakerID.self, forKey: .modId).value
            var fields: [String: FieldValue] = [:]
            for key in c.allKeys where key.stringValue != "recordId" && key.stringValue != "modId" {
                fields[key.stringValue] = try c.decode(FieldValue.self, forKey: key)
            }
            fieldData = fields
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            try c.encode(recordId, forKey: .recordId)
            for (name, value) in fieldData { try c.encode(value, forKey: Key(stringValue: name)) }
            try c.encode(modId, forKey: .modId)
        }

        public subscript(field: String) -> FieldValue? { fieldData[field] }
    }

    /// A portal's counts in one record: `foundCount` related records, `returnedCount` of them
    /// in ``Record/portalData``.
    public struct PortalDataInfo: Codable, Hashable, Sendable {
        public var portalObjectName: String?
        public var database: String?
        public var table: String?
        public var foundCount: Int
        public var returnedCount: Int
    }

    /// A portal a read asks for, with the window of its rows (`offset` 1-based; the server's
    /// defaults when `nil`).
    public struct Portal: Hashable, Sendable {
        public var name: String
        public var offset: Int?
        public var limit: Int?

        public init(_ name: String, offset: Int? = nil, limit: Int? = nil) {
            self.name = name
            self.offset = offset
            self.limit = limit
        }
    }

    /// What a create or a duplicate returns.
    public struct RecordReference: Codable, Hashable, Sendable {
        public var recordId: String
        public var modId: String

        public init(recordId: String, modId: String) {
            self.recordId = recordId
            self.modId = modId
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Record.CodingKeys.self)
            recordId = try c.decode(FileMakerID.self, forKey: .recordId).value
            modId = try c.decode(FileMakerID.self, forKey: .modId).value
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Record.CodingKeys.self)
            try c.encode(recordId, forKey: .recordId)
            try c.encode(modId, forKey: .modId)
        }
    }

    /// A found set's counts. `table` and `totalRecordCount` are unknown for the empty set a
    /// find with no match gives (FileMaker answers it with error 401).
    public struct DataInfo: Codable, Hashable, Sendable {
        public var database: String
        public var layout: String
        public var table: String?
        public var totalRecordCount: Int?
        public var foundCount: Int
        public var returnedCount: Int
    }

    /// Records from a range, a find or a single-record read.
    public struct FoundSet: Codable, Hashable, Sendable {
        public var dataInfo: DataInfo
        public var data: [Record]

        public var isEmpty: Bool { data.isEmpty }

        /// The empty set: what a find that matches nothing returns.
        public static func empty(database: String, layout: String) -> FoundSet {
            FoundSet(
                dataInfo: DataInfo(database: database, layout: layout, table: nil, totalRecordCount: nil, foundCount: 0, returnedCount: 0),
                data: [])
        }
    }

    /// One find request: its criteria are AND'd; the requests of a find are OR'd, and an
    /// ``omit`` request removes its matches from what the requests before it found.
    ///
    /// A criterion is FileMaker find text; the ``Criterion`` helpers write the operators.
    public struct FindRequest: Hashable, Sendable, Encodable {
        /// Field name and criterion, in order.
        public var criteria: [Criterion]
        public var omit: Bool

        public struct Criterion: Hashable, Sendable {
            public var field: String
            public var text: String
            public init(_ field: String, _ text: String) {
                self.field = field
                self.text = text
            }
        }

        public init(_ criteria: [(String, String)], omit: Bool = false) {
            self.criteria = criteria.map { Criterion($0.0, $0.1) }
            self.omit = omit
        }

        /// A request matching records where every field meets its criterion.
        public static func matching(_ criteria: (String, String)...) -> FindRequest { FindRequest(criteria) }
        /// An omit request: removes records where every field meets its criterion.
        public static func omitting(_ criteria: (String, String)...) -> FindRequest { FindRequest(criteria, omit: true) }

        /// This request with one more criterion (AND).
        public func and(_ field: String, _ text: String) -> FindRequest {
            var copy = self
            copy.criteria.append(Criterion(field, text))
            return copy
        }

        private struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            for criterion in criteria { try c.encode(criterion.text, forKey: Key(stringValue: criterion.field)) }
            if omit { try c.encode("true", forKey: Key(stringValue: "omit")) }
        }
    }

    /// Find text with FileMaker's operators.
    public enum Find {
        /// `==value`: the whole field equals the value (no wildcards in it).
        public static func equals(_ value: String) -> String { "==\(value)" }
        /// `>value`, `>=value`.
        public static func greaterThan(_ value: String, orEqual: Bool = false) -> String { (orEqual ? ">=" : ">") + value }
        /// `<value`, `<=value`.
        public static func lessThan(_ value: String, orEqual: Bool = false) -> String { (orEqual ? "<=" : "<") + value }
        /// `low...high`, both ends included.
        public static func range(_ low: String, _ high: String) -> String { "\(low)...\(high)" }
        /// `*`: any non-empty value.
        public static let any = "*"
        /// `=`: an empty field.
        public static let empty = "="
        /// Characters that are find operators; a value meant literally must not contain them.
        public static let operatorCharacters: Set<Character> = ["*", "@", "#", "?", "!", "\"", "\\", "=", "<", ">", "~", "/"]
    }

    /// A sort of a range or a find.
    public struct SortField: Codable, Hashable, Sendable {
        public enum Order: String, Codable, Sendable {
            case ascend, descend
        }

        public var fieldName: String
        public var sortOrder: Order

        public init(_ fieldName: String, _ sortOrder: Order = .ascend) {
            self.fieldName = fieldName
            self.sortOrder = sortOrder
        }
    }

    /// What a script run returns. ``scriptError`` `"0"` is success; the caller decides what
    /// another value means.
    public struct ScriptResult: Codable, Hashable, Sendable {
        public var scriptResult: String?
        public var scriptError: String
        public var succeeded: Bool { scriptError == "0" }
    }

    /// `productInfo`.
    public struct ProductInfo: Codable, Hashable, Sendable {
        public var name: String
        public var version: String
        public var buildDate: String?
        public var dateFormat: String?
        public var timeFormat: String?
        public var timeStampFormat: String?
    }

    /// An entry of the layout list (folders included, as the server lists them).
    public struct LayoutInfo: Codable, Hashable, Sendable {
        public var name: String
        public var table: String?
        public var isFolder: Bool?
    }

    /// An entry of the script list.
    public struct ScriptInfo: Codable, Hashable, Sendable {
        public var name: String
        public var isFolder: Bool?
    }

    /// One field of a layout's metadata.
    public struct FieldMetadata: Codable, Hashable, Sendable {
        public var name: String
        public var type: String?
        public var displayType: String?
        /// The data type: `text`, `number`, `date`, `time`, `timeStamp`, `container`.
        public var result: String?
        public var global: Bool?
        public var autoEnter: Bool?
        public var numeric: Bool?
        public var maxRepeat: Int?
    }

    /// `GET …/layouts/{layout}`.
    public struct LayoutMetadata: Codable, Hashable, Sendable {
        public var fieldMetaData: [FieldMetadata]
        /// Portal name → the fields it shows (`Table::Field`).
        public var portalMetaData: [String: [FieldMetadata]]?
    }
}
