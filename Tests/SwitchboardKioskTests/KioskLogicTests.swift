import Foundation
import SwitchboardKiosk
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardBus

@Suite("Kiosk logic without a broker")
struct KioskLogicTests {
    @Test("a check-in's event is checkin.recorded, keyed by its person, content as the wire writes it")
    func checkInEvent() throws {
        let checkIn = CheckIn(
            participant: .init(firstName: "Ana", lastName: "Ortiz", dateOfBirth: "1976-02-23"), siteID: 101, programID: 792,
            kioskID: "k", checkedInAt: "2026-11-22T21:04:00Z")
        let event = try Outbox.NewEvent.checkIn(checkIn)
        #expect(event.type == "checkin.recorded" && event.schema == "checkin.recorded/1")
        #expect(event.key == "person:683e6d1735634598")
        #expect(event.content == (try WireJSON.encode(checkIn)))
        var known = checkIn
        known.participant.etoParticipantID = 1000
        #expect(try Outbox.NewEvent.checkIn(known).key == "eto:1000")
    }

    @Test("the file digest is FNV-1a 64 (its published vectors) and the length")
    func digest() {
        #expect(FileDigest.of(Data()) == "cbf29ce484222325-0")
        #expect(FileDigest.of(Data("a".utf8)) == "af63dc4c8601ec8c-1")
        #expect(FileDigest.of(Data("foobar".utf8)) == "85944171f73967e8-6")
    }

    @Test("pacing: due by elapsed time at the rate, all at once at rate 0, never past the total")
    func pacing() {
        let pace = LoadPacing(rate: 100, total: 1000)
        #expect(pace.due(after: .zero) == 1)
        #expect(pace.due(after: .milliseconds(990)) == 100)
        #expect(pace.due(after: .seconds(60)) == 1000)
        #expect(pace.expectedDuration == .seconds(10))
        #expect(LoadPacing(rate: 0, total: 7).due(after: .zero) == 7)
        #expect(LoadPacing(rate: 0, total: 7).expectedDuration == .seconds(60))
    }

    @Test("a load run puts exactly its total in the outbox, in batches, each a valid keyed check-in")
    func loadRun() async throws {
        let directory = try TemporaryDirectory("load")
        defer { directory.remove() }
        let outbox = try Outbox(path: directory.path("outbox.sqlite"), producer: "load-1")
        let plan = try LoadPlan(targets: [.init(site: 101, program: 792)], roster: nil, unmatchedRate: 0)
        let generator = LoadGenerator(outbox: outbox, kioskID: "load-1", pacing: LoadPacing(rate: 0, total: 1_234), plan: plan)
        #expect(!generator.isFinished)
        try await generator.run()
        #expect(generator.generated == 1_234 && generator.isFinished)
        #expect(try await outbox.counts().pending == 1_234)
        let entries = try await outbox.pending(after: 0, limit: 2_000)
        #expect(entries.count == 1_234)
        for entry in entries.prefix(50) {
            let checkIn = try JSONDecoder().decode(CheckIn.self, from: entry.content)
            try checkIn.validate()
            #expect(String(decoding: entry.header, as: UTF8.self).contains(CheckInForm.orderingKey(checkIn)))
        }
    }

    @Test("a load plan checks in the roster's people at their sites; --unmatched-rate makes exactly that share made-up, at real sites")
    func loadPlan() throws {
        let directory = try TemporaryDirectory("load-plan")
        defer { directory.remove() }
        let path = directory.path("roster.csv")
        try Data(
            """
            first_name,last_name,date_of_birth,site_id,program_id
            Ana,Ortiz,1976-02-23,101,792
            Luis,Garcia,1980-05-01,102,801
            Mei,Chen,1991-09-09,101,792

            """.utf8
        ).write(to: URL(fileURLWithPath: path))
        let roster = try CheckInRoster(path: path, kioskID: "load-1")
        let plan = try LoadPlan(targets: [], roster: roster, unmatchedRate: 0.1)
        #expect(plan.targets == [.init(site: 101, program: 792), .init(site: 102, program: 801)], "the roster's, in order")
        let checkIns = try (0..<1000).map { try plan.checkIn($0, kioskID: "load-1") }
        let real: Set<String> = ["Ana Ortiz", "Luis Garcia", "Mei Chen"]
        let madeUp = checkIns.filter { !real.contains("\($0.participant.firstName ?? "") \($0.participant.lastName ?? "")") }
        #expect(madeUp.count == 100, "exactly a tenth")
        #expect(madeUp.allSatisfy { [101, 102].contains($0.siteID) && [792, 801].contains($0.programID) }, "at sites ETO has")
        #expect((0..<100).filter(plan.isUnmatched).count == 10, "spread evenly, not bunched")
        for checkIn in checkIns { try checkIn.validate() }
        #expect(try plan.checkIn(7, kioskID: "load-1").participant == checkIns[7].participant, "the same index, the same person")

        let none = try LoadPlan(targets: [], roster: roster, unmatchedRate: 0)
        #expect((0..<300).allSatisfy { !none.isUnmatched($0) })
        let given = try LoadPlan(targets: [.init(site: 12, program: 3)], roster: nil, unmatchedRate: 0)
        #expect(try given.checkIn(5, kioskID: "k").siteID == 12 && given.isUnmatched(5), "no roster: made-up people")
        #expect(throws: LoadPlan.Failure.self) { try LoadPlan(targets: [], roster: nil, unmatchedRate: 0) }
        #expect(throws: LoadPlan.Failure.self) { try LoadPlan(targets: [.init(site: 1, program: 1)], roster: nil, unmatchedRate: 1.5) }
    }

    @Test("synthetic check-ins are valid and repeatable; every tenth is street outreach with a location")
    func synthetic() throws {
        for index in 0..<300 {
            let checkIn = SyntheticCheckIns.make(index: index, kioskID: "k1")
            try checkIn.validate()
            #expect((checkIn.location != nil) == (index % 10 == 9))
            let again = SyntheticCheckIns.make(index: index, kioskID: "k1")
            #expect(again.participant == checkIn.participant && again.siteID == checkIn.siteID)
        }
    }

    @Test("what the person reads after a delivery")
    func summary() {
        var report = DeliveryReport()
        #expect(report.summary(endpoint: "tcp://b:1", wait: .seconds(5)) == ["Nothing waiting."])
        report.delivered = 2
        report.duplicates = 1
        report.lastBusSeq = 41
        report.pending = 1
        report.brokerAnswered = true
        #expect(
            report.summary(endpoint: "tcp://b:1", wait: .seconds(5)) == [
                "Delivered 3 check-ins (broker sequence up to #41).", "1 check-in is still waiting and will be sent by the next run.",
            ])
        // The broker answered, but only to ask for a resend: why is said.
        report.retryReason = "unavailable: the journal could not store the event: the disk is full"
        #expect(
            report.summary(endpoint: "tcp://b:1", wait: .seconds(5))[1]
                == "1 check-in is still waiting: the broker could not take it (unavailable: the journal could not store the event: the disk is full); the next run sends it."
        )
        report = DeliveryReport()
        report.pending = 4
        report.rejected = 1
        report.lastProblem = "forbidden: no"
        #expect(
            report.summary(endpoint: "tcp://b:1", wait: .seconds(5)) == [
                "Refused by the broker: 1 (kept on this kiosk; see 'switchboard-kiosk status'). Last reason: forbidden: no.",
                "The broker at tcp://b:1 did not answer within 5.0 seconds. 4 check-ins are saved on this kiosk and will be sent by the next run.",
            ])
    }
}
