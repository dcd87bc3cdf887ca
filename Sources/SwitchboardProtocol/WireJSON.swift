public import Foundation

/// JSON as the protocol writes and reads it: snake_case keys spelled out in each type's
/// `CodingKeys`, sorted keys (stable bytes for tests and vectors), dates as RFC 3339 strings.
public enum WireJSON {
    public static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    /// Decodes `T`; a failure becomes a `ProtocolError` naming the frame and the field.
    ///
    /// The frame goes through the protocol's own parser first, so the JSON rules of section 2
    /// hold here as on the EVENT path: of a repeated key the last value wins (Foundation's
    /// `JSONDecoder` keeps the first), and a number beyond ±1.8e308 is the frame's error naming
    /// the field (`JSONDecoder` calls the whole frame invalid JSON).
    public static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, frame: String, code: ProtocolError.Code
    ) throws(ProtocolError) -> T {
        guard let (value, notes) = JSONValue.parse(data, keepingHugeNumbers: true) else {
            throw ProtocolError(.invalidJSON, "\(frame) frame is not valid JSON")
        }
        if notes.hugeNumbers, case .object(let fields) = value {
            try WireObject.refuseHugeNumbers(fields, frame: frame, code: code)
        }
        // Rewritten only when a key repeats: what `JSONWriter` writes holds each key once, with
        // its last value. The common frame is decoded as it came.
        let input = notes.duplicateKeys ? value.compactData : data
        do {
            return try JSONDecoder().decode(type, from: input)
        } catch let error as DecodingError {
            throw describe(error, frame: frame, code: code)
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError(code, "\(frame): \(error)")
        }
    }

    static func describe(_ error: DecodingError, frame: String, code: ProtocolError.Code) -> ProtocolError {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
                .replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let full = path(context.codingPath + [key])
            return ProtocolError(code, "\(frame): field '\(full)' is required")
        case .typeMismatch(let type, let context):
            let at = path(context.codingPath)
            if at.isEmpty { return ProtocolError(.invalidJSON, "\(frame) frame must be a JSON object") }
            return ProtocolError(code, "\(frame): field '\(at)' must be \(describeType(type))")
        case .valueNotFound(let type, let context):
            return ProtocolError(code, "\(frame): field '\(path(context.codingPath))' must be \(describeType(type)), not null")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return ProtocolError(.invalidJSON, "\(frame) frame is not valid JSON")
            }
            return ProtocolError(code, "\(frame): field '\(path(context.codingPath))': \(context.debugDescription)")
        @unknown default:
            return ProtocolError(code, "\(frame): \(error)")
        }
    }

    private static func describeType(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type, is UInt64.Type: "an integer"
        case is Double.Type: "a number"
        case is Bool.Type: "true or false"
        default: "of type \(type)"
        }
    }
}

/// Content a worker publishes often enough to write without a JSONEncoder: `wireJSON()` gives
/// the bytes `WireJSON.encode` would (sorted keys, nil optionals left out).
public protocol WireJSONWritable: Encodable {
    func wireJSON() -> Data
}
