import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardWorkers

/// `protocol/vectors/workers` (section 16) against the Swift types: what the schema accepts,
/// the workers read; a missing required field or a wrong type, they refuse.
@Suite("Worker vectors")
struct VectorTests {
    struct Vector {
        var name: String
        var schema: String
        var def: String?
        var content: Data
        var valid: Bool
        var field: String?
    }

    func vectors() throws -> [Vector] {
        let folder = Vectors.directory.appendingPathComponent("workers")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
        return try names.map { name in
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(name))) as? [String: Any])
            let expect = try #require(object["expect"] as? [String: Any])
            return Vector(
                name: name, schema: try #require(object["schema"] as? String), def: object["def"] as? String,
                content: try JSONSerialization.data(withJSONObject: try #require(object["content"])),
                valid: expect["valid"] as? Bool ?? false,
                field: expect["field"] as? String)
        }
    }

    func decodes<T: Decodable>(_ type: T.Type, _ content: Data) -> Bool { (try? JSONDecoder().decode(T.self, from: content)) != nil }

    @Test("every workers vector is read by the worker's own type; a missing required field or a wrong type is refused")
    func vectorsAgainstTypes() throws {
        let all = try vectors()
        #expect(all.count >= 12)
        for vector in all {
            let reads: Bool
            switch (vector.schema, vector.def) {
            case ("filemaker.record.written.v1.json", _): reads = decodes(FileMakerRecordWritten.self, vector.content)
            case ("filemaker.record.voided.v1.json", _): reads = decodes(FileMakerRecordVoided.self, vector.content)
            case ("person.created.v1.json", _), ("person.deleted.v1.json", _):
                // The syncer's own checks hold every rule of these schemas but unknown fields.
                #expect(personEventAccepted(vector) == vector.valid, "\(vector.name)")
                continue
            case ("directory.sync.suspect.v1.json", _): reads = decodes(DirectorySyncSuspect.self, vector.content)
            case (_, "participants.search-request"?): reads = decodes(ETOService.SearchQuery.self, vector.content)
            case (_, "participants.search-reply"?): reads = decodes([String: [ETOService.Participant]].self, vector.content)
            case (_, "sites.list-reply"?): reads = decodes([String: [ETOService.Site]].self, vector.content)
            case (_, "programs.list-request"?): reads = decodes(ETOService.SiteQuery.self, vector.content)
            case (_, "participant.get-request"?): reads = decodes(ETOService.ParticipantQuery.self, vector.content)
            case (_, "participants.list-request"?): reads = decodes(ETOServiceContent.RosterQuery.self, vector.content)
            case (_, "participants.list-reply"?): reads = decodes(ETOServiceContent.Roster.self, vector.content)
            case ("eto.participant.created.v1.json", _): reads = decodes(ETOParticipantCreated.self, vector.content)
            case ("eto.response.recorded.v1.json", _): reads = decodes(ETOResponseRecorded.self, vector.content)
            case ("eto.response.voided.v1.json", _): reads = decodes(ETOResponseVoided.self, vector.content)
            default:
                Issue.record("\(vector.name): no Swift type for \(vector.schema) \(vector.def ?? "")")
                continue
            }
            // Presence and types are the decoder's; blank names and extra fields are the
            // schema's and the handler's rules (the service tests cover those).
            if vector.valid || ["record_id", "site_id", "date_of_birth", "mark", "action", "checkin_event_id"].contains(vector.field ?? "")
            {
                #expect(reads == vector.valid, "\(vector.name)")
            }
        }
    }

    /// Whether `switchboard-directory` reads a person event and finds nothing wrong with it.
    func personEventAccepted(_ vector: Vector) -> Bool {
        if vector.schema == "person.created.v1.json" {
            return (try? JSONDecoder().decode(PersonCreated.self, from: vector.content)).map { $0.problem == nil } ?? false
        }
        return (try? JSONDecoder().decode(PersonDeleted.self, from: vector.content)).map { $0.problem == nil } ?? false
    }

    @Test("what switchboard-directory publishes has exactly the schemas' fields")
    func directoryEventFields() throws {
        let events: [(String, any Encodable)] = [
            ("person.created.v1.json", PersonCreated(personID: 14, name: "Ana Diaz", office: "Riverside", source: "directory")),
            ("person.deleted.v1.json", PersonDeleted(personID: 14, name: "Ana Diaz", office: "Riverside", source: "directory")),
            (
                "directory.sync.suspect.v1.json",
                DirectorySyncSuspect(
                    account: "outreach-team", previous: 4, current: 0, missing: 4, maxMissing: 0.5, at: "2026-11-22T21:04:00Z")
            ),
        ]
        for (name, event) in events {
            let object = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(event)) as? [String: Any])
            let schema = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: Vectors.packageRoot.appendingPathComponent("protocol/schemas/\(name)")))
                    as? [String: Any])
            let properties = try #require(schema["properties"] as? [String: Any])
            #expect(Set(object.keys) == Set(properties.keys), "\(name)")
        }
    }

    @Test("what switchboard-eto publishes has exactly its schemas' fields (every optional one filled in)")
    func etoEventFields() throws {
        let id = "0190a1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b"
        let events: [(String, any Encodable)] = [
            (
                "eto.participant.created.v1.json",
                ETOParticipantCreated(
                    eventID: id, participantID: 1036, siteID: 101, programID: 792, firstName: "Rosa", lastName: "Quintero",
                    dateOfBirth: "1990-05-04", gender: "female", created: true)
            ),
            (
                "eto.response.recorded.v1.json",
                ETOResponseRecorded(
                    eventID: id, busSeq: 7, siteID: 101, programID: 792, participantID: 1000, touchPointID: 54, responseID: 9002,
                    created: true)
            ),
            (
                "eto.response.voided.v1.json",
                ETOResponseVoided(eventID: id, checkInEventID: id, busSeq: 8, responseID: 9002, action: .deleted)
            ),
        ]
        for (name, event) in events {
            let object = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(event)) as? [String: Any])
            let schema = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: Vectors.packageRoot.appendingPathComponent("protocol/schemas/\(name)"))) as? [String: Any])
            let properties = try #require(schema["properties"] as? [String: Any])
            #expect(Set(object.keys) == Set(properties.keys), "\(name)")
        }
    }

    @Test("what switchboard-filemaker publishes has exactly the schema's fields")
    func recordWrittenFields() throws {
        let written = FileMakerRecordWritten(
            eventID: "0190a1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b", busSeq: 42, database: "Shelter", layout: "CheckIns", recordID: "147",
            created: true)
        let object = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(written)) as? [String: Any])
        let schema = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: Vectors.packageRoot.appendingPathComponent("protocol/schemas/filemaker.record.written.v1.json")))
                as? [String: Any])
        let properties = try #require(schema["properties"] as? [String: Any])
        #expect(Set(object.keys) == Set(properties.keys))

        let voided = FileMakerRecordVoided(
            eventID: "0190a1b2-3c4d-7e5f-8a6b-7c8d9e0f1a3c", checkInEventID: "0190a1b2-3c4d-7e5f-8a6b-7c8d9e0f1a2b", busSeq: 57,
            database: "Shelter", layout: "CheckIns", recordID: "147")
        let voidedObject = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(voided)) as? [String: Any])
        let voidedSchema = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: Vectors.packageRoot.appendingPathComponent("protocol/schemas/filemaker.record.voided.v1.json")))
                as? [String: Any])
        #expect(Set(voidedObject.keys) == Set(try #require(voidedSchema["properties"] as? [String: Any]).keys))
    }
}
