// `switchboard-filemaker`'s logic: one FileMaker record per check-in, exactly once. Delivery is
// at least once, so a write never makes a second record for one event id
// (FileMakerClient.createIfAbsent): with `event_id_unique` the create goes first and the field's
// unique-value 504 means "already there"; without it, a find by the event id goes first. Then
// `filemaker.record.written` goes to the outbox, and only then is the event acknowledged: a
// crash anywhere in between makes the event come again, find its record, and publish (with
// `created: false`) what the crash interrupted.

import Foundation
public import Logging
public import SwitchboardBackends
public import SwitchboardHTTP
import SwitchboardProtocol

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

/// Writes check-ins to FileMaker. Thread-safe; one per process.
public struct FileMakerWriter: EventHandler {
    public let client: FileMakerClient
    public let mapping: FileMakerMapping
    let session: CredentialSource<FileMaker.Session>
    let textFields: Set<String>
    let publish: @Sendable (FileMakerRecordWritten, _ key: String?) async throws -> Void
    let logger: Logger

    /// - Parameters:
    ///   - textFields: the mapped fields that are text on the server (``FileMakerMapping/textFields(in:)``).
    ///   - publish: puts a `filemaker.record.written` event in the worker's outbox.
    public init(
        client: FileMakerClient, mapping: FileMakerMapping, session: CredentialSource<FileMaker.Session>, textFields: Set<String> = [],
        logger: Logger, publish: @escaping @Sendable (FileMakerRecordWritten, _ key: String?) async throws -> Void
    ) {
        self.client = client
        self.mapping = mapping
        self.session = session
        self.textFields = textFields
        self.logger = logger
        self.publish = publish
    }

    /// Reads the layout's metadata from the server and checks the mapping against it; returns
    /// the mapped fields that are text. Errors name the setting.
    public static func checkLayout(
        client: FileMakerClient, mapping: FileMakerMapping, session: CredentialSource<FileMaker.Session>
    ) async throws(WorkerConfigurationError) -> Set<String> {
        let metadata: FileMaker.LayoutMetadata
        do {
            metadata = try await client.layoutMetadata(layout: mapping.checkins.layout, auth: session)
        } catch {
            if error.vendorCode == "105" {
                throw WorkerConfigurationError(
                    "--mapping: checkins.layout: database '\(client.database)' has no layout '\(mapping.checkins.layout)'")
            }
            throw WorkerConfigurationError(
                "cannot read layout '\(mapping.checkins.layout)' of '\(client.database)' to check --mapping: \(error)", retryable: true)
        }
        try mapping.validate(against: metadata)
        if let staff = mapping.staff {
            let staffMetadata: FileMaker.LayoutMetadata
            do {
                staffMetadata = try await client.layoutMetadata(layout: staff.layout, auth: session)
            } catch {
                if error.vendorCode == "105" {
                    throw WorkerConfigurationError("--mapping: staff.layout: database '\(client.database)' has no layout '\(staff.layout)'")
                }
                throw WorkerConfigurationError(
                    "cannot read layout '\(staff.layout)' of '\(client.database)' to check --mapping: \(error)", retryable: true)
            }
            try mapping.validateStaff(against: staffMetadata)
        }
        return mapping.textFields(in: metadata)
    }

    /// The group's topics: check-ins, and people when the mapping mirrors them.
    public static func topics(for mapping: FileMakerMapping) -> [String] {
        [CheckIn.type] + (mapping.staff == nil ? [] : ["person."])
    }

    public func handle(_ event: WorkerEvent) async -> Settlement {
        if event.header.type.hasPrefix("person."), let staff = mapping.staff {
            return await mirror(event, into: staff)
        }
        // FileMaker's message is a third party's text: whatever a reason holds, the check-in's
        // personal words are taken out (the settlement rule below leaves out 5xx messages too).
        let checkIn = try? JSONDecoder().decode(CheckIn.self, from: event.content)
        return await write(event).withoutPersonalData(of: checkIn)
    }

    func write(_ event: WorkerEvent) async -> Settlement {
        guard event.header.type == CheckIn.type else {
            return .deadLetter(code: "unsupported-type", message: "switchboard-filemaker does not write '\(event.header.type)' events")
        }
        guard event.header.schema == CheckIn.schema else {
            return .deadLetter(code: "unsupported-schema", message: "schema '\(event.header.schema)' is not \(CheckIn.schema)")
        }
        let checkIn: CheckIn
        do {
            checkIn = try JSONDecoder().decode(CheckIn.self, from: event.content)
        } catch {
            return .deadLetter(code: "invalid-content", message: "the check-in cannot be read: \(WorkerConfigurationFile.describe(error))")
        }
        let layout = mapping.checkins.layout
        let fields = mapping.fieldData(for: checkIn, header: event.header, textFields: textFields)
        do {
            let (record, created) = try await client.createIfAbsent(
                layout: layout, uniqueField: mapping.checkins.eventIDField, value: event.eventID, fieldData: fields,
                uniqueValidated: mapping.checkins.eventIDUnique, auth: session)
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
            return Self.settlement(for: error, fields: Array(fields.keys))
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
            return Self.settlement(for: error, fields: Array(staff.fields.keys))
        }
    }

    /// How a FileMaker failure is settled: what another try can fix is retried (with the group's
    /// back-off), what it cannot is a dead letter carrying the FileMaker code.
    ///
    /// A field validation's refusal (codes 500–599) is described by its code and the fields it
    /// names, never by FileMaker's message: that message can quote the value refused, which is
    /// what a person typed, and the reason is logged and listed to operators.
    /// - Parameter fields: the fields the request wrote, to name the ones FileMaker's message
    ///   mentions.
    public static func settlement(for error: HTTPError, fields: [String] = []) -> Settlement {
        let text = error.description
        switch error.code {
        case .connectionFailed, .timeout, .tls, .decoding, .credentialRejected, .credentialUnavailable, .cancelled, .shutDown:
            return .retry(after: Settlement.delay(for: error), code: Settlement.code("filemaker-\(error.code)"), message: text)
        case .invalidRequest, .invalidConfiguration, .responseTooLarge, .invalidCredentials:
            return .deadLetter(code: Settlement.code("filemaker-\(error.code)"), message: text)
        default:
            break
        }
        if let code = error.vendorCode, let number = Int(code) {
            // 952 (token), 802 (file not open), 812 (session limit), 8xx host trouble, 10 (auth
            // header): the server or the session, not the record. 500–599: a field validation
            // refused this record's values; 100–199: a layout, field or record that does not
            // exist; 1708/1710: a request FileMaker cannot read. None of those change by retrying.
            switch number {
            case 952, 10, 800...899: return .retry(after: nil, code: "filemaker-\(code)", message: text)
            case 500...599:
                return .deadLetter(code: "filemaker-\(code)", message: validationMessage(error, code: code, fields: fields))
            case 100...199, 1700...1799, 200...299:
                return .deadLetter(code: "filemaker-\(code)", message: text)
            default: break
            }
        }
        if let status = error.status {
            if status >= 500 || status == 429 || status == 408 {
                return .retry(after: nil, code: "filemaker-http-\(status)", message: text)
            }
            return .deadLetter(code: "filemaker-http-\(status)", message: text)
        }
        return .retry(after: nil, code: Settlement.code("filemaker-\(error.code)"), message: text)
    }

    /// A validation refusal in codes and names: the call, FileMaker's code, and which of the
    /// written fields its message names (FileMaker's own words are left out, see above).
    static func validationMessage(_ error: HTTPError, code: String, fields: [String]) -> String {
        let named = fields.filter { field in error.vendorMessage?.contains(field) ?? false }.sorted()
        let which =
            named.isEmpty
            ? "FileMaker's message names none of the written fields"
            : "field\(named.count == 1 ? "" : "s") \(named.map { "'\($0)'" }.joined(separator: ", "))"
        return
            "\(error.api) \(error.operation) failed: FileMaker code \(code), a field's validation refused the record's value (\(which)); HTTP \(error.status ?? 0), attempts \(error.attempts)"
    }
}
