import Foundation
import Logging
import SwitchboardBackends
import SwitchboardBus
import SwitchboardHTTP
import SwitchboardKiosk
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

/// `switchboard-filemaker` for the front desk as a real process: a group made with the earlier
/// topics stops it with what to do; once recreated, a void that reaches the bus before its
/// check-in, the check-in, and a walk-in's ETO participant end in FileMaker as they should.
extension WorkerProcessTests {
    /// Sends events through an outbox of their own (a producer the test plays: a desk, switchboard-eto).
    func send(_ events: [Outbox.NewEvent], as producer: String, stack: Stack, directory: TemporaryDirectory) async throws -> [String] {
        let outbox = try Outbox(path: directory.path("\(producer)-outbox.sqlite"), producer: producer)
        let entries = try await outbox.enqueue(events)
        let context = try Context()
        let io = try IOThread(context: context)
        let report = try await OutboxSender(outbox: outbox, io: io, endpoint: stack.endpoints.ingest, logger: Logger(label: "test"))
            .deliver(until: .now + .seconds(30))
        await io.shutdown()
        await context.terminate()
        #expect(report.delivered == events.count, "\(report)")
        return entries.map(\.eventID)
    }

    @Test(
        "switchboard-filemaker: a group with the earlier topics stops it with the commands to run; recreated so, a void before its check-in and a walk-in's participant land in FileMaker once"
    )
    func deskEventsThroughProcesses() async throws {
        let directory = try TemporaryDirectory("worker-filemaker-desk")
        defer { directory.remove() }
        let stack = try await stack(directory)
        defer { stack.stop() }
        let programs = stack.programs

        // An earlier version's group.
        let (created, createLog) = try await stack.switchboard(
            ["groups", "create", "filemaker", "--topic", "checkin.recorded", "--topic", "person.", "--start", "head"], log: "create-1.log")
        #expect(created == 0, "\(createLog)")
        let refused = try stack.fileMaker("filemaker-refused.log")
        #expect(await refused.waitForExit(timeout: .seconds(60)) != 0)
        let said = programs.read("filemaker-refused.log")
        #expect(said.contains("group-conflict") || said.contains("takes"), "\(said)")
        #expect(said.contains("switchboard groups delete filemaker"), "\(said)")
        let topics = ["checkin.recorded", "checkin.voided", "eto.participant.created", "person."]
        #expect(said.contains(topics.map { "--topic \($0)" }.joined(separator: " ")), "\(said)")

        // What it says to do.
        let (deleted, deleteLog) = try await stack.switchboard(["groups", "delete", "filemaker"], log: "delete.log")
        #expect(deleted == 0, "\(deleteLog)")
        let (recreated, recreateLog) = try await stack.switchboard(
            ["groups", "create", "filemaker"] + topics.flatMap { ["--topic", $0] } + ["--start", "earliest"], log: "create-2.log")
        #expect(recreated == 0, "\(recreateLog)")
        let writer = try stack.fileMaker("filemaker.log")
        try await waitUntil("the writer joined", timeout: .seconds(60)) {
            guard writer.isRunning else { throw WaitTimedOut(description: "the writer exited: \(programs.read("filemaker.log"))") }
            return programs.read("filemaker.log").contains("ready: joined the group")
        }

        // The void reaches the bus first; its check-in after it (as a replayed dead letter would).
        let checkIn = CheckIn(
            participant: .init(firstName: "Rosa", lastName: "Delgado", dateOfBirth: "1981-07-04", isNew: true, gender: "female"),
            siteID: 101, programID: 792, kioskID: "desk-1", checkedInAt: "2026-11-22T21:04:00Z", bed: "B-4", recordedBy: "staff-7")
        let key = CheckInForm.orderingKey(checkIn)
        let deskOutbox = try Outbox(path: directory.path("desk-outbox.sqlite"), producer: "desk-1")
        let checkInEntry = try #require(
            try await deskOutbox.enqueue([
                .init(type: CheckIn.type, schema: CheckIn.schema, content: try WireJSON.encode(checkIn), key: key)
            ])
            .first)
        let void = CheckInVoid(
            checkInEventID: checkInEntry.eventID, siteID: 101, programID: 792, kioskID: "desk-1", voidedAt: "2026-11-22T21:30:00Z",
            reason: "entered twice by mistake", recordedBy: "staff-9")
        let voidID = try #require(
            try await send(
                [.init(type: CheckInVoid.type, schema: CheckInVoid.schema, content: try WireJSON.encode(void), key: key)], as: "desk-2",
                stack: stack, directory: directory
            ).first)
        let journal = directory.path("broker/journal.sqlite")
        try await waitUntil("the void is applied", timeout: .seconds(60), interval: .milliseconds(200)) {
            guard writer.isRunning else { throw WaitTimedOut(description: "the writer exited: \(programs.read("filemaker.log"))") }
            return ((try? JournalFile.contents(at: journal, type: "filemaker.record.voided"))?.count ?? 0) >= 1
        }
        let context = try Context()
        let io = try IOThread(context: context)
        _ = try await OutboxSender(outbox: deskOutbox, io: io, endpoint: stack.endpoints.ingest, logger: Logger(label: "test"))
            .deliver(until: .now + .seconds(30))
        await io.shutdown()
        await context.terminate()
        let participant =
            #"{"event_id": "\#(checkInEntry.eventID)", "participant_id": 5101, "site_id": 101, "program_id": 792, "first_name": "Rosa", "last_name": "Delgado", "date_of_birth": "1981-07-04", "gender": "female", "created": true}"#
        _ = try await send(
            [.init(type: "eto.participant.created", schema: "eto.participant.created/1", content: Data(participant.utf8), key: key)],
            as: "eto", stack: stack, directory: directory)
        try await waitUntil("the check-in is written", timeout: .seconds(60), interval: .milliseconds(200)) {
            guard writer.isRunning else { throw WaitTimedOut(description: "the writer exited: \(programs.read("filemaker.log"))") }
            return ((try? JournalFile.contents(at: journal, type: "filemaker.record.written"))?.count ?? 0) >= 1
                && programs.read("filemaker.log").contains("participant added")
        }

        let voided = try JournalFile.contents(at: journal, type: "filemaker.record.voided")
        #expect(voided.count == 1 && voided[0].contains(voidID) && voided[0].contains(checkInEntry.eventID), "\(voided)")
        #expect(!voided[0].contains("mistake"), "no reason in filemaker.record.voided")

        let http = try SwitchboardHTTPClient(logger: Logger(label: "reader"))
        let client = FileMakerClient(http: http, serverURL: stack.base, database: "Shelter", logger: Logger(label: "reader"))
        do {
            let session = try await client.logIn(account: "reports", password: "fm-reports-Passw0rd!")
            let records = try await client.find(
                layout: "CheckIns", [.matching(("EventID", FileMaker.Find.equals(checkInEntry.eventID)))], auth: .fixed(session)
            ).data
            #expect(records.count == 1)
            let record = try #require(records.first)
            #expect(record["Voided"] == .number(1) && record["VoidReason"] == .text("entered twice by mistake"))
            #expect(record["FirstName"] == .text("Rosa") && record["Bed"] == .text("B-4") && record["WalkIn"] == .number(1))
            let people = try await client.find(
                layout: "Participants", [.matching(("ETOParticipantID", FileMaker.Find.equals("5101")))], auth: .fixed(session)
            ).data
            #expect(people.count == 1 && people.first?["DateOfBirth"] == .text("07/04/1981"))
            try? await client.logOut(session)
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
        let log = programs.read("filemaker.log")
        for personal in ["Rosa", "Delgado", "mistake", "1981"] { #expect(!log.contains(personal), "\(personal) in the log") }
        writer.signal(SIGTERM)
        #expect(await writer.waitForExit(timeout: .seconds(30)) == 0)
    }
}
