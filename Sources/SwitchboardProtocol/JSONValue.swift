public import Foundation

/// A parsed JSON value (RFC 8259), from the protocol's own parser.
///
/// Why our own parser: the broker parses four JSON frames of every event on its hot path, and
/// Foundation's `JSONSerialization`/`JSONDecoder` cost 10–20 µs each there (measured with
/// `switchboard-bench --codec`), which alone would cap durable ingest near 14k events/s. This
/// parser is strict (no comments, no trailing commas, valid UTF-8 only, depth ≤ 64) and does
/// one pass over the bytes.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses one JSON text; `nil` if it is not valid JSON or holds a number no `Double` can
    /// hold (beyond ±1.8e308). Of keys repeated in an object, the last wins (section 2).
    public static func parse(_ data: Data) -> JSONValue? {
        guard let parsed = parse(data, keepingHugeNumbers: false) else { return nil }
        return parsed.value
    }

    /// What `parse(_:keepingHugeNumbers:)` noticed on the way.
    public struct Notes: Sendable, Hashable {
        /// An object repeated a key (the last value was kept).
        public var duplicateKeys = false
        /// A number beyond ±1.8e308 was kept as ±infinity.
        public var hugeNumbers = false
    }

    /// Parses one JSON text, noting repeated keys; `nil` if it is not valid JSON.
    ///
    /// With `keepingHugeNumbers`, a number too large for a `Double` (`1e400`, or an integer of
    /// 400 digits) is valid JSON and becomes `.double(±infinity)` instead of failing the parse.
    /// RFC 8259 leaves number range to implementations, and the protocol refuses such a number
    /// in a header as `invalid-header` naming the field (section 2), which needs the parse to get
    /// that far. Only the header frame opts in; other frames refuse it as invalid JSON, so no
    /// consumer downstream ever receives one (Foundation's `JSONDecoder` rejects the whole
    /// document). Never written back: `JSONWriter` writes ±infinity as `±1e999`.
    public static func parse(_ data: Data, keepingHugeNumbers: Bool) -> (value: JSONValue, notes: Notes)? {
        data.withUnsafeBytes { raw -> (JSONValue, Notes)? in
            var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self), keepingHugeNumbers: keepingHugeNumbers)
            guard let value = parser.value(depth: 0) else { return nil }
            parser.skipWhitespace()
            return parser.index == parser.bytes.count ? (value, parser.notes) : nil
        }
    }

    /// The first field (in sorted key order, depth first) holding a number beyond ±1.8e308, as
    /// `a.b[2]`; nil if there is none.
    public var hugeNumberPath: String? {
        switch self {
        case .double(let number) where !number.isFinite: return ""
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let path = item.hugeNumberPath { return "[\(index)]" + (path.hasPrefix("[") || path.isEmpty ? path : ".\(path)") }
            }
            return nil
        case .object(let fields):
            for key in fields.keys.sorted() {
                if let path = fields[key]!.hugeNumberPath { return key + (path.hasPrefix("[") || path.isEmpty ? path : ".\(path)") }
            }
            return nil
        default: return nil
        }
    }

    /// Whether `data` is one JSON text `parse(_:)` accepts, and an object, without building
    /// its value: the same grammar and the same refusals, for a frame that is checked and never
    /// read. nil: not valid JSON; false: valid, but not an object.
    public static func isObject(_ data: Data) -> Bool? {
        data.withUnsafeBytes { raw -> Bool? in
            var parser = JSONParser(bytes: raw.bindMemory(to: UInt8.self), keepingHugeNumbers: false)
            parser.building = false
            parser.skipWhitespace()
            let object = parser.index < parser.bytes.count && parser.bytes[parser.index] == UInt8(ascii: "{")
            guard parser.value(depth: 0) != nil else { return nil }
            parser.skipWhitespace()
            return parser.index == parser.bytes.count ? object : nil
        }
    }

    public var object: [String: JSONValue]? {
        if case .object(let object) = self { return object }
        return nil
    }
}

struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let keepingHugeNumbers: Bool
    var index = 0
    var notes = JSONValue.Notes()
    /// False: the text is checked as when building (the same grammar, the same refusals), but
    /// no value is made: objects and arrays come back empty, strings empty, and repeated keys
    /// go unnoted.
    var building = true

    init(bytes: UnsafeBufferPointer<UInt8>, keepingHugeNumbers: Bool) {
        self.bytes = bytes
        self.keepingHugeNumbers = keepingHugeNumbers
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func value(depth: Int) -> JSONValue? {
        guard depth < 64 else { return nil }
        skipWhitespace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        default: return number()
        }
    }

    mutating func literal(_ word: StaticString, _ value: JSONValue) -> JSONValue? {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return nil }
        for i in 0..<count where bytes[index + i] != word.utf8Start[i] { return nil }
        index += count
        return value
    }

    mutating func object(depth: Int) -> JSONValue? {
        index += 1
        var object: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            guard let value = value(depth: depth + 1) else { return nil }
            if building, object.updateValue(value, forKey: key) != nil { notes.duplicateKeys = true }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(object)
            } else {
                return nil
            }
        }
    }

    mutating func array(depth: Int) -> JSONValue? {
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(array)
        }
        while true {
            guard let value = value(depth: depth + 1) else { return nil }
            if building { array.append(value) }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(array)
            } else {
                return nil
            }
        }
    }

    mutating func string() -> String? {
        index += 1
        let start = index
        // Fast path: no escapes; pure ASCII needs no UTF-8 validation.
        var ascii = true
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if ascii { return building ? String(decoding: slice, as: UTF8.self) : "" }
                return String(validating: slice, as: UTF8.self).map { building ? $0 : "" }
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { return nil }
            if c >= 0x80 { ascii = false }
            index += 1
        }
        guard index < bytes.count else { return nil }
        var buffer = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                index += 1
                return String(validating: buffer, as: UTF8.self)
            }
            if c < 0x20 { return nil }
            if c != UInt8(ascii: "\\") {
                buffer.append(c)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { return nil }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): buffer.append(0x22)
            case UInt8(ascii: "\\"): buffer.append(0x5C)
            case UInt8(ascii: "/"): buffer.append(0x2F)
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "u"):
                guard var scalar = hex4() else { return nil }
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        return nil
                    }
                    index += 2
                    guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    return nil
                }
                guard let unicode = Unicode.Scalar(scalar) else { return nil }
                buffer.append(contentsOf: Array(String(Character(unicode)).utf8))
            default: return nil
            }
        }
        return nil
    }

    mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case 48...57: digit = UInt32(c - 48)
            case 65...70: digit = UInt32(c - 55)
            case 97...102: digit = UInt32(c - 87)
            default: return nil
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func number() -> JSONValue? {
        let start = index
        var negative = false
        if index < bytes.count && bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard index < bytes.count else { return nil }
        // Accumulate the integer part as a negative number: Int64.min has no positive twin.
        var accumulated: Int64 = 0
        var overflow = false
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if (49...57).contains(bytes[index]) {
            while index < bytes.count && (48...57).contains(bytes[index]) {
                let (times, o1) = accumulated.multipliedReportingOverflow(by: 10)
                let (next, o2) = times.subtractingReportingOverflow(Int64(bytes[index] - 48))
                overflow = overflow || o1 || o2
                accumulated = next
                index += 1
            }
        } else {
            return nil
        }
        var integral = true
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            let digits = index
            while index < bytes.count && (48...57).contains(bytes[index]) { index += 1 }
            guard index > digits else { return nil }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            integral = false
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
            let digits = index
            while index < bytes.count && (48...57).contains(bytes[index]) { index += 1 }
            guard index > digits else { return nil }
        }
        if integral && !overflow {
            if negative { return .integer(accumulated) }
            if accumulated != Int64.min { return .integer(-accumulated) }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text) else { return nil }
        if !value.isFinite {
            guard keepingHugeNumbers else { return nil }
            notes.hugeNumbers = true
        }
        return .double(value)
    }
}

/// Writes compact JSON with sorted keys, for the broker's hot path.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public var data: Data { Data(bytes) }

    public mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for c in value.utf8 {
            switch c {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            // JSON's other short escapes, as JSONEncoder writes them: the same bytes either way.
            case 0x08: bytes.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 0xF)]])
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func integer(_ value: Int64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// Writes any value; object keys sorted, so equal values give equal bytes.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: raw("null")
        case .bool(let flag): bool(flag)
        case .integer(let number): integer(number)
        // Only a header parsed with `keepingHugeNumbers` holds an infinity; `1e999` is valid
        // JSON that parses back to the same value.
        case .double(let number) where !number.isFinite: raw(number < 0 ? "-1e999" : "1e999")
        case .double(let number): bytes.append(contentsOf: "\(number)".utf8)
        case .string(let text): string(text)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                self.value(item)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let fields):
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in fields.keys.sorted().enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                string(key)
                bytes.append(UInt8(ascii: ":"))
                self.value(fields[key]!)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Writes `"key":`, after a comma unless it is the first key of the object just opened
    /// (the key must need no escaping: our field names). A key follows either the `{` that
    /// opens its object or a value, and no value ends in `{`, so the last byte tells which.
    public mutating func key(_ name: StaticString) {
        if let last = bytes.last, last != UInt8(ascii: "{") { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        raw(name)
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }
}
