// The FileMaker writer's reading of `eto.participant.created/1` (published by switchboard-eto,
// protocol section 16.2; its JSON Schema is `protocol/schemas/eto.participant.created.v1.json`).
// Only a `worker:eto` principal may publish `eto.*` (section 13.3), so the fact is believed by
// who sent it; what this decoder checks is its shape, with errors naming the field, never its
// value (names and dates of birth are personal data).

public import Foundation
public import SwitchboardProtocol

extension FileMakerWriter {
    /// The content of `eto.participant.created/1`: ETO created (or found) a walk-in's participant.
    public struct ParticipantCreated: Decodable, Sendable, Hashable {
        public static let type = "eto.participant.created"
        public static let schema = "eto.participant.created/1"

        /// The check-in's event id.
        public var eventID: String
        public var participantID: Int64
        public var siteID: Int64
        public var programID: Int64
        public var firstName: String
        public var lastName: String
        /// `YYYY-MM-DD`.
        public var dateOfBirth: String
        /// `female`, `male` or `unknown`.
        public var gender: String?
        /// Whether ETO's participant was created for this walk-in (false: one with that name and
        /// date of birth was there already).
        public var created: Bool

        enum CodingKeys: String, CodingKey {
            case eventID = "event_id", participantID = "participant_id", siteID = "site_id", programID = "program_id",
                firstName = "first_name", lastName = "last_name", dateOfBirth = "date_of_birth", gender, created
        }

        public init(
            eventID: String, participantID: Int64, siteID: Int64, programID: Int64, firstName: String, lastName: String,
            dateOfBirth: String, gender: String? = nil, created: Bool
        ) {
            self.eventID = eventID
            self.participantID = participantID
            self.siteID = siteID
            self.programID = programID
            self.firstName = firstName
            self.lastName = lastName
            self.dateOfBirth = dateOfBirth
            self.gender = gender
            self.created = created
        }

        /// Decodes and checks the content; the error names the field and the rule, never a value.
        public static func decode(_ content: Data) throws(ProtocolError) -> ParticipantCreated {
            let value: ParticipantCreated
            do {
                value = try JSONDecoder().decode(ParticipantCreated.self, from: content)
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
