public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// RFC 3339 timestamps as the protocol writes them: UTC, milliseconds, `Z`
/// (`2026-11-22T21:04:00.000Z`). Parsing accepts any offset and 0–9 fraction digits.
public enum Timestamp {
    /// Formats milliseconds since the Unix epoch.
    public static func format(milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds.floorDiv(1000))
        let millis = Int(milliseconds - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        guard (0...9999).contains(year) else {
            return "\(year)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec))."
                + String(String(millis + 1000).dropFirst()) + "Z"
        }
        // `YYYY-MM-DDThh:mm:ss.sssZ`, written in place (the broker formats one per delivery).
        return String(unsafeUninitializedCapacity: 24) { out in
            func put(_ value: Int, at start: Int, width: Int) {
                var rest = value
                for index in stride(from: start + width - 1, through: start, by: -1) {
                    out[index] = UInt8(48 + rest % 10)
                    rest /= 10
                }
            }
            put(year, at: 0, width: 4)
            put(Int(parts.tm_mon) + 1, at: 5, width: 2)
            put(Int(parts.tm_mday), at: 8, width: 2)
            put(Int(parts.tm_hour), at: 11, width: 2)
            put(Int(parts.tm_min), at: 14, width: 2)
            put(Int(parts.tm_sec), at: 17, width: 2)
            put(millis, at: 20, width: 3)
            (out[4], out[7], out[10], out[13], out[16], out[19], out[23]) = (45, 45, 84, 58, 58, 46, 90)  // - - T : : . Z
            return 24
        }
    }

    private static func pad(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }

    public static func format(_ date: Date) -> String {
        format(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    public static func now() -> String { format(Date()) }

    /// Parses an RFC 3339 date-time; returns milliseconds since the epoch, or nil.
    public static func parse(_ text: String) -> Int64? {
        withUTF8Bytes(text) { parse(bytes: $0) }
    }

    static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard b.count >= 20 else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= b.count else { return nil }
            var value = 0
            for i in start..<(start + count) {
                guard b[i] >= 48 && b[i] <= 57 else { return nil }
                value = value * 10 + Int(b[i] - 48)
            }
            return value
        }
        guard let year = digits(0, 4), b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
            let hour = digits(11, 2), b[13] == UInt8(ascii: ":"), let minute = digits(14, 2),
            b[16] == UInt8(ascii: ":"), let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60,
            second < 61
        else { return nil }
        var index = 19
        var millis = 0
        if index < b.count && b[index] == UInt8(ascii: ".") {
            index += 1
            var count = 0
            while index < b.count && b[index] >= 48 && b[index] <= 57 {
                if count < 3 { millis = millis * 10 + Int(b[index] - 48) }
                count += 1
                index += 1
            }
            guard count >= 1 && count <= 9 else { return nil }
            // Digits past the third are read and dropped (truncation, never rounding up into the
            // next second). A range built from the count would trap for 4–9 digits.
            if count < 3 { millis *= count == 1 ? 100 : 10 }
        }
        guard index < b.count else { return nil }
        var offsetMinutes = 0
        if b[index] == UInt8(ascii: "Z") || b[index] == UInt8(ascii: "z") {
            index += 1
        } else if b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-") {
            let sign = b[index] == UInt8(ascii: "-") ? -1 : 1
            guard let oh = digits(index + 1, 2), index + 3 < b.count, b[index + 3] == UInt8(ascii: ":"),
                let om = digits(index + 4, 2), oh < 24, om < 60
            else { return nil }
            offsetMinutes = sign * (oh * 60 + om)
            index += 6
        } else {
            return nil
        }
        guard index == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + min(second, 59)) - Int64(offsetMinutes * 60)
        return seconds * 1000 + Int64(millis)
    }

    /// Parses a calendar date `YYYY-MM-DD`; returns days since 1970-01-01, or nil.
    public static func parseDate(_ text: String) -> Int? {
        let b = Array(text.utf8)
        guard b.count == 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-") else { return nil }
        guard let year = Int(text.prefix(4)), let month = Int(String(decoding: b[5..<7], as: UTF8.self)),
            let day = Int(String(decoding: b[8..<10], as: UTF8.self)),
            b.enumerated().allSatisfy({ $0.offset == 4 || $0.offset == 7 || ($0.element >= 48 && $0.element <= 57) })
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        return daysFromCivil(year: year, month: month, day: day)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

extension Int64 {
    fileprivate func floorDiv(_ divisor: Int64) -> Int64 {
        let q = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? q - 1 : q
    }
}
