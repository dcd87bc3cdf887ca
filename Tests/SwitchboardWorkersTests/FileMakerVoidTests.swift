import Foundation
import Logging
import SwitchboardBackends
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization
import Testing

@testable import SwitchboardWorkers

/// The FileMaker writer's front-desk events against the real emulator: a check-in's desk fields,
/// its void in either order and redelivered, and walk-ins mirrored into Participants.
extension HandlerTests {
    /// What the writer published.
    final class Published: Sendable {
        let written = Mutex<[FileMakerRecordWritten]>([])
        let voided = Mutex<[FileMakerRecordVoided]>([])
    }

    struct FileMakerRig: Sendable {
        let client: FileMakerClient
        let session: FileMaker.Session
        let writer: FileMakerWriter
        let published: Published

        var written: [FileMakerRecordWritten] { published.written.withLock { $0 } }
        var voided: [FileMakerRecordVoided] { published.voided.withLock { $0 } }

        func records(_ eventID: String) async throws -> [FileMaker.Record] {
            try await client.find(layout: "CheckIns", [.matching(("EventID", FileMaker.Find.equals(eventID)))], auth: .fixed(session)).data
        }
    }

    func fileMakerRig(_ b: Backends, mapping: FileMakerMapping = .default) async throws -> FileMakerRig {
        let client = b.fileMaker
        let session = try await client.logIn(account: "switchboard", password: "fm-demo-Passw0rd!")
        let text = try await FileMakerWriter.checkLayouts(client: client, mapping: mapping, session: .fixed(session))
        let published = Published()
        let writer = FileMakerWriter(
            client: client, mapping: mapping, session: .fixed(session), textFields: text.checkIns, participantTextFields: text.participants,
            logger: b.logs.logger, publishVoided: { event, _ in published.voided.withLock { $0.append(event) } }
        ) { event, _ in published.written.withLock { $0.append(event) } }
        return FileMakerRig(client: client, session: session, writer: writer, published: published)
    }

    static let deskCheckIn = CheckIn(
        participant: .init(firstName: "Rosa", lastName: "Delgado", dateOfBirth: "1981-07-04", isNew: true, gender: "female"),
        siteID: 101, programID: 792, kioskID: "desk-1", checkedInAt: "2026-11-22T21:04:00Z", bed: "B-4", recordedBy: "staff-7")

    func voidEvent(of checkInID: String, reason: String = "wrong person picked", id: String = UUIDv7.string()) throws -> WorkerEvent {
        let void = CheckInVoid(
            checkInEventID: checkInID, siteID: 101, programID: 792, kioskID: "desk-1", voidedAt: "2026-11-22T21:30:00Z", reason: reason,
            recordedBy: "staff-9")
        return WorkerEvent(
            header: EventHeader(
                eventID: id, type: CheckInVoid.type, producer: "desk-1", producerSeq: 2, busSeq: 9, schema: CheckInVoid.schema,
                session: "s",
                key: "p"),
            content: try WireJSON.encode(void))
    }

    /// The fields a test compares between the two orders (record ids and creation times differ).
    static let compared = [
        "EventID", "FirstName", "LastName", "Bed", "RecordedBy", "WalkIn", "Gender", "CheckedInAt", "Voided", "VoidedAt", "VoidReason",
        "VoidedBy",
    ]

    @Test("the desk's fields land in CheckIns: bed, recorded_by, walk-in 1/0 and gender; the layout check names the text fields")
    func deskFields() async throws {
        try await withBackends { b in
            let rig = try await fileMakerRig(b)
            let walkIn = try event(Self.deskCheckIn)
            #expect(await rig.writer.handle(walkIn) == .done)
            let record = try #require(try await rig.records(walkIn.eventID).first)
            #expect(record["Bed"] == .text("B-4") && record["RecordedBy"] == .text("staff-7"))
            #expect(record["WalkIn"] == .number(1) && record["Gender"] == .text("female"))
            #expect(record["Voided"] == .text(""), "a check-in never writes the void fields")
            let known = try event(Self.ana)
            #expect(await rig.writer.handle(known) == .done)
            #expect(try await rig.records(known.eventID).first?["WalkIn"] == .number(0))
            let text = try await FileMakerWriter.checkLayouts(client: rig.client, mapping: .default, session: .fixed(rig.session))
            #expect(text.checkIns == ["FirstName", "LastName", "Notes", "Bed", "RecordedBy", "Gender", "VoidReason", "VoidedBy"])
            #expect(text.participants == ["FirstName", "LastName", "Gender"])
        }
    }

    @Test(
        "a void after its check-in marks the record voided and publishes filemaker.record.voided; redelivered, both leave one record voided"
    )
    func voidAfterCheckIn() async throws {
        try await withBackends { b in
            let rig = try await fileMakerRig(b)
            let checkIn = try event(Self.deskCheckIn)
            let void = try voidEvent(of: checkIn.eventID)
            #expect(await rig.writer.handle(checkIn) == .done)
            #expect(await rig.writer.handle(void) == .done)
            #expect(await rig.writer.handle(void) == .done)
            #expect(await rig.writer.handle(checkIn) == .done)
            let records = try await rig.records(checkIn.eventID)
            #expect(records.count == 1)
            let record = try #require(records.first)
            #expect(record["Voided"] == .number(1) && record["VoidReason"] == .text("wrong person picked"))
            #expect(record["VoidedBy"] == .text("staff-9") && record["VoidedAt"] == .text("11/22/2026 21:30:00"))
            #expect(record["FirstName"] == .text("Rosa") && record["Bed"] == .text("B-4"))
            let voided = rig.voided
            #expect(voided.count == 2)
            #expect(
                voided.allSatisfy {
                    $0
                        == FileMakerRecordVoided(
                            eventID: void.eventID, checkInEventID: checkIn.eventID, busSeq: 9, database: "Shelter", layout: "CheckIns",
                            recordID: record.recordId)
                })
            #expect(rig.written.map(\.created) == [true, false])
            let logged = b.logs.all.joined(separator: "\n")
            #expect(!logged.contains("wrong person picked") && !logged.contains("Rosa"), "\(logged)")
        }
    }

    @Test(
        "a void before its check-in creates the record with the void alone; the check-in then fills it without clearing the void; the end state equals the other order's, redeliveries included"
    )
    func voidBeforeCheckIn() async throws {
        try await withBackends { b in
            let rig = try await fileMakerRig(b)
            // The other order, for comparison.
            let earlier = try event(Self.deskCheckIn)
            #expect(await rig.writer.handle(earlier) == .done)
            #expect(await rig.writer.handle(try voidEvent(of: earlier.eventID)) == .done)
            let reference = try #require(try await rig.records(earlier.eventID).first)

            let checkIn = try event(Self.deskCheckIn)
            let void = try voidEvent(of: checkIn.eventID)
            #expect(await rig.writer.handle(void) == .done)
            let placeholder = try #require(try await rig.records(checkIn.eventID).first)
            #expect(placeholder["Voided"] == .number(1) && placeholder["FirstName"] == .text(""))
            #expect(rig.voided.last?.recordID == placeholder.recordId)
            #expect(await rig.writer.handle(checkIn) == .done)
            #expect(await rig.writer.handle(checkIn) == .done)
            #expect(await rig.writer.handle(void) == .done)
            let records = try await rig.records(checkIn.eventID)
            #expect(records.count == 1)
            let record = try #require(records.first)
            #expect(record.recordId == placeholder.recordId)
            for field in Self.compared where field != "EventID" {
                #expect(
                    record[field] == reference[field],
                    "\(field): \(String(describing: record[field])) vs \(String(describing: reference[field]))")
            }
            #expect(record["FirstName"] == .text("Rosa") && record["Voided"] == .number(1))
            #expect(rig.written.filter { $0.eventID == checkIn.eventID }.map(\.created) == [false, false])
        }
    }

    @Test("without unique validation declared (find first), a void first and its check-in still end in one voided, filled record")
    func voidBeforeCheckInFindFirst() async throws {
        try await withBackends { b in
            var mapping = FileMakerMapping.default
            mapping.checkins.eventIDUnique = false
            let rig = try await fileMakerRig(b, mapping: mapping)
            let checkIn = try event(Self.deskCheckIn)
            #expect(await rig.writer.handle(try voidEvent(of: checkIn.eventID)) == .done)
            #expect(await rig.writer.handle(checkIn) == .done)
            let records = try await rig.records(checkIn.eventID)
            #expect(records.count == 1)
            #expect(records.first?["Voided"] == .number(1) && records.first?["LastName"] == .text("Delgado"))
        }
    }

    @Test("a void that cannot be read or applied is a dead letter naming the field, never the reason; nothing is written")
    func badVoid() async throws {
        try await withBackends { b in
            let rig = try await fileMakerRig(b)
            var void = try voidEvent(of: "not-an-event-id", reason: "Rosa left drunk")
            var settlement = await rig.writer.handle(void)
            #expect(settlement.code == "invalid-content")
            if case .deadLetter(_, let message) = settlement {
                #expect(message.contains("checkin_event_id") && !message.contains("Rosa"), "\(message)")
            }
            void.header.schema = "checkin.voided/2"
            #expect(await rig.writer.handle(void).code == "unsupported-schema")
            // A FileMaker refusal quoting the reason: the message leaves it out.
            let target = try event(Self.deskCheckIn)
            #expect(await rig.writer.handle(target) == .done)
            try await b.fault(
                #"{"api": "filemaker", "method": "PATCH", "path": "/*/records/*", "kind": "status", "status": 400, "code": "1708", "message": "cannot parse 'Rosa left drunk'", "count": 1}"#
            )
            settlement = await rig.writer.handle(try voidEvent(of: target.eventID, reason: "Rosa left drunk"))
            #expect(settlement.code == "filemaker-1708")
            if case .deadLetter(_, let message) = settlement {
                #expect(!message.contains("left drunk") && !message.contains("Rosa"), "\(message)")
            }
            #expect(rig.voided.isEmpty)
        }
    }

    @Test(
        "eto.participant.created is mirrored into Participants once by ETO id; a known id is left as it is; bad content is a dead letter without the names"
    )
    func participantMirror() async throws {
        try await withBackends { b in
            let rig = try await fileMakerRig(b)
            func created(_ json: String, schema: String = "eto.participant.created/1") -> WorkerEvent {
                WorkerEvent(
                    header: EventHeader(
                        type: "eto.participant.created", producer: "eto-1", producerSeq: 1, busSeq: 11, schema: schema, session: "s",
                        key: "p"),
                    content: Data(json.utf8))
            }
            let checkInID = UUIDv7.string()
            let rosa = created(
                #"{"event_id": "\#(checkInID)", "participant_id": 5001, "site_id": 101, "program_id": 792, "first_name": "Rosa", "last_name": "Delgado", "date_of_birth": "1981-07-04", "gender": "female", "created": true}"#
            )
            #expect(await rig.writer.handle(rosa) == .done)
            #expect(await rig.writer.handle(rosa) == .done)
            let found = try await rig.client.find(
                layout: "Participants", [.matching(("ETOParticipantID", FileMaker.Find.equals("5001")))], auth: .fixed(rig.session)
            ).data
            #expect(found.count == 1)
            let record = try #require(found.first)
            #expect(record["ParticipantID"] == .number(5001) && record["FirstName"] == .text("Rosa"))
            #expect(record["DateOfBirth"] == .text("07/04/1981") && record["Gender"] == .text("female"))
            #expect(record["CreatedAt"]?.description.isEmpty == false, "CreatedAt is the mirror record's creation time")
            // ETO found Ana (seeded, 1000): her record is there already and stays one.
            let ana = created(
                #"{"event_id": "\#(checkInID)", "participant_id": 1000, "site_id": 101, "program_id": 792, "first_name": "Ana", "last_name": "Ortiz", "date_of_birth": "1960-01-01", "created": false}"#
            )
            #expect(await rig.writer.handle(ana) == .done)
            #expect(
                try await rig.client.find(
                    layout: "Participants", [.matching(("ETOParticipantID", FileMaker.Find.equals("1000")))], auth: .fixed(rig.session)
                ).data.count == 1)

            let bad = created(
                #"{"event_id": "\#(checkInID)", "participant_id": 5002, "site_id": 101, "program_id": 792, "first_name": "Rosa", "last_name": "Delgado", "date_of_birth": "04/07/1981", "created": true}"#
            )
            let settlement = await rig.writer.handle(bad)
            #expect(settlement.code == "invalid-content")
            if case .deadLetter(_, let message) = settlement {
                #expect(message.contains("date_of_birth") && !message.contains("1981") && !message.contains("Rosa"), "\(message)")
            }
            let missing = created(#"{"event_id": "\#(checkInID)", "participant_id": 5003, "first_name": "Rosa", "created": true}"#)
            #expect(await rig.writer.handle(missing).code == "invalid-content")
            #expect(await rig.writer.handle(created("{}", schema: "eto.participant.created/2")).code == "unsupported-schema")
            let logged = b.logs.all.joined(separator: "\n")
            #expect(!logged.contains("Rosa") && !logged.contains("Delgado"), "\(logged)")
        }
    }

    @Test(
        "the group's topics follow the mapping; --participants-layout renames or turns off the mirror; a wrong void field is refused at start"
    )
    func topicsAndSettings() async throws {
        #expect(
            FileMakerWriter.topics(for: .default) == ["checkin.recorded", "checkin.voided", "eto.participant.created", "person."])
        var mapping = FileMakerMapping.default
        mapping.setParticipantsLayout("none")
        mapping.staff = nil
        mapping.checkins.void = nil
        #expect(FileMakerWriter.topics(for: mapping) == ["checkin.recorded"])
        mapping.setParticipantsLayout("Walkins")
        #expect(mapping.participants?.layout == "Walkins" && mapping.participants?.participantIDField == "ETOParticipantID")
        #expect(FileMakerWriter.topics(for: mapping) == ["checkin.recorded", "eto.participant.created"])

        // The default, as --help shows it, reads back as itself; a file without the new sections
        // takes no voids and mirrors no walk-ins.
        let shown = try JSONEncoder().encode(FileMakerMapping.default)
        #expect(try JSONDecoder().decode(FileMakerMapping.self, from: shown) == .default)
        let old = try JSONDecoder().decode(
            FileMakerMapping.self,
            from: Data(#"{"checkins": {"layout": "CheckIns", "event_id_field": "EventID", "fields": {"Notes": "notes"}}}"#.utf8))
        #expect(old.checkins.void == nil && old.participants == nil && FileMakerWriter.topics(for: old) == ["checkin.recorded"])

        var bad = FileMakerMapping.default
        bad.checkins.void?.fields["VoidReason"] = "reason_code"
        do { try bad.validate() } catch {
            #expect(error.description.contains("checkins.void.fields.VoidReason: unknown source 'reason_code'"))
        }
        bad = .default
        bad.checkins.void?.fields["Bed"] = "reason"
        #expect(throws: WorkerConfigurationError.self) { try bad.validate() }

        try await withBackends { b in
            let client = b.fileMaker
            let session = try await client.logIn(account: "switchboard", password: "fm-demo-Passw0rd!")
            var wrongType = FileMakerMapping.default
            wrongType.checkins.void?.voidedField = "Created"
            await #expect(throws: WorkerConfigurationError.self) {
                try await FileMakerWriter.checkLayouts(client: client, mapping: wrongType, session: .fixed(session))
            }
            do {
                _ = try await FileMakerWriter.checkLayouts(client: client, mapping: wrongType, session: .fixed(session))
            } catch { #expect("\(error)".contains("checkins.void.voided_field"), "\(error)") }
            var missing = FileMakerMapping.default
            missing.setParticipantsLayout("Walkins")
            do {
                _ = try await FileMakerWriter.checkLayouts(client: client, mapping: missing, session: .fixed(session))
                Issue.record("a missing participants layout passed")
            } catch { #expect("\(error)".contains("participants.layout"), "\(error)") }
        }
    }
}
