import Foundation
import Logging
import SwitchboardBackends
import SwitchboardBus
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization
import Testing

@testable import SwitchboardWorkers

/// Issue 27 on the ETO side, against the real emulator over HTTP: walk-ins, the events the worker
/// publishes, voids, and the calls the emulator gained for them. No broker: the handler's
/// settlement and the events it hands its outbox are the values.
@Suite("ETO walk-ins, events and voids against the emulator")
struct ETOFrontDeskTests {
    let handlers = HandlerTests()

    /// What a recorder published, decoded by type.
    final class Published: Sendable {
        let all = Mutex<[ETOPublication]>([])
        func add(_ event: ETOPublication) { all.withLock { $0.append(event) } }
        func contents<T: Decodable>(_ type: T.Type, _ name: String) throws -> [T] {
            try all.withLock { $0 }.filter { $0.type == name }.map { try JSONDecoder().decode(T.self, from: $0.content) }
        }
        var keys: [String?] { all.withLock { $0.map(\.key) } }
        func clear() { all.withLock { $0.removeAll() } }
    }

    static let rosa = CheckIn(
        participant: .init(firstName: "Rosa", lastName: "Quintero", dateOfBirth: "1990-05-04", isNew: true, gender: "female"),
        siteID: 101, programID: 792, kioskID: "desk-1", checkedInAt: "2026-11-22T21:04:00Z", notes: "first night")

    func recorder(_ b: HandlerTests.Backends, store: ETOCheckInStore? = nil, published: Published) -> ETOCheckInRecorder {
        ETOCheckInRecorder(eto: b.etoAccess(), configuration: .default, store: store, logger: b.logs.logger) { published.add($0) }
    }

    func event(_ checkIn: CheckIn, id: String = UUIDv7.string(), key: String = "person:abc") throws -> WorkerEvent {
        var event = try handlers.event(checkIn, id: id)
        event.header.key = key
        return event
    }

    func void(of checkInID: String, id: String = UUIDv7.string()) throws -> WorkerEvent {
        let void = CheckInVoid(
            checkInEventID: checkInID, siteID: 101, programID: 792, kioskID: "desk-1", voidedAt: "2026-11-22T21:10:00Z",
            reason: "wrong person entirely")
        return WorkerEvent(
            header: EventHeader(
                eventID: id, type: CheckInVoid.type, producer: "desk-1", producerSeq: 2, busSeq: 8, schema: CheckInVoid.schema,
                session: "s", key: "person:abc"),
            content: try WireJSON.encode(void), attempt: 1)
    }

    /// The site's participants with this last name, through the new listing.
    func named(_ last: String, _ b: HandlerTests.Backends, program: Int? = nil) async throws -> [ETO.Participant] {
        try await b.eto.participants(siteID: 101, programID: program, lastName: last, auth: b.etoAccess().session(101)).participants
    }

    func responses(holding eventID: String, subject: Int, _ b: HandlerTests.Backends) async throws -> [ETO.TouchPointResponse] {
        try await b.eto.touchPointResponses(subjectID: subject, touchPointID: 54, auth: b.etoAccess().session(101)).filter {
            $0.elements.contains { $0.elementID == 822 && $0.value == eventID }
        }
    }

    @Test("a walk-in is added, enrolled and recorded once; its redelivery finds both and publishes created: false")
    func walkInOnce() async throws {
        try await handlers.withBackends { b in
            let published = Published()
            let recorder = recorder(b, published: published)
            let event = try event(Self.rosa)
            #expect(try await named("Quintero", b).isEmpty)
            let first = await recorder.handle(event)
            #expect(first == .done, "\(first)")
            let people = try await named("Quintero", b)
            #expect(people.count == 1)
            let rosa = try #require(people.first)
            #expect(rosa.gender == .female && rosa.dateOfBirth.map(ETOService.day) == "1990-05-04")
            #expect(try await named("Quintero", b, program: 792).map(\.id) == [rosa.id], "enrolled in the check-in's program")
            let created = try published.contents(ETOParticipantCreated.self, ETOParticipantCreated.type)
            #expect(
                created == [
                    ETOParticipantCreated(
                        eventID: event.eventID, participantID: rosa.id, siteID: 101, programID: 792, firstName: "Rosa",
                        lastName: "Quintero",
                        dateOfBirth: "1990-05-04", gender: "female", created: true)
                ])
            let recorded = try published.contents(ETOResponseRecorded.self, ETOResponseRecorded.type)
            #expect(recorded.count == 1 && recorded.first?.created == true && recorded.first?.participantID == rosa.id)
            #expect(recorded.first?.busSeq == 7 && recorded.first?.touchPointID == 54)
            #expect(published.keys.allSatisfy { $0 == "person:abc" }, "published under the check-in's key")

            published.clear()
            #expect(await recorder.handle(event) == .done)
            #expect(try await named("Quintero", b).count == 1, "a redelivery adds no second person")
            #expect(try await responses(holding: event.eventID, subject: try #require(rosa.subjectID), b).count == 1)
            #expect(try published.contents(ETOParticipantCreated.self, ETOParticipantCreated.type).map(\.created) == [false])
            let again = try published.contents(ETOResponseRecorded.self, ETOResponseRecorded.type)
            #expect(again.map(\.created) == [false] && again.first?.responseID == recorded.first?.responseID)
        }
    }

    @Test(
        "a delivery the broker may have given to another member writes nothing: no person added, no response; settled not-held, and the next delivery records it once"
    )
    func fencedWritesNothing() async throws {
        try await handlers.withBackends { b in
            let published = Published()
            let recorder = recorder(b, published: published)
            var event = try event(Self.rosa)
            // `mayAct` answers as the group consumer would: first no (before the add), then yes
            // for the add and no before the response, then yes throughout.
            let answers = Mutex<[Bool]>([false, true, false])
            event.mayAct = { answers.withLock { $0.isEmpty ? true : $0.removeFirst() } }
            let stopped = await recorder.handle(event)
            #expect(stopped.code == "not-held", "\(stopped)")
            #expect(try await named("Quintero", b).isEmpty, "no one added")
            #expect(published.all.withLock { $0 }.isEmpty)

            let halfway = await recorder.handle(event)
            #expect(halfway.code == "not-held", "\(halfway)")
            let rosa = try #require(try await named("Quintero", b).first)
            #expect(try await responses(holding: event.eventID, subject: try #require(rosa.subjectID), b).isEmpty)

            #expect(await recorder.handle(event) == .done)
            #expect(try await named("Quintero", b).count == 1)
            #expect(try await responses(holding: event.eventID, subject: try #require(rosa.subjectID), b).count == 1)
        }
    }

    @Test("a participant added but never enrolled (a crash between the two) is found site-wide and enrolled, not added again")
    func walkInAfterCrashBetweenAddAndEnroll() async throws {
        try await handlers.withBackends { b in
            let session = b.etoAccess().session(101)
            let added = try await b.eto.addParticipant(
                firstName: "Rosa", lastName: "Quintero", dateOfBirth: Date(timeIntervalSince1970: 641_779_200), gender: .female,
                auth: session)
            #expect(try await named("Quintero", b, program: 792).isEmpty)
            let published = Published()
            #expect(await recorder(b, published: published).handle(try event(Self.rosa)) == .done)
            #expect(try await named("Quintero", b).map(\.id) == [added.id])
            #expect(try await named("Quintero", b, program: 792).map(\.id) == [added.id])
            let created = try published.contents(ETOParticipantCreated.self, ETOParticipantCreated.type)
            #expect(created.map(\.created) == [false] && created.first?.participantID == added.id)
        }
    }

    @Test("two kiosks' walk-ins of the same person, one after the other, make one participant and two responses")
    func twoWalkInsOnePerson() async throws {
        try await handlers.withBackends { b in
            let published = Published()
            let recorder = recorder(b, published: published)
            var second = Self.rosa
            second.kioskID = "desk-2"
            let events = [try event(Self.rosa), try event(second)]
            for event in events { #expect(await recorder.handle(event) == .done) }
            let people = try await named("Quintero", b)
            #expect(people.count == 1)
            let subject = try #require(people.first?.subjectID)
            for event in events { #expect(try await responses(holding: event.eventID, subject: subject, b).count == 1) }
            #expect(try published.contents(ETOParticipantCreated.self, ETOParticipantCreated.type).map(\.created) == [true, false])
        }
    }

    @Test("several participants with the walk-in's name and date of birth: participant-unmatched naming ids, never the name")
    func walkInSeveral() async throws {
        try await handlers.withBackends { b in
            let session = b.etoAccess().session(101)
            var ids: [Int] = []
            for _ in 0..<2 {
                ids.append(
                    try await b.eto.addParticipant(
                        firstName: "Rosa", lastName: "Quintero", dateOfBirth: Date(timeIntervalSince1970: 641_779_200), gender: .unknown,
                        auth: session
                    ).id)
            }
            let published = Published()
            let settlement = await recorder(b, published: published).handle(try event(Self.rosa))
            guard case .deadLetter(let code, let message) = settlement else {
                Issue.record("not a dead letter: \(settlement)")
                return
            }
            #expect(code == "participant-unmatched")
            #expect(message.contains("\(ids[0]), \(ids[1])"), "\(message)")
            for word in ["Rosa", "Quintero", "1990"] { #expect(!message.contains(word), "\(message)") }
            #expect(published.all.withLock { $0 }.isEmpty)
            #expect(!b.logs.all.joined(separator: "\n").contains("Quintero"), "a log line shows the name")
        }
    }

    @Test("a void deletes the check-in's response and publishes deleted; its redelivery deletes nothing more and publishes again")
    func voidAfterCheckIn() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-void")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto-state"))
            let attributes = try FileManager.default.attributesOfItem(atPath: store.path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            let published = Published()
            let recorder = recorder(b, store: store, published: published)
            let checkIn = try handlers.event(HandlerTests.ana)
            #expect(await recorder.handle(checkIn) == .done)
            let response = try #require(try published.contents(ETOResponseRecorded.self, ETOResponseRecorded.type).first)
            let ana = try await b.eto.participant(id: 1000, auth: b.etoAccess().session(101))
            #expect(try await responses(holding: checkIn.eventID, subject: try #require(ana.subjectID), b).count == 1)

            published.clear()
            let void = try void(of: checkIn.eventID)
            #expect(await recorder.handle(void) == .done)
            #expect(try await responses(holding: checkIn.eventID, subject: try #require(ana.subjectID), b).isEmpty)
            let voided = try published.contents(ETOResponseVoided.self, ETOResponseVoided.type)
            #expect(
                voided == [
                    ETOResponseVoided(
                        eventID: void.eventID, checkInEventID: checkIn.eventID, busSeq: 8, responseID: response.responseID, action: .deleted
                    )
                ])
            published.clear()
            #expect(await recorder.handle(void) == .done)
            #expect(try published.contents(ETOResponseVoided.self, ETOResponseVoided.type).map(\.action) == [.deleted])
            // The check-in redelivered after its void is not recorded again.
            #expect(await recorder.handle(checkIn) == .done)
            #expect(try await responses(holding: checkIn.eventID, subject: try #require(ana.subjectID), b).isEmpty)
            #expect(!b.logs.all.joined(separator: "\n").contains("wrong person"), "a log line shows the void's reason")
        }
    }

    @Test("a void whose delete went through but was not remembered (a crash) finds the response gone and counts it deleted")
    func voidAfterCrashMidDelete() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-void-crash")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto-state"))
            let published = Published()
            let recorder = recorder(b, store: store, published: published)
            let checkIn = try handlers.event(HandlerTests.ana)
            #expect(await recorder.handle(checkIn) == .done)
            let response = try #require(try published.contents(ETOResponseRecorded.self, ETOResponseRecorded.type).first)
            try await b.eto.deleteTouchPointResponse(touchPointID: 54, responseID: response.responseID, auth: b.etoAccess().session(101))
            published.clear()
            #expect(await recorder.handle(try void(of: checkIn.eventID)) == .done)
            #expect(try published.contents(ETOResponseVoided.self, ETOResponseVoided.type).map(\.action) == [.deleted])
        }
    }

    @Test("a void before its check-in wins: never-recorded, and the check-in arriving later (a replay) is not recorded")
    func voidBeforeCheckIn() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-void-early")
            defer { directory.remove() }
            let path = directory.path("eto-state")
            let published = Published()
            let checkIn = try event(Self.rosa)
            let void = try void(of: checkIn.eventID)
            #expect(await recorder(b, store: try ETOCheckInStore(directory: path), published: published).handle(void) == .done)
            #expect(
                try published.contents(ETOResponseVoided.self, ETOResponseVoided.type) == [
                    ETOResponseVoided(
                        eventID: void.eventID, checkInEventID: checkIn.eventID, busSeq: 8, responseID: nil, action: .neverRecorded)
                ])
            published.clear()
            // A restarted worker (a new store on the same file) still knows.
            #expect(await recorder(b, store: try ETOCheckInStore(directory: path), published: published).handle(checkIn) == .done)
            #expect(published.all.withLock { $0 }.isEmpty, "nothing published for a voided check-in")
            #expect(try await named("Quintero", b).isEmpty, "no participant added for a voided walk-in")
        }
    }

    @Test("a fault on the participant add (503) is a retry that adds no one; the next delivery adds the walk-in once")
    func walkInAddFault() async throws {
        try await handlers.withBackends { b in
            try await b.fault(#"{"api": "eto", "method": "POST", "path": "/*participant/", "kind": "status", "status": 503, "count": 1}"#)
            let published = Published()
            let recorder = recorder(b, published: published)
            let event = try event(Self.rosa)
            let first = await recorder.handle(event)
            guard case .retry(_, let code, let message) = first else {
                Issue.record("not a retry: \(first)")
                return
            }
            #expect(code == "eto-http-503", "\(first)")
            for word in ["Rosa", "Quintero", "1990"] { #expect(!message.contains(word), "\(message)") }
            #expect(try await named("Quintero", b).isEmpty)
            #expect(await recorder.handle(event) == .done)
            #expect(try await named("Quintero", b).count == 1)
            #expect(try published.contents(ETOParticipantCreated.self, ETOParticipantCreated.type).map(\.created) == [true])
        }
    }

    @Test("a walk-in whose add was sent by an earlier delivery waits (retry eto-add-in-doubt) before adding; after the wait it adds once")
    func walkInAddInDoubt() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-add-doubt")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto-state"))
            let published = Published()
            let recorder = ETOCheckInRecorder(
                eto: b.etoAccess(), configuration: .default, store: store, addInDoubt: .seconds(30), logger: b.logs.logger
            ) { published.add($0) }
            let event = try event(Self.rosa)
            try await store.adding(event.eventID, at: Int64(Date().timeIntervalSince1970 * 1000) - 5_000)
            let settlement = await recorder.handle(event)
            guard case .retry(let after, let code, _) = settlement else {
                Issue.record("not a retry: \(settlement)")
                return
            }
            #expect(code == "eto-add-in-doubt")
            // 30 s from a note made 5 s ago: at most 25 s (less the time the handling took, under load).
            #expect(after.map { $0 > .zero && $0 <= .seconds(25) } == true, "\(settlement)")
            #expect(try await named("Quintero", b).isEmpty)
            try await store.adding(event.eventID, at: Int64(Date().timeIntervalSince1970 * 1000) - 31_000)
            #expect(await recorder.handle(event) == .done)
            #expect(try await named("Quintero", b).count == 1)
        }
    }

    @Test(
        "a walk-in delivered again (not first) with no add of this worker's waits before adding: another member's add, held up until then, is found and used; one participant"
    )
    func walkInOtherMembersAddInDoubt() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-add-other")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto-state"))
            let published = Published()
            let recorder = ETOCheckInRecorder(
                eto: b.etoAccess(), configuration: .default, store: store, addInDoubt: .milliseconds(300), logger: b.logs.logger
            ) { published.add($0) }
            var event = try event(Self.rosa)
            event.attempt = 2
            event.firstDelivery = false
            let waiting = await recorder.handle(event)
            guard case .retry(let after, let code, _) = waiting else {
                Issue.record("not a retry: \(waiting)")
                return
            }
            #expect(code == "eto-add-in-doubt" && after == .milliseconds(300), "\(waiting)")
            #expect(try await named("Quintero", b).isEmpty, "no one added while another member's add may be on its way")
            // The earlier member's add, held up by a partition, lands now.
            let landed = try await b.eto.addParticipant(
                firstName: "Rosa", lastName: "Quintero", dateOfBirth: Date(timeIntervalSince1970: 641_779_200), gender: .female,
                auth: b.etoAccess().session(101))
            // The retry comes after the wait the settlement asked for.
            try await Task.sleep(for: .milliseconds(300))
            #expect(await recorder.handle(event) == .done)
            #expect(try await named("Quintero", b).map(\.id) == [landed.id], "the landed add is used, no second person")
            #expect(try await named("Quintero", b, program: 792).map(\.id) == [landed.id])
            #expect(try published.contents(ETOParticipantCreated.self, ETOParticipantCreated.type).map(\.created) == [false])
        }
    }

    @Test("the emulator's participant add refuses bad names and dates of birth, naming the field")
    func emulatorAddValidates() async throws {
        try await handlers.withBackends { b in
            let session = b.etoAccess().session(101)
            let born = Date(timeIntervalSince1970: 641_779_200)
            let cases: [(String, String, Date, String)] = [
                ("", "Quintero", born, "FirstName"), ("Rosa", "  ", born, "LastName"),
                ("Rosa", "Quintero", Date(timeIntervalSinceNow: 86_400 * 30), "DateOfBirth"),
            ]
            for (first, last, date, field) in cases {
                let error = await #expect(throws: HTTPError.self) {
                    _ = try await b.eto.addParticipant(firstName: first, lastName: last, dateOfBirth: date, gender: .male, auth: session)
                }
                #expect(error?.status == 400 && (error?.vendorMessage ?? "").contains(field), "\(String(describing: error))")
            }
        }
    }

    @Test("the emulator's listing pages in CLID order and reports only what changed after a mark")
    func emulatorListing() async throws {
        try await handlers.withBackends { b in
            let session = b.etoAccess().session(101)
            var seen: [Int] = []
            var after: Int?
            var mark: Int64?
            while true {
                let page = try await b.eto.participants(siteID: 101, after: after, take: 2, auth: session)
                if mark == nil { mark = page.changeMark }
                seen += page.participants.map(\.id)
                guard page.participants.count == 2, let last = page.participants.last else { break }
                after = last.id
            }
            #expect(!seen.isEmpty && seen == seen.sorted() && Set(seen).count == seen.count)
            let since = try #require(mark)
            #expect(try await b.eto.participants(siteID: 101, changedSince: since, auth: session).participants.isEmpty)
            let added = try await b.eto.addParticipant(
                firstName: "Rosa", lastName: "Quintero", dateOfBirth: Date(timeIntervalSince1970: 641_779_200), gender: .female,
                auth: session)
            let changed = try await b.eto.participants(siteID: 101, changedSince: since, auth: session)
            #expect(changed.participants.map(\.id) == [added.id] && changed.changeMark > since)
            // Enrolling is a change too.
            _ = try await b.eto.enroll(participantID: 1003, programID: 793, startDate: Date(), auth: session)
            let enrolled = try await b.eto.participants(siteID: 101, changedSince: changed.changeMark, auth: session)
            #expect(enrolled.participants.map(\.id) == [1003])
        }
    }
}
