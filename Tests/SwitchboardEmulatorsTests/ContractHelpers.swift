import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SwitchboardProtocol
import Testing

/// Strict JSON reading for the contract tests: `JSONValue` keeps JSON's own types, so a test can
/// tell a number from a string of digits and a Bool from 0/1 (Foundation's `JSONSerialization`
/// cannot, on Linux).
extension Wire.Answer {
    var value: JSONValue {
        get throws {
            guard let value = JSONValue.parse(body) else { throw Wire.Mismatch("body is not JSON: \(text)") }
            return value
        }
    }

    /// The media type of the body, lower-cased, without parameters.
    var mediaType: String? {
        header("Content-Type").map {
            $0.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        }
    }
}

extension JSONValue {
    subscript(key: String) -> JSONValue? { object?[key] }

    subscript(index: Int) -> JSONValue? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }

    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    var integerValue: Int64? {
        if case .integer(let number) = self { return number }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let flag) = self { return flag }
        return nil
    }

    var arrayValue: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    var isNull: Bool { self == .null }

    /// The member names of an object; empty for anything else.
    var keySet: Set<String> { Set(object?.keys.map { $0 } ?? []) }
}

enum WireFormat {
    static let zeroGUID = "00000000-0000-0000-0000-000000000000"

    /// A GUID written the way ETO and SAP write them: 8-4-4-4-12 hexadecimal digits.
    static func isGUID(_ text: String?) -> Bool {
        guard let text else { return false }
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        guard groups.map(\.count) == [8, 4, 4, 4, 12] else { return false }
        return groups.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }

    /// The milliseconds of a WCF JSON date `/Date(ms)/` or `/Date(ms±hhmm)/`; nil for anything else.
    static func wcfMilliseconds(_ text: String?) -> Int64? {
        guard let text, text.hasPrefix("/Date("), text.hasSuffix(")/") else { return nil }
        var inner = Substring(text.dropFirst(6).dropLast(2))
        if let sign = inner.dropFirst().lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = inner[inner.index(after: sign)...]
            guard zone.count == 4, zone.allSatisfy(\.isNumber) else { return nil }
            inner = inner[..<sign]
        }
        return Int64(inner)
    }

    /// Percent-encodes everything but RFC 3986's unreserved ASCII characters, as a careful client
    /// encodes a query value (so `+`, `&`, `#`, spaces and non-ASCII all travel escaped).
    static func queryEncoded(_ text: String) -> String {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}

extension Wire {
    /// The request log exactly as the control API serves it, as text, for searching.
    func requestLogText(api: String? = nil) async throws -> String {
        let answer = try await call(.GET, "/_emulator/requests" + (api.map { "?api=\($0)" } ?? ""))
        #expect(answer.status == 200)
        return answer.text
    }

    /// The emulator's clock (wall clock plus the test's offset), in milliseconds since 1970.
    func emulatorNowMilliseconds() async throws -> Int64 {
        let answer = try await call(.GET, "/_emulator/clock")
        guard let text = try answer.value["now"]?.stringValue, let date = ISO8601DateFormatter().date(from: text) else {
            throw Mismatch("no clock: \(answer.text)")
        }
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}

/// Asserts that none of `secrets` (nor its percent-encoded form) appears in `text`.
func expectNoSecrets(_ secrets: [String], in text: String, sourceLocation: SourceLocation = #_sourceLocation) {
    for secret in secrets where !secret.isEmpty {
        #expect(!text.contains(secret), "request log contains a secret", sourceLocation: sourceLocation)
        let encoded = WireFormat.queryEncoded(secret)
        if encoded != secret {
            #expect(!text.contains(encoded), "request log contains a percent-encoded secret", sourceLocation: sourceLocation)
        }
    }
}
