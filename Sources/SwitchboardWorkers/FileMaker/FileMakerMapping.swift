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
        /// How a `checkin.voided` marks the check-in's record; nil: the worker does not take voids.
        public var void: VoidFields?

        enum CodingKeys: String, CodingKey {
            case layout, fields, void
            case eventIDField = "event_id_field"
            case eventIDUnique = "event_id_unique"
            case timeZone = "time_zone"
        }

        public init(
            layout: String, eventIDField: String, eventIDUnique: Bool = false, fields: [String: String], timeZone: String,
            void: VoidFields? = nil
        ) {
            self.layout = layout
            self.eventIDField = eventIDField
            self.eventIDUnique = eventIDUnique
            self.fields = fields
            self.timeZone = timeZone
            self.void = void
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            layout = try c.decode(String.self, forKey: .layout)
            eventIDField = try c.decode(String.self, forKey: .eventIDField)
            eventIDUnique = try c.decodeIfPresent(Bool.self, forKey: .eventIDUnique) ?? false
            fields = try c.decode([String: String].self, forKey: .fields)
            timeZone = try c.decodeIfPresent(String.self, forKey: .timeZone) ?? "UTC"
            void = try c.decodeIfPresent(VoidFields.self, forKey: .void)
        }
    }

    /// The void fields of the check-in layout (protocol section 16.1): a `checkin.voided` sets
    /// `voidedField` to 1 and writes `fields` into the record holding the check-in's event id
    /// (creating one holding just that when the void comes first).
    public struct VoidFields: Codable, Sendable, Hashable {
        /// A number (or text) field set to 1 on a voided record; a check-in's own write never
        /// touches it, so a void is never cleared.
        public var voidedField: String
        /// FileMaker field → source in the void (see ``FileMakerMapping/voidSources``).
        public var fields: [String: String]

        enum CodingKeys: String, CodingKey {
            case fields
            case voidedField = "voided_field"
        }

        public init(voidedField: String, fields: [String: String]) {
            self.voidedField = voidedField
            self.fields = fields
        }
    }

    /// The mirror of walk-ins ETO created or found (`eto.participant.created` from
    /// `switchboard-eto`, protocol section 16.2) into a participants layout.
    public struct Participants: Codable, Sendable, Hashable {
        public var layout: String
        /// A text field (unique-value validation advised) holding ETO's participant id.
        public var participantIDField: String
        /// FileMaker field → source in the event (see ``FileMakerMapping/participantSources``).
        public var fields: [String: String]

        enum CodingKeys: String, CodingKey {
            case layout, fields
            case participantIDField = "participant_id_field"
        }

        public init(layout: String, participantIDField: String, fields: [String: String]) {
            self.layout = layout
            self.participantIDField = participantIDField
            self.fields = fields
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
    /// nil: walk-ins are not mirrored, and the worker does not take `eto.participant.created`.
    public var participants: Participants?

    public init(checkins: CheckIns, staff: Staff? = nil, participants: Participants? = nil) {
        self.checkins = checkins
        self.staff = staff
        self.participants = participants
    }

    /// The seed's `Shelter` file: layout `CheckIns`.
    public static let `default` = FileMakerMapping(
        checkins: CheckIns(
            layout: "CheckIns", eventIDField: "EventID", eventIDUnique: true,
            fields: [
                "ParticipantID": "participant.eto_participant_id", "FirstName": "participant.first_name",
                "LastName": "participant.last_name", "CheckedInAt": "checked_in_at", "Notes": "notes", "Bed": "bed",
                "RecordedBy": "recorded_by", "WalkIn": "participant.new", "Gender": "participant.gender",
            ],
            timeZone: "UTC",
            void: VoidFields(
                voidedField: "Voided", fields: ["VoidedAt": "voided_at", "VoidReason": "reason", "VoidedBy": "recorded_by"])),
        staff: Staff(layout: "Staff", personIDField: "DirectoryID", fields: ["Name": "name", "Shelter": "office"]),
        participants: Participants(
            layout: "Participants", participantIDField: "ETOParticipantID",
            fields: [
                "ParticipantID": "participant_id", "FirstName": "first_name", "LastName": "last_name", "DateOfBirth": "date_of_birth",
                "Gender": "gender",
            ]))

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

    /// Applies `--participants-layout`: nil leaves the mapping's choice, `none` turns the mirror
    /// off, a name mirrors into that layout (with the mapping's, or else the built-in, id field
    /// and fields).
    public mutating func setParticipantsLayout(_ name: String?) {
        guard let name else { return }
        guard name != "none" else {
            participants = nil
            return
        }
        let base = participants ?? Self.default.participants!
        participants = Participants(layout: name, participantIDField: base.participantIDField, fields: base.fields)
    }

    /// Every source a mapping may name: a check-in's content fields by their JSON path, and the
    /// event header's by `$name`.
    public static let sources: [String: Kind] = [
        "$event_id": .text, "$bus_seq": .number, "$producer": .text, "$time": .timestamp, "$key": .text,
        "participant.eto_participant_id": .number, "participant.first_name": .text, "participant.last_name": .text,
        "participant.date_of_birth": .date, "site_id": .number, "program_id": .number, "kiosk_id": .text,
        "checked_in_at": .timestamp, "location.latitude": .number, "location.longitude": .number,
        "location.accuracy_m": .number, "notes": .text, "bed": .text, "recorded_by": .text, "participant.new": .number,
        "participant.gender": .text,
    ]

    /// Every source a void's fields may name: the `checkin.voided` content's fields and the
    /// void event's header (`$event_id` is the void's own id).
    public static let voidSources: [String: Kind] = [
        "$event_id": .text, "$bus_seq": .number, "$producer": .text, "$time": .timestamp, "voided_at": .timestamp, "reason": .text,
        "recorded_by": .text, "kiosk_id": .text,
    ]

    /// Every source a participant's fields may name: the `eto.participant.created` content's
    /// fields and its header's.
    public static let participantSources: [String: Kind] = [
        "$event_id": .text, "$bus_seq": .number, "$time": .timestamp, "participant_id": .number, "first_name": .text,
        "last_name": .text, "date_of_birth": .date, "gender": .text, "site_id": .number, "program_id": .number,
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
        if let void = c.void {
            guard !void.voidedField.isEmpty else {
                throw WorkerConfigurationError("--mapping: \(source): checkins.void.voided_field is empty")
            }
            for (field, path) in void.fields.sorted(by: { $0.key < $1.key }) {
                guard !field.isEmpty, field != c.eventIDField, field != void.voidedField, c.fields[field] == nil else {
                    throw WorkerConfigurationError(
                        "--mapping: \(source): checkins.void.fields.\(field): must be a field of its own (not empty, not the event id, voided or a check-in field)"
                    )
                }
                guard Self.voidSources[path] != nil else {
                    throw WorkerConfigurationError(
                        "--mapping: \(source): checkins.void.fields.\(field): unknown source '\(path)' (known: \(Self.voidSources.keys.sorted().joined(separator: ", ")))"
                    )
                }
            }
            if void.voidedField == c.eventIDField || c.fields[void.voidedField] != nil {
                throw WorkerConfigurationError(
                    "--mapping: \(source): checkins.void.voided_field '\(void.voidedField)' is written by the check-in already; give it a field of its own"
                )
            }
        }
        if let participants {
            guard !participants.layout.isEmpty else { throw WorkerConfigurationError("--mapping: \(source): participants.layout is empty") }
            guard !participants.participantIDField.isEmpty else {
                throw WorkerConfigurationError("--mapping: \(source): participants.participant_id_field is empty")
            }
            for (field, path) in participants.fields.sorted(by: { $0.key < $1.key }) where Self.participantSources[path] == nil {
                throw WorkerConfigurationError(
                    "--mapping: \(source): participants.fields.\(field): unknown source '\(path)' (known: \(Self.participantSources.keys.sorted().joined(separator: ", ")))"
                )
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
        if let void = c.void {
            try Self.check(void.voidedField, kind: .number, in: metadata, layout: c.layout, what: "checkins.void.voided_field")
            for (field, path) in void.fields.sorted(by: { $0.key < $1.key }) {
                try Self.check(
                    field, kind: Self.voidSources[path] ?? .text, in: metadata, layout: c.layout, what: "checkins.void.fields.\(field)")
            }
        }
    }

    /// Checks the participants mirror against its layout: the id field takes text, the mapped
    /// ones their source's kind.
    public func validateParticipants(against metadata: FileMaker.LayoutMetadata) throws(WorkerConfigurationError) {
        guard let participants else { return }
        try Self.check(
            participants.participantIDField, kind: .text, in: metadata, layout: participants.layout,
            what: "participants.participant_id_field")
        for (field, path) in participants.fields.sorted(by: { $0.key < $1.key }) {
            try Self.check(
                field, kind: Self.participantSources[path] ?? .text, in: metadata, layout: participants.layout,
                what: "participants.fields.\(field)")
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
        fieldData(checkins.fields, sources: Self.sources, textFields: textFields) { Self.value(of: $0, in: checkIn, header: header) }
    }

    /// The void fields of a voided check-in's record: `voided_field` = 1 and the mapped ones.
    public func fieldData(for void: CheckInVoid, header: EventHeader, textFields: Set<String> = []) -> [String: FileMaker.FieldValue] {
        guard let mapping = checkins.void else { return [:] }
        var data = fieldData(mapping.fields, sources: Self.voidSources, textFields: textFields) { path in
            switch path {
            case "voided_at": .text(void.voidedAt)
            case "reason": .text(void.reason)
            case "recorded_by": void.recordedBy.map { .text($0) }
            case "kiosk_id": .text(void.kioskID)
            default: Self.headerValue(of: path, header: header)
            }
        }
        data[mapping.voidedField] = textFields.contains(mapping.voidedField) ? .text("1") : .number(1)
        return data
    }

    /// A walk-in's fields in the participants layout (the id field left to the writer).
    /// - Parameter textFields: the mapped fields of that layout that are text.
    public func fieldData(
        for participant: FileMakerWriter.ParticipantCreated, header: EventHeader, textFields: Set<String> = []
    ) -> [String: FileMaker.FieldValue] {
        guard let participants else { return [:] }
        return fieldData(participants.fields, sources: Self.participantSources, textFields: textFields) { path in
            switch path {
            case "participant_id": .number(Double(participant.participantID))
            case "first_name": .text(participant.firstName)
            case "last_name": .text(participant.lastName)
            case "date_of_birth": .text(participant.dateOfBirth)
            case "gender": participant.gender.map { .text($0) }
            case "site_id": .number(Double(participant.siteID))
            case "program_id": .number(Double(participant.programID))
            default: Self.headerValue(of: path, header: header)
            }
        }
    }

    func fieldData(
        _ fields: [String: String], sources: [String: Kind], textFields: Set<String>, value: (String) -> Value?
    ) -> [String: FileMaker.FieldValue] {
        let zone = TimeZone(identifier: checkins.timeZone) ?? TimeZone(secondsFromGMT: 0)!
        var data: [String: FileMaker.FieldValue] = [:]
        for (field, path) in fields {
            guard let kind = sources[path], let value = value(path) else { continue }
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

    /// The mapped fields (check-in and void) whose type is text on the server, from the
    /// check-in layout's metadata.
    public func textFields(in metadata: FileMaker.LayoutMetadata) -> Set<String> {
        let mapped = Set(checkins.fields.keys).union(checkins.void.map { Set($0.fields.keys).union([$0.voidedField]) } ?? [])
        return Set(metadata.fieldMetaData.filter { ($0.result ?? "text") == "text" && mapped.contains($0.name) }.map(\.name))
    }

    /// The participants layout's mapped fields whose type is text, from its metadata.
    public func participantTextFields(in metadata: FileMaker.LayoutMetadata) -> Set<String> {
        let mapped = Set(participants?.fields.keys.map { $0 } ?? [])
        return Set(metadata.fieldMetaData.filter { ($0.result ?? "text") == "text" && mapped.contains($0.name) }.map(\.name))
    }

    enum Value {
        case text(String)
        case number(Double)
    }

    static func headerValue(of path: String, header: EventHeader) -> Value? {
        switch path {
        case "$event_id": .text(header.eventID)
        case "$bus_seq": header.busSeq.map { .number(Double($0)) }
        case "$producer": .text(header.producer)
        case "$time": .text(header.time)
        case "$key": header.key.map { .text($0) }
        default: nil
        }
    }

    static func value(of path: String, in checkIn: CheckIn, header: EventHeader) -> Value? {
        switch path {
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
        case "bed": checkIn.bed.map { .text($0) }
        case "recorded_by": checkIn.recordedBy.map { .text($0) }
        // Always written, so a walk-in's record and a known person's differ by 1 and 0, not 1 and empty.
        case "participant.new": .number(checkIn.participant.isWalkIn ? 1 : 0)
        case "participant.gender": checkIn.participant.gender.map { .text($0) }
        default: headerValue(of: path, header: header)
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
