import Foundation
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization
import Testing

@testable import SwitchboardWorkers

/// Issue 30.5: the ETO recorder lists the subject's responses (its whole history) only when an
/// earlier attempt may have written. Against the real emulator over HTTP, counting the calls it
/// logs, with a real `eto.sqlite`.
@Suite("ETO looks before writing only when an earlier attempt may have written")
struct ETOLookTests {
    let handlers = HandlerTests()

    /// A check-in by ETO participant id (Ana Ortiz, subject 5000, or Devon Hart, 5003, at site 101).
    static func checkIn(_ participant: Int64 = 1000) -> CheckIn {
        CheckIn(
            participant: .init(etoParticipantID: participant), siteID: 101, programID: 792, kioskID: "desk-1",
            checkedInAt: "2026-11-22T21:04:00Z")
    }

    func event(_ checkIn: CheckIn, id: String = UUIDv7.string(), attempt: Int = 1, first: Bool) throws -> WorkerEvent {
        var event = try handlers.event(checkIn, id: id, attempt: attempt)
        event.firstDelivery = first
        return event
    }

    func recorder(_ b: HandlerTests.Backends, store: ETOCheckInStore?) -> ETOCheckInRecorder {
        ETOCheckInRecorder(eto: b.etoAccess(), configuration: .default, store: store, logger: b.logs.logger)
    }

    /// The ETO calls the emulator logged after sequence number `after`, as "METHOD path" with the
    /// query left off; the log-in chain (`Security.svc`, the site session) is left out.
    static func calls(_ b: HandlerTests.Backends, after: Int = 0) async throws -> (calls: [String], last: Int) {
        let request = HTTPRequest(
            .get, b.emulator.baseURL, path: ["_emulator", "requests"], query: [("api", "eto"), ("after", String(after))],
            api: .generic("emulator-control"), operation: "requests")
        let body = try await b.http.execute(request, logger: b.logs.logger).body
        let entries = try JSONSerialization.jsonObject(with: body) as? [[String: Any]] ?? []
        let last = entries.compactMap { $0["seq"] as? Int }.max() ?? after
        let calls = entries.compactMap { entry -> String? in
            guard let method = entry["method"] as? String, let path = entry["path"] as? String else { return nil }
            let bare = String(path.prefix { $0 != "?" })
            return bare.contains("Security.svc") ? nil : "\(method) \(bare)"
        }
        return (calls, last)
    }

    /// The calls one handling of `event` makes, and its settlement.
    static func handled(
        _ event: WorkerEvent, by recorder: ETOCheckInRecorder, _ b: HandlerTests.Backends
    ) async throws -> (Settlement, [String]) {
        let before = try await calls(b).last
        let settlement = await recorder.handle(event)
        return (settlement, try await calls(b, after: before).calls)
    }

    static let participant = "GET /API/Actor.svc/participant/1000"
    static let list = "GET /API/TouchPoint.svc/ListTouchPointResponses"
    static let add = "POST /API/TouchPoint.svc/TouchPointResponseAdd"

    /// The responses to TouchPoint 54 of subject 5000 that hold `eventID`.
    func responses(holding eventID: String, _ b: HandlerTests.Backends) async throws -> [ETO.TouchPointResponse] {
        try await b.eto.touchPointResponses(subjectID: 5000, touchPointID: 54, auth: b.etoAccess().session(101)).filter {
            $0.elements.contains { $0.elementID == 822 && $0.value == eventID }
        }
    }

    @Test(
        "a first delivery writes without listing; its redelivery (attempt 2) to this worker uses eto.sqlite, to another member looks and finds it: one response"
    )
    func firstDeliveryWritesRedeliveryFinds() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-look-first")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("a"))
            let id = UUIDv7.string()
            let (first, calls) = try await Self.handled(try event(Self.checkIn(), id: id, first: true), by: recorder(b, store: store), b)
            #expect(first == .done, "\(first)")
            #expect(calls == [Self.participant, Self.add], "no list on a first delivery: \(calls)")
            let stored = try #require(try await store.response(of: id))
            #expect(try await !store.writeStarted(id), "the note goes with the response's record")

            // Its ACK lost: the broker delivers it again, as attempt 2, to this worker...
            let (again, againCalls) = try await Self.handled(
                try event(Self.checkIn(), id: id, attempt: 2, first: false), by: recorder(b, store: store), b)
            #expect(again == .done)
            #expect(againCalls == [Self.participant], "its own record answers: \(againCalls)")
            // ...or to another member, whose eto.sqlite knows nothing of it.
            let other = try ETOCheckInStore(directory: directory.path("b"))
            let published = ETOFrontDeskTests.Published()
            let elsewhere = ETOCheckInRecorder(eto: b.etoAccess(), configuration: .default, store: other, logger: b.logs.logger) {
                published.add($0)
            }
            let (moved, movedCalls) = try await Self.handled(try event(Self.checkIn(), id: id, attempt: 2, first: false), by: elsewhere, b)
            #expect(moved == .done)
            #expect(movedCalls == [Self.participant, Self.list], "a redelivery looks, finds, and writes nothing: \(movedCalls)")
            let recorded = try published.contents(ETOResponseRecorded.self, ETOResponseRecorded.type)
            #expect(recorded.map(\.created) == [false] && recorded.first?.responseID == stored.responseID, "\(recorded)")
            #expect(try await other.response(of: id)?.responseID == stored.responseID)
            #expect(try await responses(holding: id, b).map(\.id) == [stored.responseID], "one response")

            // Attempt 1 that the broker does not call first (a replay, or after a broker restart)
            // looks too.
            let (replayed, replayedCalls) = try await Self.handled(
                try event(Self.checkIn(), id: id, first: false),
                by: recorder(b, store: try ETOCheckInStore(directory: directory.path("c"))), b)
            #expect(replayed == .done)
            #expect(replayedCalls == [Self.participant, Self.list], "\(replayedCalls)")
            #expect(try await responses(holding: id, b).count == 1)
        }
    }

    @Test(
        "a note that a write started, with no response remembered, makes even a first delivery look: the write that landed is found, one that never left is made once"
    )
    func startedWriteLooks() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-look-started")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto"))

            // Killed after its POST landed, before the response was remembered: the note is on
            // disk and ETO holds the response (written here by a recorder with no store).
            let landed = UUIDv7.string()
            try await store.writing(landed, at: 1)
            #expect(await recorder(b, store: nil).handle(try event(Self.checkIn(), id: landed, first: true)) == .done)
            let earlier = try #require(try await responses(holding: landed, b).first?.id)
            let (found, foundCalls) = try await Self.handled(
                try event(Self.checkIn(), id: landed, first: true), by: recorder(b, store: store), b)
            #expect(found == .done)
            #expect(foundCalls == [Self.participant, Self.list], "\(foundCalls)")
            #expect(try await responses(holding: landed, b).map(\.id) == [earlier], "no duplicate")
            #expect(try await store.response(of: landed)?.responseID == earlier)
            #expect(try await !store.writeStarted(landed))

            // Killed between the note and the POST: nothing in ETO; the look finds nothing, and
            // the response is written once.
            let lost = UUIDv7.string()
            try await store.writing(lost, at: 1)
            let (written, writtenCalls) = try await Self.handled(
                try event(Self.checkIn(), id: lost, first: true), by: recorder(b, store: store), b)
            #expect(written == .done)
            #expect(writtenCalls == [Self.participant, Self.list, Self.add], "\(writtenCalls)")
            #expect(try await responses(holding: lost, b).count == 1)

            // Without eto.sqlite nothing can be known: every delivery looks.
            let (bare, bareCalls) = try await Self.handled(try event(Self.checkIn(), first: true), by: recorder(b, store: nil), b)
            #expect(bare == .done)
            #expect(bareCalls == [Self.participant, Self.list, Self.add], "\(bareCalls)")
        }
    }

    @Test("a fenced first delivery leaves its note and writes nothing; the next delivery looks and writes once")
    func fencedLeavesNote() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-look-fenced")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto"))
            let id = UUIDv7.string()
            var fenced = try event(Self.checkIn(), id: id, first: true)
            fenced.mayAct = { false }
            let (stopped, stoppedCalls) = try await Self.handled(fenced, by: recorder(b, store: store), b)
            #expect(stopped.code == "not-held", "\(stopped)")
            #expect(stoppedCalls == [Self.participant], "\(stoppedCalls)")
            #expect(try await store.writeStarted(id))
            let (done, doneCalls) = try await Self.handled(
                try event(Self.checkIn(), id: id, attempt: 2, first: false), by: recorder(b, store: store), b)
            #expect(done == .done)
            // A redelivery that writes looks once more after (step 5): the earlier holder's write
            // might have been on its way.
            #expect(doneCalls == [Self.participant, Self.list, Self.add, Self.list], "\(doneCalls)")
            #expect(try await responses(holding: id, b).count == 1)
        }
    }

    @Test(
        "two members' writes of one check-in race (the other's lands between this one's look and its write): this one, a redelivery or a delivery lost while it wrote, deletes its own and keeps the other's"
    )
    func racedWritesLeaveOne() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-look-raced")
            defer { directory.remove() }
            for (attempt, first) in [(2, false), (1, true)] {
                let store = try ETOCheckInStore(directory: directory.path("eto-\(attempt)"))
                let id = UUIDv7.string()
                // The other member's write (a recorder of its own) lands when this one asks the
                // fence; asked again after its write, this member is told it lost the delivery.
                let asked = Mutex(0)
                let other = recorder(b, store: nil)
                let otherEvent = try event(Self.checkIn(), id: id, first: true)
                var raced = try event(Self.checkIn(), id: id, attempt: attempt, first: first)
                raced.mayAct = {
                    let call = asked.withLock { count in
                        count += 1
                        return count
                    }
                    if call == 1 { _ = await other.handle(otherEvent) }
                    return call == 1
                }
                let settlement = await recorder(b, store: store).handle(raced)
                #expect(settlement == .done, "\(settlement)")
                let left = try await responses(holding: id, b).map(\.id)
                #expect(left.count == 1, "attempt \(attempt): \(left)")
                // What stands is the first to land, the other member's, and this worker remembers it.
                #expect(try await store.response(of: id)?.responseID == left.first ?? nil)
                #expect(asked.withLock { $0 } == (first ? 2 : 1), "a redelivery looks again without asking")
                #expect(
                    b.logs.all.contains { $0.contains("two members wrote it at once") && $0.contains(id) },
                    "the deletion is logged, by event id")
            }
        }
    }

    @Test(
        "a check-in for a participant with 1,000 earlier responses costs the same ETO calls as one with none: the participant and the write"
    )
    func historyCostsNoCalls() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-look-history")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto"))
            let session = b.etoAccess().session(101)
            // Ana (subject 5000) gets 1,000 earlier check-ins; Devon (participant 1003) has none.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        for _ in 0..<250 {
                            _ = try await b.eto.addTouchPointResponse(
                                ETO.TouchPointResponse(
                                    touchPointID: 54, subjectID: 5000, programID: 792, created: Date(),
                                    elements: [.text(822, UUIDv7.string()), .text(821, "earlier \(worker)")]),
                                auth: session)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await b.eto.touchPointResponses(subjectID: 5000, touchPointID: 54, auth: session).count >= 1000)
            #expect(try await b.eto.touchPointResponses(subjectID: 5003, touchPointID: 54, auth: session).isEmpty)

            var perCheckIn: [Int64: [Int]] = [:]
            for participant: Int64 in [1003, 1000] {
                for _ in 0..<3 {
                    let (settlement, calls) = try await Self.handled(
                        try event(Self.checkIn(participant), first: true), by: recorder(b, store: store), b)
                    #expect(settlement == .done, "\(settlement)")
                    #expect(!calls.contains(Self.list), "\(calls)")
                    perCheckIn[participant, default: []].append(calls.count)
                }
            }
            #expect(perCheckIn[1003] == [2, 2, 2] && perCheckIn[1000] == [2, 2, 2], "\(perCheckIn)")
        }
    }

    @Test(
        "a participant read once is not read again for its next check-ins (by id: the write alone; by name: the search and the write); with no lifetime, every check-in reads it"
    )
    func subjectsRemembered() async throws {
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-look-subjects")
            defer { directory.remove() }
            let store = try ETOCheckInStore(directory: directory.path("eto"))
            let remembering = recorder(b, store: store)
            let ids = (0..<3).map { _ in UUIDv7.string() }
            let (first, firstCalls) = try await Self.handled(try event(Self.checkIn(), id: ids[0], first: true), by: remembering, b)
            #expect(first == .done && firstCalls == [Self.participant, Self.add], "\(first) \(firstCalls)")
            let (second, secondCalls) = try await Self.handled(try event(Self.checkIn(), id: ids[1], first: true), by: remembering, b)
            #expect(second == .done && secondCalls == [Self.add], "by id, remembered: \(second) \(secondCalls)")
            let (named, namedCalls) = try await Self.handled(try event(HandlerTests.ana, id: ids[2], first: true), by: remembering, b)
            #expect(named == .done, "\(named)")
            #expect(namedCalls.count == 2 && namedCalls.last == Self.add, "by name, remembered: the search, the write: \(namedCalls)")
            #expect(namedCalls.first?.hasPrefix("GET /API/Search.svc/Search/792/") == true, "\(namedCalls)")
            #expect(remembering.subjects.count == 1, "one participant, by site and id")
            // Each is one response against Ana's subject (5000), whichever path found her.
            for id in ids { #expect(try await responses(holding: id, b).count == 1, "\(id)") }

            let forgetting = ETOCheckInRecorder(
                eto: b.etoAccess(), configuration: .default, store: store, subjectLifetime: .zero, logger: b.logs.logger)
            for _ in 0..<2 {
                let (done, calls) = try await Self.handled(try event(Self.checkIn(), first: true), by: forgetting, b)
                #expect(done == .done && calls == [Self.participant, Self.add], "no lifetime: \(done) \(calls)")
            }
            #expect(forgetting.subjects.count == 0)
        }
    }

    @Test("the remembered subjects stay bounded: at capacity the expired go, then all")
    func subjectsBounded() {
        let subjects = ETOSubjects(lifetime: .seconds(600), capacity: 3)
        for participant in 0..<3 { subjects.remember(5000 + participant, site: 101, participant: participant) }
        #expect(subjects.count == 3 && subjects.subject(site: 101, participant: 2) == 5002)
        #expect(subjects.subject(site: 102, participant: 2) == nil, "by site and id")
        subjects.remember(5002, site: 101, participant: 2)
        #expect(subjects.count == 3, "refreshing one that is there takes no room")
        subjects.remember(5003, site: 101, participant: 3)
        #expect(
            subjects.count == 1 && subjects.subject(site: 101, participant: 3) == 5003 && subjects.subject(site: 101, participant: 0) == nil
        )
    }

    @Test("eto.sqlite's memory of a check-in in one read agrees with its three reads, through a note, a response and an early void")
    func memoryInOneRead() async throws {
        let directory = try TemporaryDirectory("eto-memory")
        defer { directory.remove() }
        let store = try ETOCheckInStore(directory: directory.path)
        func agrees(_ id: String) async throws -> ETOCheckInStore.Memory {
            let memory = try await store.memory(of: id)
            #expect(memory.earlyVoid == (try await store.earlyVoid(of: id)))
            #expect(memory.response == (try await store.response(of: id)))
            #expect(memory.writeStarted == (try await store.writeStarted(id)))
            return memory
        }
        let (a, b) = (UUIDv7.string(), UUIDv7.string())
        #expect(try await agrees(a) == .init(earlyVoid: nil, response: nil, writeStarted: false))
        try await store.writing(a, at: 1)
        #expect(try await agrees(a).writeStarted)
        let recorded = ETOCheckInStore.Recorded(
            checkInEventID: a, siteID: 101, subjectID: 5000, participantID: 1000, touchPointID: 54, responseID: 9, voidEventID: nil)
        try await store.recorded(recorded)
        #expect(try await agrees(a) == .init(earlyVoid: nil, response: recorded, writeStarted: false))
        try await store.voidedEarly(b, by: "v", at: "2026-11-28T05:00:00Z")
        #expect(try await agrees(b) == .init(earlyVoid: "v", response: nil, writeStarted: false))
    }
}
