import Foundation
import SwitchboardProtocol

extension CheckIn {
    /// A check-in's content as the workers read it: by the protocol's own reader (the one the
    /// broker checked it with at ingest, without a JSONDecoder); content it refuses is read
    /// again by the Codable reader, whose error names what is wrong.
    static func read(_ content: Data) -> Result<CheckIn, any Error> {
        if let value = JSONValue.parse(content), let checkIn = try? CheckIn(wire: value) { return .success(checkIn) }
        return Result { try JSONDecoder().decode(CheckIn.self, from: content) }
    }
}
