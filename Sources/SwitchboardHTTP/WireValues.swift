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

    /// The milliseconds read accepts either side of 1970: JavaScript's date range (100 million
    /// days), beyond .NET's years 1–9999 that WCF sends. Further out a `Date` is too coarse for
    /// milliseconds, and their count would not fit `Int64` on the way back.
    public static let millisecondsRange: ClosedRange<Int64> = -8_640_000_000_000_000...8_640_000_000_000_000

    /// Milliseconds since 1970-01-01T00:00:00Z (clamped to ``millisecondsRange`` for a date made
    /// from a `Date` beyond it).
    public var milliseconds: Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard value.isFinite else { return 0 }
        let range = Self.millisecondsRange
        return Int64(min(max(value, Double(range.lowerBound)), Double(range.upperBound)))
    }

    /// The wire text, `/Date(ms)/`.
    public var description: String { "/Date(\(milliseconds))/" }

    /// Parses the wire text; `nil` when it is not a WCF date, or its milliseconds lie beyond
    /// ``millisecondsRange``. Surrounding spaces and tabs are ignored (other Unicode spaces too).
    public init?(wire text: String) {
        var text = text
        if !text.utf8.allSatisfy({ $0 < 0x80 }) {
            text = text.trimmingCharacters(in: .whitespaces)
        }
        // ETO sends one or two of these per participant and response: read the bytes, not
        // Characters (a search of a common last name decodes hundreds).
        guard let (milliseconds, offset) = text.withUTF8({ Self.parse(UnsafeRawBufferPointer($0)) }) else { return nil }
        self.init(Date(timeIntervalSince1970: Double(milliseconds) / 1000), offsetMinutes: offset)
    }

    /// `/Date(ms)/` or `/Date(ms±hhmm)/` (the slashes possibly escaped, `\/`) between ASCII spaces
    /// and tabs: the milliseconds (which may be negative) and the offset in minutes.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> (Int64, Int?)? {
        let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
        var low = bytes.startIndex
        var high = bytes.endIndex
        while low < high, bytes[low] == space || bytes[low] == tab { low += 1 }
        while high > low, bytes[high - 1] == space || bytes[high - 1] == tab { high -= 1 }
        func has(_ literal: StaticString, at index: Int) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard index >= low, high - index >= count else { return false }
            for k in 0..<count where bytes[index + k] != literal.utf8Start[k] { return false }
            return true
        }
        if has("\\/Date(", at: low) {
            low += 7
        } else if has("/Date(", at: low) {
            low += 6
        } else {
            return nil
        }
        if has(")\\/", at: high - 3) {
            high -= 3
        } else if has(")/", at: high - 2) {
            high -= 2
        } else {
            return nil
        }
        // [low, high) is `ms` or `ms±hhmm`; ms itself may start with '-'.
        var end = high
        var offset: Int?
        if let sign = (low + 1..<max(low + 1, high)).last(where: { bytes[$0] == UInt8(ascii: "+") || bytes[$0] == UInt8(ascii: "-") }) {
            guard high - sign == 5 else { return nil }
            var hhmm = 0
            for index in sign + 1..<high {
                guard let digit = Self.digit(bytes[index]) else { return nil }
                hhmm = hhmm * 10 + digit
            }
            let minutes = (hhmm / 100) * 60 + hhmm % 100
            offset = bytes[sign] == UInt8(ascii: "-") ? -minutes : minutes
            end = sign
        }
        let negative = low < end && bytes[low] == UInt8(ascii: "-")
        let digits = negative ? low + 1 : low
        guard digits < end else { return nil }
        var milliseconds: Int64 = 0
        for index in digits..<end {
            guard let digit = Self.digit(bytes[index]) else { return nil }
            let (times, overflowed) = milliseconds.multipliedReportingOverflow(by: 10)
            let (next, overflowedToo) =
                negative ? times.subtractingReportingOverflow(Int64(digit)) : times.addingReportingOverflow(Int64(digit))
            guard !overflowed, !overflowedToo else { return nil }
            milliseconds = next
        }
        guard millisecondsRange.contains(milliseconds) else { return nil }
        return (milliseconds, offset)
    }

    static func digit(_ byte: UInt8) -> Int? {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? Int(byte - UInt8(ascii: "0")) : nil
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
