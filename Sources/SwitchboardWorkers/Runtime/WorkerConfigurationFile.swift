// The JSON files workers read at start (the FileMaker mapping, the TouchPoint configuration):
// read, decoded and described the same way, so every mistake names the flag, the file and the
// field, and `--help` shows the defaults in the form a file takes.

import Foundation

public enum WorkerConfigurationFile {
    /// Reads `path` as a `T`; errors name `flag`, the file and the field.
    public static func load<T: Decodable>(_ type: T.Type, path: String, flag: String, what: String) throws(WorkerConfigurationError) -> T {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw WorkerConfigurationError("\(flag): cannot read \(path): \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw WorkerConfigurationError("\(flag): \(path) is not a valid \(what): \(describe(error))")
        } catch {
            throw WorkerConfigurationError("\(flag): \(path) is not a valid \(what): \(error)")
        }
    }

    /// `value` as pretty JSON with sorted keys, for `--help`.
    public static func example(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(value)) ?? Data(), as: UTF8.self)
    }

    /// A decoding error in one line, naming the field by its path.
    public static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let at = path(context)
            return "field '\(at.isEmpty ? "" : at + ".")\(key.stringValue)' is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "field '\(path(context))' has the wrong type (\(context.debugDescription))"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? "not JSON (\(context.debugDescription))" : "field '\(path(context))': \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
