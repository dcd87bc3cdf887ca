// `switchboard-filemaker`'s logic: one FileMaker record per check-in, exactly once. Delivery is
// at least once, so a write never makes a second record for one event id
// (FileMakerClient.createIfAbsent): with `event_id_unique` the create goes first and the field's
// unique-value 504 means "already there"; without it, a find by the event id goes first. Then
// `filemaker.record.written` goes to the outbox, and only then is the event acknowledged: a
// crash anywhere in between makes the event come again, find its record, and publish (with
// `created: false`) what the crash interrupted.
//
// A `checkin.voided` marks the check-in's record (found by the same event id) voided, and a void
// that comes before its check-in (the check-in was dead-lettered and replayed later) creates the
// record holding just the event id and the void fields; the check-in then meets that record and
// fills its own fields into it, never touching the void fields. Either order ends in the same
// record. Walk-ins ETO created (`eto.participant.created`) are mirrored into a participants
// layout, found or created by ETO's participant id.

public import Foundation
public import Logging
public import SwitchboardBackends
import SwitchboardHTTP
public import SwitchboardProtocol

/// The content of `filemaker.record.written` (schema `filemaker.record.written/1`).
public struct FileMakerRecordWritten: Codable, Sendable, Hashable {
    public static let type = "filemaker.record.written"
    public static let schema = "filemaker.record.written/1"

    /// The event the record was written for.
    public var eventID: String
    public var busSeq: Int64?
    public var database: String
    public var layout: String
    public var recordID: String
    /// Whether this delivery created the record (false: it was there already, from an earlier
    /// delivery whose acknowledgement was lost, or from another writer).
    public var created: Bool

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", busSeq = "bus_seq", database, layout, recordID = "record_id", created
    }

    public init(eventID: String, busSeq: Int64?, database: String, layout: String, recordID: String, created: Bool) {
        self.eventID = eventID
        self.busSeq = busSeq
        self.database = database
        self.layout = layout
        self.recordID = recordID
        self.created = created
    }
}

extension FileMakerRecordWritten: WireJSONWritable {
    /// What `WireJSON.encode` writes, keys sorted, without a JSONEncoder: one is published for
    /// every check-in written.
    public func wireJSON() -> Data {
        var writer = JSONWriter(capacity: 160)
        writer.raw("{")
        if let busSeq {
            writer.key("bus_seq")
            writer.integer(busSeq)
        }
        writer.key("created")
        writer.bool(created)
        writer.key("database")
        writer.string(database)
        writer.key("event_id")
        writer.string(eventID)
        writer.key("layout")
        writer.string(layout)
        writer.key("record_id")
        writer.string(recordID)
        writer.raw("}")
        return writer.data
    }
}

/// The content of `filemaker.record.voided` (schema `filemaker.record.voided/1`): a check-in's
/// record was marked voided. No personal data (the void's reason stays in the void's event).
public struct FileMakerRecordVoided: Codable, Sendable, Hashable {
    public static let type = "filemaker.record.voided"
    public static let schema = "filemaker.record.voided/1"

    /// The `checkin.voided` event applied.
    public var eventID: String
    /// The check-in it voids.
    public var checkInEventID: String
    public var busSeq: Int64?
    public var database: String
    public var layout: String
    public var recordID: String

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", checkInEventID = "checkin_event_id", busSeq = "bus_seq", database, layout, recordID = "record_id"
    }

    public init(eventID: String, checkInEventID: String, busSeq: Int64?, database: String, layout: String, recordID: String) {
        self.eventID = eventID
        self.checkInEventID = checkInEventID
        self.busSeq = busSeq
        self.database = database
        self.layout = layout
        self.recordID = recordID
    }
}

/// Writes check-ins to FileMaker. Thread-safe; one per process.
public struct FileMakerWriter: EventHandler {
    public let client: FileMakerClient
    public let mapping: FileMakerMapping
    let session: CredentialSource<FileMaker.Session>
    let textFields: Set<String>
    let participantTextFields: Set<String>
    let publish: @Sendable (FileMakerRecordWritten, _ key: String?) async throws -> Void
    let publishVoided: @Sendable (FileMakerRecordVoided, _ key: String?) async throws -> Void
    let logger: Logger

    /// - Parameters:
    ///   - textFields: the mapped check-in and void fields that are text on the server
    ///     (``FileMakerMapping/textFields(in:)``).
    ///   - participantTextFields: the same for the participants layout
    ///     (``FileMakerMapping/participantTextFields(in:)``).
    ///   - publishVoided: puts a `filemaker.record.voided` event in the worker's outbox.
    ///   - publish: puts a `filemaker.record.written` event in the worker's outbox.
    public init(
        client: FileMakerClient, mapping: FileMakerMapping, session: CredentialSource<FileMaker.Session>, textFields: Set<String> = [],
        participantTextFields: Set<String> = [], logger: Logger,
        publishVoided: @escaping @Sendable (FileMakerRecordVoided, _ key: String?) async throws -> Void = { _, _ in },
        publish: @escaping @Sendable (FileMakerRecordWritten, _ key: String?) async throws -> Void
    ) {
        self.client = client
        self.mapping = mapping
        self.session = session
        self.textFields = textFields
        self.participantTextFields = participantTextFields
        self.logger = logger
        self.publishVoided = publishVoided
        self.publish = publish
    }

    /// Reads every mapped layout's metadata (check-ins, staff, participants) and checks the
    /// mapping against it; returns the mapped fields that are text, per layout.
    public static func checkLayouts(
        client: FileMakerClient, mapping: FileMakerMapping, session: CredentialSource<FileMaker.Session>
    ) async throws(WorkerConfigurationError) -> (checkIns: Set<String>, participants: Set<String>) {
        func metadata(_ layout: String, setting: String) async throws(WorkerConfigurationError) -> FileMaker.LayoutMetadata {
            do {
                return try await client.layoutMetadata(layout: layout, auth: session)
            } catch {
                if error.vendorCode == "105" {
                    throw WorkerConfigurationError("--mapping: \(setting): database '\(client.database)' has no layout '\(layout)'")
                }
                throw WorkerConfigurationError(
                    "cannot read layout '\(layout)' of '\(client.database)' to check --mapping: \(error)", retryable: true)
            }
        }
        let checkIns = try await metadata(mapping.checkins.layout, setting: "checkins.layout")
        try mapping.validate(against: checkIns)
        if let staff = mapping.staff {
            try mapping.validateStaff(against: try await metadata(staff.layout, setting: "staff.layout"))
        }
        var participantText: Set<String> = []
        if let participants = mapping.participants {
            let layout = try await metadata(participants.layout, setting: "participants.layout (--participants-layout)")
            try mapping.validateParticipants(against: layout)
            participantText = mapping.participantTextFields(in: layout)
        }
        return (mapping.textFields(in: checkIns), participantText)
    }

    /// The group's topics: check-ins, their voids when the mapping has void fields, walk-ins
    /// when it mirrors participants, and people when it mirrors staff.
    public static func topics(for mapping: FileMakerMapping) -> [String] {
        [CheckIn.type] + (mapping.checkins.void == nil ? [] : [CheckInVoid.type])
            + (mapping.participants == nil ? [] : [ParticipantCreated.type]) + (mapping.staff == nil ? [] : ["person."])
    }

    public func handle(_ event: WorkerEvent) async -> Settlement {
        if event.header.type.hasPrefix("person."), let staff = mapping.staff {
            return await mirror(event, into: staff)
        }
        if event.header.type == CheckInVoid.type, let fields = mapping.checkins.void {
            // The reason is the staff member's words: never in a settlement's message.
            let void = try? JSONDecoder().decode(CheckInVoid.self, from: event.content)
            let settlement = await markVoided(event, fields: fields)
            guard let reason = void?.reason.trimmingCharacters(in: .whitespacesAndNewlines), !reason.isEmpty else { return settlement }
            return settlement.removing([reason])
        }
        if event.header.type == ParticipantCreated.type, let participants = mapping.participants {
            let participant = try? JSONDecoder().decode(ParticipantCreated.self, from: event.content)
            return await mirror(event, into: participants).removing(participant?.personalWords ?? [])
        }
        // Decoded once, for the write and for the settlement: FileMaker's message is a third
        // party's text, so whatever a reason holds, the check-in's personal words are taken out
        // (the settlement rule below leaves out 5xx messages too).
        let checkIn = CheckIn.read(event.content)
        return await write(event, checkIn).withoutPersonalData(of: try? checkIn.get())
    }

    func write(_ event: WorkerEvent, _ decoded: Result<CheckIn, any Error>) async -> Settlement {
        guard event.header.type == CheckIn.type else {
            return .deadLetter(code: "unsupported-type", message: "switchboard-filemaker does not write '\(event.header.type)' events")
        }
        guard event.header.schema == CheckIn.schema else {
            return .deadLetter(code: "unsupported-schema", message: "schema '\(event.header.schema)' is not \(CheckIn.schema)")
        }
        let checkIn: CheckIn
        switch decoded {
        case .success(let value):
            checkIn = value
        case .failure(let error):
            return .deadLetter(code: "invalid-content", message: "the check-in cannot be read: \(WorkerConfigurationFile.describe(error))")
        }
        let layout = mapping.checkins.layout
        let fields = mapping.fieldData(for: checkIn, header: event.header, textFields: textFields)
        do {
            let (record, created) = try await client.createIfAbsent(
                layout: layout, uniqueField: mapping.checkins.eventIDField, value: event.eventID, fieldData: fields,
                uniqueValidated: mapping.checkins.eventIDUnique, auth: session)
            if !created, let void = mapping.checkins.void {
                // The record may be a void's that came first: it holds the event id and the void
                // fields only. The check-in's fields go into it (the void fields are not among
                // them, so the void stays); the same PATCH again on a redelivery changes nothing.
                let existing = try await client.record(layout: layout, id: record.recordId, auth: session)
                if Self.isVoided(existing[void.voidedField]) {
                    _ = try await client.edit(layout: layout, id: record.recordId, fieldData: fields, auth: session)
                    logger.info(
                        "check-in filled into its voided record",
                        metadata: [
                            "event_id": "\(event.eventID)", "filemaker.layout": "\(layout)", "filemaker.record": "\(record.recordId)",
                        ])
                }
            }
            let written = FileMakerRecordWritten(
                eventID: event.eventID, busSeq: event.header.busSeq, database: client.database, layout: layout, recordID: record.recordId,
                created: created)
            do {
                try await publish(written, event.header.key)
            } catch {
                // The record is there; the event comes again, finds it, and publishes then.
                return .retry(
                    after: .seconds(1), code: "outbox", message: "the record is written but its event could not be saved: \(error)")
            }
            logger.info(
                created ? "check-in written" : "check-in was already there",
                metadata: ["event_id": "\(event.eventID)", "filemaker.layout": "\(layout)", "filemaker.record": "\(record.recordId)"])
            return .done
        } catch {
            return SettlementRules.fileMaker.settlement(for: error, fields: Array(fields.keys))
        }
    }

    /// Whether a record's voided field says voided: a non-zero number, or text other than empty and `0`.
    static func isVoided(_ value: FileMaker.FieldValue?) -> Bool {
        switch value {
        case .number(let number): number != 0
        case .text(let text): !text.trimmingCharacters(in: .whitespaces).isEmpty && text.trimmingCharacters(in: .whitespaces) != "0"
        case nil: false
        }
    }

    /// Marks the voided check-in's record: found by the check-in's event id (created holding just
    /// that and the void fields when the check-in has not come yet), its void fields PATCHed;
    /// then `filemaker.record.voided` goes to the outbox. Marking again is harmless, so a
    /// redelivery does it again and publishes again.
    func markVoided(_ event: WorkerEvent, fields voidFields: FileMakerMapping.VoidFields) async -> Settlement {
        guard event.header.schema == CheckInVoid.schema else {
            return .deadLetter(code: "unsupported-schema", message: "schema '\(event.header.schema)' is not \(CheckInVoid.schema)")
        }
        let void: CheckInVoid
        do {
            void = try JSONDecoder().decode(CheckInVoid.self, from: event.content)
            try void.validate()
        } catch let error as ProtocolError {
            return .deadLetter(code: "invalid-content", message: "the void cannot be applied: \(error.message)")
        } catch {
            return .deadLetter(code: "invalid-content", message: "the void cannot be read: \(WorkerConfigurationFile.describe(error))")
        }
        let layout = mapping.checkins.layout
        let fields = mapping.fieldData(for: void, header: event.header, textFields: textFields)
        do {
            let (record, created) = try await client.createIfAbsent(
                layout: layout, uniqueField: mapping.checkins.eventIDField, value: void.checkInEventID, fieldData: fields,
                uniqueValidated: mapping.checkins.eventIDUnique, auth: session)
            if !created {
                _ = try await client.edit(layout: layout, id: record.recordId, fieldData: fields, auth: session)
            }
            let voided = FileMakerRecordVoided(
                eventID: event.eventID, checkInEventID: void.checkInEventID, busSeq: event.header.busSeq, database: client.database,
                layout: layout, recordID: record.recordId)
            do {
                try await publishVoided(voided, event.header.key)
            } catch {
                return .retry(
                    after: .seconds(1), code: "outbox", message: "the record is marked voided but its event could not be saved: \(error)")
            }
            logger.info(
                created ? "void recorded before its check-in" : "check-in voided",
                metadata: [
                    "event_id": "\(event.eventID)", "checkin_event_id": "\(void.checkInEventID)", "filemaker.layout": "\(layout)",
                    "filemaker.record": "\(record.recordId)",
                ])
            return .done
        } catch {
            return SettlementRules.fileMaker.settlement(for: error, fields: Array(fields.keys) + [mapping.checkins.eventIDField])
        }
    }

    /// Mirrors a walk-in ETO created or found into the participants layout, once per ETO
    /// participant id: found by it, created if absent. A record already there is left as it is.
    func mirror(_ event: WorkerEvent, into participants: FileMakerMapping.Participants) async -> Settlement {
        guard event.header.schema == ParticipantCreated.schema else {
            return .deadLetter(
                code: "unsupported-schema", message: "schema '\(event.header.schema)' is not \(ParticipantCreated.schema)")
        }
        let participant: ParticipantCreated
        do {
            participant = try ParticipantCreated.decode(event.content)
        } catch {
            return .deadLetter(code: "invalid-content", message: "the participant event cannot be read: \(error.message)")
        }
        let fields = mapping.fieldData(for: participant, header: event.header, textFields: participantTextFields)
        do {
            let (record, created) = try await client.createIfAbsent(
                layout: participants.layout, uniqueField: participants.participantIDField, value: String(participant.participantID),
                fieldData: fields, auth: session)
            logger.info(
                created ? "participant added" : "participant was already there",
                metadata: [
                    "event_id": "\(event.eventID)", "eto.participant": "\(participant.participantID)",
                    "filemaker.layout": "\(participants.layout)", "filemaker.record": "\(record.recordId)",
                ])
            return .done
        } catch {
            return SettlementRules.fileMaker.settlement(for: error, fields: Array(fields.keys) + [participants.participantIDField])
        }
    }

    /// A `person.*` event's content (protocol section 16.3): facts carry `source: "directory"`
    /// and the Directory's `person_id`; requests are the Directory syncer's to apply.
    struct Person: Decodable {
        var personID: Int?
        var name: String?
        var office: String?
        var source: String
        enum CodingKeys: String, CodingKey { case personID = "person_id", name, office, source }
    }

    /// Mirrors a Directory fact into the staff layout, idempotently by the person id: a created
    /// person is found before created, a deleted one is deleted wherever found (none: done).
    func mirror(_ event: WorkerEvent, into staff: FileMakerMapping.Staff) async -> Settlement {
        guard ["person.created", "person.deleted"].contains(event.header.type), event.header.schema == "\(event.header.type)/1" else {
            return .deadLetter(
                code: "unsupported-schema",
                message: "switchboard-filemaker mirrors person.created/1 and person.deleted/1, not \(event.header.schema)")
        }
        let person: Person
        do {
            person = try JSONDecoder().decode(Person.self, from: event.content)
        } catch {
            return .deadLetter(
                code: "invalid-content", message: "the person event cannot be read: \(WorkerConfigurationFile.describe(error))")
        }
        // A request (any other source) becomes a fact once the Directory syncer applied it.
        guard person.source == "directory" else { return .done }
        guard let id = person.personID else {
            return .deadLetter(code: "invalid-content", message: "a Directory fact without person_id cannot be mirrored")
        }
        do {
            if event.header.type == "person.created" {
                var fields: [String: FileMaker.FieldValue] = [:]
                for (field, source) in staff.fields {
                    if let value = source == "name" ? person.name : person.office { fields[field] = .text(value) }
                }
                let (record, created) = try await client.createIfAbsent(
                    layout: staff.layout, uniqueField: staff.personIDField, value: String(id), fieldData: fields, auth: session)
                logger.info(
                    created ? "staff member added" : "staff member was already there",
                    metadata: [
                        "directory.person": "\(id)", "filemaker.layout": "\(staff.layout)", "filemaker.record": "\(record.recordId)",
                    ])
            } else {
                let found = try await client.find(
                    layout: staff.layout, [.matching((staff.personIDField, FileMaker.Find.equals(String(id))))], auth: session)
                for record in found.data {
                    try await client.delete(layout: staff.layout, id: record.recordId, auth: session)
                }
                logger.info("staff member removed", metadata: ["directory.person": "\(id)", "records": "\(found.data.count)"])
            }
            return .done
        } catch {
            return SettlementRules.fileMaker.settlement(for: error, fields: Array(staff.fields.keys))
        }
    }
}
