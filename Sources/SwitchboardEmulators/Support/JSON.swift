import Foundation
import SwitchboardProtocol

/// A JSON value as the emulators build their answers: objects keep the order they were written
/// in, so a response reads like the vendor's (`response` before `messages`, a layout's fields in
/// layout order). Requests are parsed with the protocol's strict parser and converted.
enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): return Double(a) == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// Parses a request body; nil when it is not valid JSON.
    static func parse(_ data: Data) -> JSON? {
        JSONValue.parse(data).map(JSON.init)
    }

    init(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .integer(let i): self = .int(i)
        case .double(let d): self = .double(d)
        case .string(let s): self = .string(s)
        case .array(let a): self = .array(a.map(JSON.init))
        case .object(let o): self = .object(o.sorted { $0.key < $1.key }.map { ($0.key, JSON($0.value)) })
        }
    }

    subscript(key: String) -> JSON? {
        if case .object(let pairs) = self { return pairs.first { $0.0 == key }?.1 }
        return nil
    }

    var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    var members: [(String, JSON)]? {
        if case .object(let pairs) = self { return pairs }
        return nil
    }

    var elements: [JSON]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// An integer from a number or a string of digits (vendors accept both in places).
    var integer: Int? {
        switch self {
        case .int(let i): return Int(exactly: i)
        case .double(let d): return d.rounded() == d ? Int(exactly: d) : nil
        case .string(let s): return Int(s.trimmingCharacters(in: .whitespaces))
        default: return nil
        }
    }

    /// The value as FileMaker would show it in a text context.
    var text: String? {
        switch self {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .double(let d): return JSON.format(d)
        case .bool(let b): return b ? "1" : "0"
        default: return nil
        }
    }

    static func format(_ d: Double) -> String {
        if d.rounded() == d, abs(d) < 1e15 { return String(Int64(d)) }
        return String(d)
    }

    /// Compact UTF-8 serialisation.
    var data: Data {
        var out = [UInt8]()
        out.reserveCapacity(256)
        write(into: &out)
        return Data(out)
    }

    func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            out.append(contentsOf: (d.isFinite ? JSON.format(d) : "null").utf8)
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let pairs):
            out.append(UInt8(ascii: "{"))
            for (index, (key, value)) in pairs.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(Int64(value)) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(arrayLiteral elements: JSON...) { self = .array(elements) }
    init(dictionaryLiteral elements: (String, JSON)...) { self = .object(elements) }
}

extension JSON {
    static func number(_ i: Int) -> JSON { .int(Int64(i)) }
    static func optional(_ s: String?) -> JSON { s.map(JSON.string) ?? .null }
}

/// WCF JSON dates (`/Date(1571411927090)/`), as ETO and SAP write them.
enum WCFDate {
    static func format(_ date: Date) -> String {
        "/Date(\(Int64((date.timeIntervalSince1970 * 1000).rounded())))/"
    }

    static func format(milliseconds: Int64) -> String { "/Date(\(milliseconds))/" }

    /// Milliseconds since 1970 from `/Date(ms)/` or `/Date(ms±hhmm)/`; nil if malformed.
    static func parse(_ text: String) -> Int64? {
        guard text.hasPrefix("/Date("), text.hasSuffix(")/") else { return nil }
        var inner = text.dropFirst(6).dropLast(2)
        if let sign = inner.dropFirst().lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = inner[inner.index(after: sign)...]
            guard zone.count == 4, zone.allSatisfy(\.isNumber) else { return nil }
            inner = inner[..<sign]
        }
        return Int64(inner)
    }
}
