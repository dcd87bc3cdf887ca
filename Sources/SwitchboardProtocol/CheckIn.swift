public import Foundation

/// The content of a `checkin.recorded` event (schema `checkin.recorded/1`,
/// `protocol/schemas/checkin.recorded.v1.json`): a person checked in at a site's program.
public struct CheckIn: Codable, Sendable, Hashable {
    public static let type = "checkin.recorded"
    public static let schema = "checkin.recorded/1"

    /// Who checked in: by ETO participant id, or by name (date of birth strongly advised: names
    /// alone match people poorly downstream), or both.
    public struct Participant: Codable, Sendable, Hashable {
        public var etoParticipantID: Int64?
        public var firstName: String?
        public var lastName: String?
        /// `YYYY-MM-DD`.
        public var dateOfBirth: String?
        /// A walk-in: a person entered at the desk who is not (known to be) in ETO yet. Requires
        /// first name, last name and date of birth, and no ETO id; `switchboard-eto` creates the
        /// participant unless one with exactly that name and date of birth exists (section 16.2).
        public var isNew: Bool?
        /// `female`, `male` or `unknown` (ETO's three values), for a walk-in's record.
        public var gender: String?

        enum CodingKeys: String, CodingKey {
            case etoParticipantID = "eto_participant_id", firstName = "first_name", lastName = "last_name",
                dateOfBirth = "date_of_birth", isNew = "new", gender
        }

        public static let genders: Set<String> = ["female", "male", "unknown"]

        public init(
            etoParticipantID: Int64? = nil, firstName: String? = nil, lastName: String? = nil, dateOfBirth: String? = nil,
            isNew: Bool? = nil, gender: String? = nil
        ) {
            self.etoParticipantID = etoParticipantID
            self.firstName = firstName
            self.lastName = lastName
            self.dateOfBirth = dateOfBirth
            self.isNew = isNew
            self.gender = gender
        }

        /// Whether this is a walk-in (`new: true`).
        public var isWalkIn: Bool { isNew == true }
    }

    /// Where a street-outreach check-in happened.
    public struct Location: Codable, Sendable, Hashable {
        public var latitude: Double
        public var longitude: Double
        /// Radius of the 68% confidence circle, in metres.
        public var accuracyMeters: Double

        enum CodingKeys: String, CodingKey {
            case latitude, longitude, accuracyMeters = "accuracy_m"
        }

        public init(latitude: Double, longitude: Double, accuracyMeters: Double) {
            self.latitude = latitude
            self.longitude = longitude
            self.accuracyMeters = accuracyMeters
        }
    }

    public var participant: Participant
    /// ETO site id.
    public var siteID: Int64
    /// ETO program id.
    public var programID: Int64
    /// The kiosk or device that recorded it.
    public var kioskID: String
    /// When the person checked in, RFC 3339.
    public var checkedInAt: String
    public var location: Location?
    public var notes: String?
    /// The bed assigned for the night, as the shelter names it (`12`, `B-4`).
    public var bed: String?
    /// The staff member who recorded it at a desk: their desk account's id (`staff-…`), never
    /// their name.
    public var recordedBy: String?

    enum CodingKeys: String, CodingKey {
        case participant, siteID = "site_id", programID = "program_id", kioskID = "kiosk_id",
            checkedInAt = "checked_in_at", location, notes, bed, recordedBy = "recorded_by"
    }

    public init(
        participant: Participant, siteID: Int64, programID: Int64, kioskID: String, checkedInAt: String,
        location: Location? = nil, notes: String? = nil, bed: String? = nil, recordedBy: String? = nil
    ) {
        self.participant = participant
        self.siteID = siteID
        self.programID = programID
        self.kioskID = kioskID
        self.checkedInAt = checkedInAt
        self.location = location
        self.notes = notes
        self.bed = bed
        self.recordedBy = recordedBy
    }

    public static let maximumNameLength = 100
    public static let maximumNotesLength = 2000
    public static let maximumBedLength = 50

    /// Checks every rule of the JSON Schema; the error names the field.
    /// - Parameter today: days since 1970-01-01, for the date-of-birth check.
    public func validate(today: Int = Int(Date().timeIntervalSince1970 / 86_400)) throws(ProtocolError) {
        func fail(_ field: String, _ rule: String) -> ProtocolError {
            ProtocolError(.schemaViolation, "content: field '\(field)' \(rule)")
        }
        func checkName(_ value: String?, _ field: String) throws(ProtocolError) {
            guard let value else { return }
            var blank = true
            for scalar in value.unicodeScalars {
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                    throw fail(field, "must not contain control characters")
                }
                if blank && !scalar.properties.isWhitespace { blank = false }
            }
            guard !blank else { throw fail(field, "must not be blank") }
            // Lengths count Unicode code points, as JSON Schema's maxLength does.
            guard value.utf8.count <= Self.maximumNameLength || value.unicodeScalars.count <= Self.maximumNameLength else {
                throw fail(field, "must be at most \(Self.maximumNameLength) characters")
            }
        }
        try checkName(participant.firstName, "participant.first_name")
        try checkName(participant.lastName, "participant.last_name")
        if let id = participant.etoParticipantID, id < 1 {
            throw fail("participant.eto_participant_id", "must be a positive integer")
        }
        let byName = participant.firstName != nil && participant.lastName != nil
        if participant.isWalkIn {
            guard participant.etoParticipantID == nil else {
                throw fail("participant.eto_participant_id", "must be absent for a new person (new: true)")
            }
            for (field, value) in [("first_name", participant.firstName), ("last_name", participant.lastName)] where value == nil {
                throw fail("participant.\(field)", "is required for a new person (new: true)")
            }
            guard participant.dateOfBirth != nil else {
                throw fail("participant.date_of_birth", "is required for a new person (new: true)")
            }
        }
        if let gender = participant.gender, !Participant.genders.contains(gender) {
            throw fail("participant.gender", "must be one of female, male, unknown")
        }
        guard participant.etoParticipantID != nil || byName else {
            if participant.firstName != nil {
                throw fail("participant.last_name", "is required with first_name (or give eto_participant_id)")
            }
            if participant.lastName != nil {
                throw fail("participant.first_name", "is required with last_name (or give eto_participant_id)")
            }
            throw fail("participant", "needs eto_participant_id, or first_name and last_name")
        }
        if let dob = participant.dateOfBirth {
            guard let days = Timestamp.parseDate(dob) else {
                // Not quoting it: this reason is logged by the broker that refuses the event.
                throw fail("participant.date_of_birth", "must be a date YYYY-MM-DD")
            }
            guard days <= today else { throw fail("participant.date_of_birth", "must not be in the future") }
            guard days >= Timestamp.daysFromCivil(year: 1900, month: 1, day: 1) else {
                throw fail("participant.date_of_birth", "must not be before 1900-01-01")
            }
        }
        guard siteID >= 1 else { throw fail("site_id", "must be a positive integer") }
        guard programID >= 1 else { throw fail("program_id", "must be a positive integer") }
        guard Producer.isValid(kioskID) else {
            throw fail("kiosk_id", "must be 1–64 characters of A–Z a–z 0–9 . _ : -")
        }
        guard Timestamp.parse(checkedInAt) != nil else {
            throw fail("checked_in_at", "must be an RFC 3339 date-time, got '\(checkedInAt.prefix(40))'")
        }
        if let location {
            guard location.latitude.isFinite, (-90...90).contains(location.latitude) else {
                throw fail("location.latitude", "must be between -90 and 90")
            }
            guard location.longitude.isFinite, (-180...180).contains(location.longitude) else {
                throw fail("location.longitude", "must be between -180 and 180")
            }
            guard location.accuracyMeters.isFinite, location.accuracyMeters > 0, location.accuracyMeters <= 100_000 else {
                throw fail("location.accuracy_m", "must be above 0 and at most 100000 metres")
            }
        }
        if let notes, notes.utf8.count > Self.maximumNotesLength, notes.unicodeScalars.count > Self.maximumNotesLength {
            throw fail("notes", "must be at most \(Self.maximumNotesLength) characters")
        }
        if let bed {
            guard !bed.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
                throw fail("bed", "must not contain control characters")
            }
            guard !bed.allSatisfy(\.isWhitespace) else { throw fail("bed", "must not be blank") }
            guard bed.unicodeScalars.count <= Self.maximumBedLength else {
                throw fail("bed", "must be at most \(Self.maximumBedLength) characters")
            }
        }
        if let recordedBy, !Producer.isValid(recordedBy) {
            throw fail("recorded_by", "must be 1–64 characters of A–Z a–z 0–9 . _ : -")
        }
    }

    /// A one-line summary for people: first name and last initial only (the monitor shows it
    /// on screens that others may see).
    public var summary: String { summary(showingPersonalData: true) }

    /// A one-line summary; without personal data it names the participant by ETO id only.
    public func summary(showingPersonalData: Bool) -> String {
        var who = "participant"
        if showingPersonalData, let first = participant.firstName, let last = participant.lastName {
            who = "\(first) \(last.prefix(1))."
        }
        if let id = participant.etoParticipantID { who += " #\(id)" }
        var line = "\(who) at site \(siteID) program \(programID) via \(kioskID)"
        if location != nil { line += " (outreach, with location)" }
        return line
    }
}

/// The payload types this code knows, and how to check them.
public enum Payloads {
    /// Validates content against the schema it names, for known schemas. Unknown schemas pass:
    /// the broker carries them opaquely (their content must still be a JSON object).
    public static func validate(schema: String, type: String, content: Data) throws(ProtocolError) {
        guard let value = JSONValue.parse(content) else { throw ProtocolError(.invalidJSON, "content frame is not valid JSON") }
        try validate(schema: schema, type: type, content: value)
    }

    /// A summary line for a known payload, or nil.
    public static func summary(schema: String, content: Data, showingPersonalData: Bool = true) -> String? {
        switch schema {
        case CheckIn.schema: (try? JSONDecoder().decode(CheckIn.self, from: content))?.summary(showingPersonalData: showingPersonalData)
        default: nil
        }
    }
}
