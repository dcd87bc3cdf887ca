// Which FileMaker field gets which part of a check-in. Shelter files differ (a field is called
// `CheckedInAt` in one and `Arrival` in another), so the mapping is configuration, a JSON file,
// with defaults for the seed's `Shelter` file. It is checked twice at start: against the event's
// known fields (a typo in a source is an error, not an empty field), and against the layout's
// metadata on the server (a missing field or a wrong type stops the worker with the setting
// named, instead of dead-lettering every check-in later).

import Foundation
public import SwitchboardBackends
public import SwitchboardProtocol

/// The `--mapping` file of `switchboard-filemaker`. Documented in its `--help` and in
/// `Sources/SwitchboardWorkers/README.md`.
public struct FileMakerMapping: Codable, Sendable, Hashable {
    public struct CheckIns: Codable, Sendable, Hashable {
        /// The layout check-ins are written through.
        public var layout: String
        /// The text field that holds the bus event id, with "unique value" validation ideally:
        /// it makes writes idempotent.
        public var eventIDField: String
        /// Whether `eventIDField` has "unique value" validation, set to "always" (the seed's
        /// `EventID` has). Then a check-in is one create, and a redelivery a refused create plus a
        /// find; without it (the default), every check-in is a find first, then a create.
        /// Declared true on a field without the validation, redeliveries write duplicates.
        public var eventIDUnique: Bool
        /// FileMaker field → source in the event (see ``FileMakerMapping/sources``).
        public var fields: [String: String]
        /// The time zone FileMaker timestamps are written in (IANA name); FileMaker's are local.
        public var timeZone: String

        enum CodingKeys: String, CodingKey {
            case layout, fields
            case eventIDField = "event_id_field"
            case eventIDUnique = "event_id_unique"
            case timeZone = "time_zone"
        }

        public init(layout: String, eventIDField: String, eventIDUnique: Bool = false, fields: [String: String], timeZone: String) {
            self.layout = layout
            self.eventIDField = eventIDField
            self.eventIDUnique = eventIDUnique
            self.fields = fields
            self.timeZone = timeZone
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            layout = try c.decode(String.self, forKey: .layout)
            eventIDField = try c.decode(String.self, forKey: .eventIDField)
            eventIDUnique = try c.decodeIfPresent(Bool.self, forKey: .eventIDUnique) ?? false
            fields = try c.decode([String: String].self, forKey: .fields)
            timeZone = try c.decodeIfPresent(String.self, forKey: .timeZone) ?? "UTC"
        }
    }

    /// The mirror of the Directory's people (`person.created`/`person.deleted` facts from
    /// `switchboard-directory`, protocol section 16.3) into a staff layout.
    public struct Staff: Codable, Sendable, Hashable {
        public var layout: String
        /// A text field (unique-value validation advised) holding the Directory's person id.
        public var personIDField: String
        /// FileMaker field → `name` or `office`.
        public var fields: [String: String]

        enum CodingKeys: String, CodingKey {
            case layout, fields
            case personIDField = "person_id_field"
        }

        public init(layout: String, personIDField: String, fields: [String: String]) {
            self.layout = layout
            self.personIDField = personIDField
            self.fields = fields
        }

        public static let sources: Set<String> = ["name", "office"]
    }

    public var checkins: CheckIns
    /// nil: people are not mirrored, and the worker does not take `person.*` events.
    public var staff: Staff?

    public init(checkins: CheckIns, staff: Staff? = nil) {
        self.checkins = checkins
        self.staff = staff
    }

    /// The seed's `Shelter` file: layout `CheckIns`.
    public static let `default` = FileMakerMapping(
        checkins: CheckIns(
            layout: "CheckIns", eventIDField: "EventID", eventIDUnique: true,
            fields: [
                "ParticipantID": "participant.eto_participant_id", "FirstName": "participant.first_name",
                "LastName": "participant.last_name", "CheckedInAt": "checked_in_at", "Notes": "notes",
            ],
            timeZone: "UTC"),
        staff: Staff(layout: "Staff", personIDField: "DirectoryID", fields: ["Name": "name", "Shelter": "office"]))

    /// What a source yields, which decides the FileMaker field types it may go to.
    public enum Kind: String, Sendable {
        case text, number, date, timestamp

        /// The FileMaker field result types (`text`, `number`, `date`, `time`, `timeStamp`) a
        /// value of this kind can be written to.
        var targets: Set<String> {
            switch self {
            case .text: ["text"]
            case .number: ["number", "text"]
            case .date: ["date", "text"]
            case .timestamp: ["timeStamp", "text"]
            }
        }
    }

    /// Every source a mapping may name: a check-in's content fields by their JSON path, and the
    /// event header's by `$name`.
    public static let sources: [String: Kind] = [
        "$event_id": .text, "$bus_seq": .number, "$producer": .text, "$time": .timestamp, "$key": .text,
        "participant.eto_participant_id": .number, "participant.first_name": .text, "participant.last_name": .text,
        "participant.date_of_birth": .date, "site_id": .number, "program_id": .number, "kiosk_id": .text,
        "checked_in_at": .timestamp, "location.latitude": .number, "location.longitude": .number,
        "location.accuracy_m": .number, "notes": .text,
    ]

    /// Reads a mapping file; errors name the file and what is wrong in it.
    public static func load(path: String) throws(WorkerConfigurationError) -> FileMakerMapping {
        let mapping = try WorkerConfigurationFile.load(FileMakerMapping.self, path: path, flag: "--mapping", what: "mapping")
        try mapping.validate(source: path)
        return mapping
    }

    /// Checks what can be checked without the server: sources, names, the time zone.
    public func validate(source: String = "the default mapping") throws(WorkerConfigurationError) {
        let c = checkins
        guard !c.layout.isEmpty else { throw WorkerConfigurationError("--mapping: \(source): checkins.layout is empty") }
        guard !c.eventIDField.isEmpty else { throw WorkerConfigurationError("--mapping: \(source): checkins.event_id_field is empty") }
        guard TimeZone(identifier: c.timeZone) != nil else {
            throw WorkerConfigurationError(
                "--mapping: \(source): checkins.time_zone '\(c.timeZone)' is not a time zone name (e.g. America/Los_Angeles)")
        }
        if c.fields[c.eventIDField] != nil {
            throw WorkerConfigurationError(
                "--mapping: \(source): checkins.fields.\(c.eventIDField) is the event id field already (event_id_field); remove it from fields"
            )
        }
        if let staff {
            guard !staff.layout.isEmpty else { throw WorkerConfigurationError("--mapping: \(source): staff.layout is empty") }
            guard !staff.personIDField.isEmpty else {
                throw WorkerConfigurationError("--mapping: \(source): staff.person_id_field is empty")
            }
            for (field, path) in staff.fields.sorted(by: { $0.key < $1.key }) where !Staff.sources.contains(path) {
                throw WorkerConfigurationError(
                    "--mapping: \(source): staff.fields.\(field): unknown source '\(path)' (known: name, office)")
            }
        }
        for (field, path) in c.fields.sorted(by: { $0.key < $1.key }) {
            guard !field.isEmpty else { throw WorkerConfigurationError("--mapping: \(source): checkins.fields has an empty field name") }
            guard Self.sources[path] != nil else {
                throw WorkerConfigurationError(
                    "--mapping: \(source): checkins.fields.\(field): unknown source '\(path)' (known: \(Self.sources.keys.sorted().joined(separator: ", ")))"
                )
            }
        }
    }

    /// Checks the check-in mapping against its layout as the server describes it: every field
    /// exists, takes the source's kind, and can be written by a create (not global, not a container).
    public func validate(against metadata: FileMaker.LayoutMetadata) throws(WorkerConfigurationError) {
        let c = checkins
        try Self.check(c.eventIDField, kind: .text, in: metadata, layout: c.layout, what: "checkins.event_id_field")
        for (field, path) in c.fields.sorted(by: { $0.key < $1.key }) {
            try Self.check(field, kind: Self.sources[path] ?? .text, in: metadata, layout: c.layout, what: "checkins.fields.\(field)")
        }
    }

    /// Checks the staff mirror against its layout: the person id field and the mapped ones take text.
    public func validateStaff(against metadata: FileMaker.LayoutMetadata) throws(WorkerConfigurationError) {
        guard let staff else { return }
        try Self.check(staff.personIDField, kind: .text, in: metadata, layout: staff.layout, what: "staff.person_id_field")
        for field in staff.fields.keys.sorted() {
            try Self.check(field, kind: .text, in: metadata, layout: staff.layout, what: "staff.fields.\(field)")
        }
    }

    static func check(
        _ field: String, kind: Kind, in metadata: FileMaker.LayoutMetadata, layout: String, what: String
    ) throws(WorkerConfigurationError) {
        guard let meta = metadata.fieldMetaData.first(where: { $0.name == field }) else {
            throw WorkerConfigurationError(
                "--mapping: \(what): layout '\(layout)' has no field '\(field)' (it has: \(metadata.fieldMetaData.map(\.name).sorted().joined(separator: ", ")))"
            )
        }
        if meta.global == true {
            throw WorkerConfigurationError(
                "--mapping: \(what): field '\(field)' of layout '\(layout)' is a global field; records cannot hold it")
        }
        let result = meta.result ?? "text"
        guard kind.targets.contains(result) else {
            throw WorkerConfigurationError(
                "--mapping: \(what): field '\(field)' of layout '\(layout)' is of type \(result), which cannot take a \(kind.rawValue) value"
            )
        }
    }
}

extension FileMakerMapping {
    /// The field data of one check-in's record (the event id field left to the writer). Sources
    /// the event does not carry (no notes, no location) are left out: the field keeps its default.
    /// - Parameter textFields: the mapped fields the layout declares as text (numbers go to them
    ///   as text).
    public func fieldData(for checkIn: CheckIn, header: EventHeader, textFields: Set<String> = []) -> [String: FileMaker.FieldValue] {
        let zone = TimeZone(identifier: checkins.timeZone) ?? TimeZone(secondsFromGMT: 0)!
        var data: [String: FileMaker.FieldValue] = [:]
        for (field, path) in checkins.fields {
            guard let kind = Self.sources[path], let value = Self.value(of: path, in: checkIn, header: header) else { continue }
            // A text field takes the value as the event carries it (an RFC 3339 time stays one);
            // number, date and timeStamp fields take FileMaker's own formats.
            switch (textFields.contains(field), value) {
            case (true, .text(let text)): data[field] = .text(text)
            case (true, .number(let number)):
                data[field] = .text(number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number))
            case (false, _): data[field] = Self.convert(value, kind: kind, zone: zone)
            }
        }
        return data
    }

    /// The mapped fields whose type is text on the server, from its layout metadata.
    public func textFields(in metadata: FileMaker.LayoutMetadata) -> Set<String> {
        Set(metadata.fieldMetaData.filter { ($0.result ?? "text") == "text" && checkins.fields[$0.name] != nil }.map(\.name))
    }

    enum Value {
        case text(String)
        case number(Double)
    }

    static func value(of path: String, in checkIn: CheckIn, header: EventHeader) -> Value? {
        switch path {
        case "$event_id": .text(header.eventID)
        case "$bus_seq": header.busSeq.map { .number(Double($0)) }
        case "$producer": .text(header.producer)
        case "$time": .text(header.time)
        case "$key": header.key.map { .text($0) }
        case "participant.eto_participant_id": checkIn.participant.etoParticipantID.map { .number(Double($0)) }
        case "participant.first_name": checkIn.participant.firstName.map { .text($0) }
        case "participant.last_name": checkIn.participant.lastName.map { .text($0) }
        case "participant.date_of_birth": checkIn.participant.dateOfBirth.map { .text($0) }
        case "site_id": .number(Double(checkIn.siteID))
        case "program_id": .number(Double(checkIn.programID))
        case "kiosk_id": .text(checkIn.kioskID)
        case "checked_in_at": .text(checkIn.checkedInAt)
        case "location.latitude": checkIn.location.map { .number($0.latitude) }
        case "location.longitude": checkIn.location.map { .number($0.longitude) }
        case "location.accuracy_m": checkIn.location.map { .number($0.accuracyMeters) }
        case "notes": checkIn.notes.map { .text($0) }
        default: nil
        }
    }

    /// FileMaker's own formats: dates `MM/DD/YYYY`, timestamps `MM/DD/YYYY hh:mm:ss` in `zone`.
    static func convert(_ value: Value, kind: Kind, zone: TimeZone) -> FileMaker.FieldValue {
        switch (value, kind) {
        case (.number(let number), _):
            return .number(number)
        case (.text(let text), .date):
            let parts = text.split(separator: "-")
            guard parts.count == 3 else { return .text(text) }
            return .text("\(parts[1])/\(parts[2])/\(parts[0])")
        case (.text(let text), .timestamp):
            guard let milliseconds = Timestamp.parse(text) else { return .text(text) }
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            func two(_ n: Int?) -> String { n.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
            return .text("\(two(c.month))/\(two(c.day))/\(c.year ?? 0) \(two(c.hour)):\(two(c.minute)):\(two(c.second))")
        case (.text(let text), _):
            return .text(text)
        }
    }
}
