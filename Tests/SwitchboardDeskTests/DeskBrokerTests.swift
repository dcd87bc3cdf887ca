import CoreMetrics
import Foundation
import Logging
import SwitchboardBroker
import SwitchboardBus
import SwitchboardDesk
import SwitchboardKiosk
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

/// The desk against a real broker: its outbox delivered, the journey driven by outcome events
/// published to the broker and read back over the replay endpoint, the roster from a real
/// ServiceWorker answering `participants.list`.
@Suite("Front desk: journey and roster against a real broker", .serialized, .timeLimit(.minutes(5)))
struct DeskBrokerTests {
    static var quiet: Logger {
        var logger = Logger(label: "desk-broker-test")
        logger.logLevel = .critical
        return logger
    }

    /// Publishes an outcome event as a worker would.
    static func publish(_ fixture: BrokerFixture, _ producer: AsyncSocket, seq: Int64, type: String, content: [String: Any]) async throws {
        let data = try JSONSerialization.data(withJSONObject: content)
        let (_, frames) = try Events.frames(producer: "worker-test", seq: seq, type: type, schema: "\(type)/1", content: data)
        let answer = try await Events.exchange(producer, frames)
        #expect(answer.command == .ack, "the broker did not take \(type)")
    }

    @Test("saved → on the broker → in FileMaker → in ETO; a void's outcomes; a dead letter shows its fixed sentence; a restart keeps them")
    func journey() async throws {
        // The group member below is a raw socket that never heartbeats: a long liveness keeps it
        // a member however long a loaded machine delays the test.
        let fixture = try await BrokerFixture.start { $0.groupLiveness = .seconds(120) }
        defer { fixture.directory.remove() }
        let harness = try DeskHarness(directory: fixture.directory)
        let delivery = KioskDelivery(
            io: fixture.io, outbox: harness.outbox, endpoint: fixture.endpoints.ingest, logger: Self.quiet,
            metrics: NOOPMetricsHandler.instance)
        let journey = DeskJourney(
            io: fixture.io, replay: fixture.endpoints.replay, socketOptions: [], store: harness.store, status: harness.status,
            interval: .milliseconds(100), logger: harness.capture.logger)
        let producer = try await fixture.producer()
        try await harness.store.upsert([RosterPerson(participantID: 1003, firstName: "Lena", lastName: "Ortiz")])
        let member = try await fixture.groupPeer()
        _ = try await GroupWire.joined(JoinHeader(group: "eto", topics: ["checkin.recorded"], credit: 10, member: "eto-1"), on: member)
        try await harness.run(connected: { delivery.isConnected }, extra: [delivery, journey]) { client in
            let csrf = try await client.signIn()
            #expect(try await client.post("/checkin", ["csrf": csrf, "participant_id": "1003"]).status == 303)
            #expect(
                try await client.post("/walkin", ["csrf": csrf, "first_name": "Pia", "last_name": "Holm", "date_of_birth": "1970-01-02"])
                    .status == 303)
            let rows = try await harness.store.checkIns(day: DeskActions.day())
            let walkIn = try #require(rows.first { $0.isWalkIn })
            let known = try #require(rows.first { !$0.isWalkIn })
            func state(_ id: String) async throws -> String {
                let page = try await client.get("/")
                guard let range = page.body.range(of: "data-journey=\"\(id)\">") else { return "" }
                return String(page.body[range.upperBound...].prefix { $0 != "<" })
            }
            try await waitUntil("both check-ins reach the broker", timeout: .seconds(20)) {
                let first = try await state(known.eventID)
                let second = try await state(walkIn.eventID)
                return first.hasPrefix("On the broker") && second.hasPrefix("On the broker")
            }
            let journal = try fixture.journalRows()
            let knownSeq = try #require(journal.first { $0.eventID == known.eventID }?.busSeq)
            try await Self.publish(
                fixture, producer, seq: 1, type: "filemaker.record.written",
                content: [
                    "event_id": known.eventID, "bus_seq": knownSeq, "database": "Shelter", "layout": "CheckIns", "record_id": "7",
                    "created": true,
                ])
            try await harness.whenShown("the journey shows FileMaker") {
                try await state(known.eventID).hasPrefix("In FileMaker")
            }
            try await Self.publish(
                fixture, producer, seq: 2, type: "eto.response.recorded",
                content: [
                    "event_id": known.eventID, "bus_seq": knownSeq, "site_id": 101, "program_id": 793, "participant_id": 1003,
                    "touchpoint_id": 54, "response_id": 9001, "created": true,
                ])
            try await harness.whenShown("the journey shows done") { try await state(known.eventID).hasPrefix("Done") }
            // A dead letter of the walk-in, made by the broker when a member of group eto TERMs
            // it: the page shows the code's fixed sentence, never the letter's message.
            let walkInSeq = try #require(journal.first { $0.eventID == walkIn.eventID }?.busSeq)
            for _ in 0..<2 {
                let (delivery, _) = try await GroupWire.delivery(on: member, timeout: .seconds(30))
                let settle =
                    delivery.busSeq == walkInSeq
                    ? SettleHeader(
                        .term, group: "eto", busSeq: delivery.busSeq, attempt: delivery.attempt, code: "participant-unmatched",
                        message: "no participant of program 793 at site 101 matched")
                    : SettleHeader(.ack, group: "eto", busSeq: delivery.busSeq, attempt: delivery.attempt)
                try await member.send(GroupWire.settle(settle))
            }
            try await harness.whenShown("the journey shows the problem") {
                try await state(walkIn.eventID) == "ETO: participant not matched — ask an administrator"
            }
            // The void's outcomes.
            #expect(
                try await client.post("/void", ["csrf": csrf, "event_id": known.eventID, "reason": "entered twice by mistake"]).status
                    == 303)
            let voidID = try #require(try await harness.store.checkIn(known.eventID)?.voidEventID)
            try await Self.publish(
                fixture, producer, seq: 3, type: "filemaker.record.voided",
                content: [
                    "event_id": voidID, "checkin_event_id": known.eventID, "bus_seq": knownSeq + 5, "database": "Shelter",
                    "layout": "CheckIns", "record_id": "7",
                ])
            try await Self.publish(
                fixture, producer, seq: 4, type: "eto.response.voided",
                content: [
                    "event_id": voidID, "checkin_event_id": known.eventID, "bus_seq": knownSeq + 5, "response_id": 9001,
                    "action": "deleted",
                ])
            try await harness.whenShown("the journey shows voided") {
                try await state(known.eventID) == "Voided in FileMaker and ETO"
            }
            // Another desk's outcome changes nothing here.
            try await Self.publish(
                fixture, producer, seq: 5, type: "filemaker.record.written",
                content: [
                    "event_id": UUIDv7.string(), "bus_seq": 1, "database": "Shelter", "layout": "CheckIns", "record_id": "8",
                    "created": true,
                ])
        }
        // The cursor is on disk: a new journey starts after what it read.
        let through = try #require(Int64(try await harness.store.setting("journey_through") ?? ""))
        #expect(through >= 5)
        await fixture.stop(remove: false)
        #expect(harness.leaks(["Lena", "Ortiz", "Pia", "Holm", "1970-01-02", "entered twice by mistake"]).isEmpty)
    }

    @Test("the roster: participants.list paged from a real worker, then searched with the broker stopped; a missing operation fails softly")
    func roster() async throws {
        let rig = try await ETOServiceRig.start()
        defer { rig.fixture.directory.remove() }
        let harness = try DeskHarness(directory: rig.fixture.directory)
        let people = (1...7).map {
            RosterPerson(
                participantID: Int64(1000 + $0), firstName: ["Zoë", "Émile", "Ida"][$0 % 3], lastName: "Person\($0)",
                dateOfBirth: "1980-01-0\($0)")
        }
        let requests = LogCapture()
        let (worker, workerTask) = rig.worker {
            request, _ in
            guard request.operation == "participants.list" else { throw ServiceError.unknownOperation(request.operation) }
            let object = try JSONSerialization.jsonObject(with: request.content) as? [String: Any] ?? [:]
            requests.append("since=\(object["since"] ?? "none") after=\(object["after"] ?? "none") site=\(object["site_id"] ?? "-")")
            let after = (object["after"] as? String).flatMap(Int.init) ?? 0
            let since = object["since"] as? String
            let page = since == nil ? Array(people.dropFirst(after).prefix(3)) : []
            var reply: [String: Any] = [
                "participants": page.map {
                    [
                        "participant_id": $0.participantID, "first_name": $0.firstName, "last_name": $0.lastName,
                        "date_of_birth": $0.dateOfBirth ?? "",
                    ]
                },
                "mark": "m-1",
            ]
            if since == nil && after + 3 < people.count { reply["next"] = String(after + 3) }
            return try JSONSerialization.data(withJSONObject: reply)
        }
        let client = rig.client
        let roster = DeskRoster(
            client: client, store: harness.store, status: harness.status, siteID: 101, programID: 793, interval: .seconds(60),
            logger: harness.capture.logger)
        try await rig.waitAlive()
        #expect(try await roster.refresh() == 7)
        #expect(try await roster.refresh() == 0)
        #expect(
            requests.all == [
                "since=none after=none site=101", "since=none after=3 site=101", "since=none after=6 site=101",
                "since=m-1 after=none site=101",
            ])
        worker.stop()
        _ = try? await workerTask.value
        await rig.stop()
        // Offline: the kept roster answers.
        #expect(try await harness.store.rosterCount() == 7)
        #expect(try await harness.store.search(name: "zoe", dateOfBirth: nil).count == 2)
        #expect(try await harness.store.search(name: "emile person4", dateOfBirth: "1980-01-04").map(\.participantID) == [1004])
        try await harness.run { client in
            _ = try await client.signIn()
            let page = try await client.get("/?name=ida")
            #expect(page.body.contains("Person5"))
            #expect(page.body.contains("Roster updated"))
        }
    }

    @Test("online, a full name also asks eto's participants.search; its matches join the results and the roster, and check in by id")
    func liveSearch() async throws {
        let rig = try await ETOServiceRig.start()
        defer { rig.fixture.directory.remove() }
        let harness = try DeskHarness(directory: rig.fixture.directory)
        let (worker, workerTask) = rig.worker { request, _ in
            guard request.operation == "participants.search" else { throw ServiceError.unknownOperation(request.operation) }
            let query = try JSONDecoder().decode(ETOServiceContent.SearchQuery.self, from: request.content)
            guard query.firstName == "Ruth", query.lastName == "Ng", query.siteID == 101, query.programID == 793 else {
                return Data(#"{"participants":[]}"#.utf8)
            }
            return Data(
                #"{"participants":[{"participant_id":2001,"first_name":"Ruth","last_name":"Ng","date_of_birth":"1961-12-01"}]}"#.utf8)
        }
        let client = rig.client
        try await rig.waitAlive()
        let lookup = ETOLookup(client: client)
        try await harness.run(liveSearch: { query in try? await lookup.search(query, timeout: .seconds(2)) }) { desk in
            let csrf = try await desk.signIn()
            let page = try await desk.get("/?name=Ruth+Ng")
            #expect(page.body.contains("ETO #2001"))
            #expect(try await harness.store.person(2001)?.dateOfBirth == "1961-12-01")
            #expect(try await desk.post("/checkin", ["csrf": csrf, "participant_id": "2001", "bed": "7"]).status == 303)
            let checkIn = try JSONDecoder().decode(
                CheckIn.self, from: try #require(try await harness.outbox.pending(limit: 1).first).content)
            #expect(checkIn.participant.etoParticipantID == 2001 && checkIn.participant.lastName == "Ng")
            worker.stop()
            _ = try? await workerTask.value
            let offline = try await desk.get("/?name=Ruth+Ng")
            #expect(offline.body.contains("ETO did not answer; these are from the roster kept on this desk."))
            #expect(offline.body.contains("ETO #2001"))
        }
        await rig.stop()
        #expect(harness.leaks(["Ruth", "1961-12-01"]).isEmpty)
    }

    @Test("the roster while participants.list is missing: one warning, the reason on the page, nothing thrown")
    func rosterMissingOperation() async throws {
        let rig = try await ETOServiceRig.start()
        defer { rig.fixture.directory.remove() }
        let harness = try DeskHarness(directory: rig.fixture.directory)
        let (worker, workerTask) = rig.worker {
            request, _ in throw ServiceError.unknownOperation(request.operation)
        }
        let client = rig.client
        try await rig.waitAlive()
        let roster = DeskRoster(
            client: client, store: harness.store, status: harness.status, siteID: 101, programID: 793, interval: .milliseconds(200),
            logger: harness.capture.logger)
        try await harness.run(extra: [roster]) { desk in
            try await harness.whenShown("the refresh failed twice") {
                harness.status.rosterProblem != nil && harness.status.changes >= 2
            }
            _ = try await desk.signIn()
            #expect(try await desk.get("/").body.contains("ETO&#39;s list cannot be had now"))
        }
        #expect(harness.capture.lines(containing: ["roster: refresh failed"]).count == 1)
        worker.stop()
        _ = try? await workerTask.value
        await rig.stop()
    }
}

/// What the roster and live-search tests share: a broker whose service plane lets a loaded
/// machine miss ten heartbeats, one `eto` ServiceWorker (made by `worker(_:)`), and a client.
struct ETOServiceRig {
    let fixture: BrokerFixture
    let client: ServiceClient

    static func start() async throws -> ETOServiceRig {
        let fixture = try await BrokerFixture.start { configuration in
            configuration.serviceHeartbeat = .milliseconds(500)
            configuration.serviceLiveness = 10
        }
        let client = ServiceClient(io: fixture.io, endpoint: fixture.endpoints.service, logger: DeskBrokerTests.quiet)
        return ETOServiceRig(fixture: fixture, client: client)
    }

    /// Starts the `eto` worker answering with `handler`, on the same heartbeat as the broker.
    func worker(_ handler: @escaping ServiceWorker.Handler) -> (ServiceWorker, Task<Void, any Error>) {
        var settings = ServiceWorker.Settings()
        settings.heartbeat = .milliseconds(500)
        settings.liveness = 10
        let worker = ServiceWorker(
            service: "eto", io: fixture.io, endpoint: fixture.endpoints.service, settings: settings, logger: DeskBrokerTests.quiet,
            handler: handler)
        return (worker, Task { try await worker.run() })
    }

    /// The broker knows the worker: asked over MMI, as only the broker can tell.
    func waitAlive() async throws {
        try await waitUntil("the eto worker is alive", timeout: .seconds(20)) { (try? await client.isAlive("eto")) == true }
    }

    func stop() async {
        await client.close()
        await fixture.stop(remove: false)
    }
}
