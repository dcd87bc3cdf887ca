// The FileMaker writer's reading of `eto.participant.created/1` (published by switchboard-eto,
// protocol section 16.2; its JSON Schema is `protocol/schemas/eto.participant.created.v1.json`).
// Only a `worker:eto` principal may publish `eto.*` (section 13.3), so the fact is believed by
// who sent it; what this decoder checks is its shape, with errors naming the field, never its
// value (names and dates of birth are personal data).

public import Foundation
public import SwitchboardProtocol

extension FileMakerWriter {
    /// What the writer reads: the event switchboard-eto publishes, one type for both.
    public typealias ParticipantCreated = ETOParticipantCreated
}

extension ETOParticipantCreated {
    /// Decodes and checks the content; the error names the field and the rule, never a value.
    public static func decode(_ content: Data) throws(ProtocolError) -> ETOParticipantCreated {
        let value: ETOParticipantCreated
        do {
            value = try JSONDecoder().decode(ETOParticipantCreated.self, from: content)
        } catch {
            throw ProtocolError(.schemaViolation, "content: \(WorkerConfigurationFile.describe(error))")
        }
        try value.validate()
        return value
    }

    /// The rules of the schema that decoding does not check.
    public func validate() throws(ProtocolError) {
        func fail(_ field: String, _ rule: String) -> ProtocolError {
            ProtocolError(.schemaViolation, "content: field '\(field)' \(rule)")
        }
        guard UUIDv7.isValid(eventID) else { throw fail("event_id", "must be an event id (UUIDv7, lower case)") }
        guard participantID >= 1 else { throw fail("participant_id", "must be a positive integer") }
        guard siteID >= 1 else { throw fail("site_id", "must be a positive integer") }
        guard programID >= 1 else { throw fail("program_id", "must be a positive integer") }
        for (field, name) in [("first_name", firstName), ("last_name", lastName)] {
            guard !name.allSatisfy(\.isWhitespace) else { throw fail(field, "must not be blank") }
            guard name.unicodeScalars.count <= CheckIn.maximumNameLength else {
                throw fail(field, "must be at most \(CheckIn.maximumNameLength) characters")
            }
            guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
                throw fail(field, "must not contain control characters")
            }
        }
        guard Timestamp.parseDate(dateOfBirth) != nil else { throw fail("date_of_birth", "must be a date YYYY-MM-DD") }
        if let gender, !CheckIn.Participant.genders.contains(gender) {
            throw fail("gender", "must be one of female, male, unknown")
        }
    }

    /// The words a settlement's message must not hold (names, date of birth).
    var personalWords: [String] {
        var words = [firstName, lastName, dateOfBirth].map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let parts = dateOfBirth.split(separator: "-")
        if parts.count == 3 { words.append("\(parts[1])/\(parts[2])/\(parts[0])") }
        return words.filter { !$0.isEmpty }
    }
}

extension Settlement {
    /// This settlement with each of `words` replaced by ``personalPlaceholder`` in its message.
    func removing(_ words: [String]) -> Settlement {
        guard !words.isEmpty else { return self }
        switch self {
        case .done: return .done
        case .retry(let delay, let code, let message): return .retry(after: delay, code: code, message: Self.removing(words, from: message))
        case .deadLetter(let code, let message): return .deadLetter(code: code, message: Self.removing(words, from: message))
        }
    }
}
