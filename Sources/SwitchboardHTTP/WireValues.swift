// Values whose wire form the back ends chose oddly: WCF's `/Date(ms±zzzz)/` dates (ETO, SAP)
// and FileMaker's record ids sent as strings.

public import Foundation

/// A WCF JSON date: `"/Date(1571411927090)/"` or `"/Date(1571411927090-0500)/"`.
///
/// The milliseconds count from the Unix epoch in UTC (negative before 1970); the optional
/// `±hhmm` is the sender's offset from UTC, kept for information, and does not change the
/// instant. Decodes also when the slashes arrive escaped (`\/Date(…)\/`) after JSON decoding,
/// as some servers double-escape them. Encodes as `/Date(ms)/` (the form ETO's samples send),
/// which JSONEncoder writes as `"\/Date(ms)\/"`.
public struct WCFDate: Codable, Hashable, Sendable, CustomStringConvertible {
    public var date: Date
    /// The sender's offset from UTC in minutes, when it sent one.
    public var offsetMinutes: Int?

    public init(_ date: Date, offsetMinutes: Int? = nil) {
        self.date = date
        self.offsetMinutes = offsetMinutes
    }

    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var milliseconds: Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// The wire text, `/Date(ms)/`.
    public var description: String { "/Date(\(milliseconds))/" }

    /// Parses the wire text; `nil` when it is not a WCF date.
    public init?(wire text: String) {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        for prefix in ["\\/Date(", "/Date("] where rest.hasPrefix(prefix) {
            rest = rest.dropFirst(prefix.count)
            break
        }
        guard text.contains("Date("), rest.first != nil, !rest.hasPrefix("/"), !rest.hasPrefix("\\") else { return nil }
        guard rest.hasSuffix(")/") || rest.hasSuffix(")\\/") else { return nil }
        rest = rest.hasSuffix(")\\/") ? rest.dropLast(3) : rest.dropLast(2)
        // rest is now `ms` or `ms±hhmm`; ms itself may start with '-'.
        var millisText = rest
        var offset: Int?
        if let signIndex = rest.dropFirst().lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = rest[rest.index(after: signIndex)...]
            guard zone.count == 4, zone.allSatisfy(\.isASCIIDigit), let hhmm = Int(zone) else { return nil }
            let minutes = (hhmm / 100) * 60 + hhmm % 100
            offset = rest[signIndex] == "-" ? -minutes : minutes
            millisText = rest[..<signIndex]
        }
        let digits = millisText.hasPrefix("-") ? millisText.dropFirst() : millisText
        guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigit), let millis = Int64(millisText) else { return nil }
        self.init(Date(timeIntervalSince1970: Double(millis) / 1000), offsetMinutes: offset)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = WCFDate(wire: text) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "expected a WCF date such as /Date(1571411927090-0500)/, got \(text.count) characters not in that form")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// A FileMaker `recordId` or `modId`: a string on the wire (`"32"`), accepted as a number too.
/// Encodes as a string.
public struct FileMakerID: Codable, Hashable, Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, CustomStringConvertible {
    public var value: String

    public init(_ value: String) { self.value = value }
    public init(stringLiteral value: String) { self.value = value }
    public init(integerLiteral value: Int) { self.value = String(value) }

    public var description: String { value }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            value = text
        } else if let number = try? container.decode(Int64.self) {
            value = String(number)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected a FileMaker id as a string or an integer")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
