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
    public static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, frame: String, code: ProtocolError.Code
    ) throws(ProtocolError) -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
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
