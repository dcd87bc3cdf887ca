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

/// Issue 27 on the ETO side with real processes: a broker, the emulator, auth and
/// `switchboard-eto`; events published by producers of our own through their outboxes.
@Suite("ETO front desk (processes)", .serialized, .timeLimit(.minutes(5)))
struct ETOFrontDeskProcessTests {
    static let rosa = CheckIn(
        participant: .init(firstName: "Rosa", lastName: "Quintero", dateOfBirth: "1990-05-04", isNew: true, gender: "female"),
        siteID: 101, programID: 792, kioskID: "desk-1", checkedInAt: "2026-11-22T21:04:00Z")

    /// Publishes check-ins as `producer`, under their form's ordering key, and waits until the
    /// broker has them.
    func publish(_ checkIns: [CheckIn], as producer: String, directory: TemporaryDirectory, ingest: String) async throws -> [String] {
        let outbox = try Outbox(path: directory.path("\(producer)/outbox.sqlite"), producer: producer)
        var ids: [String] = []
        for checkIn in checkIns {
            let enqueued = try await outbox.enqueue([
                .init(
                    type: CheckIn.type, schema: CheckIn.schema, content: try WireJSON.encode(checkIn), key: CheckInForm.orderingKey(checkIn)
                )
            ])
            ids += enqueued.map(\.eventID)
        }
        let context = try Context()
        let io = try IOThread(context: context)
        let report = try await OutboxSender(outbox: outbox, io: io, endpoint: ingest, logger: Logger(label: "test"))
            .deliver(until: .now + .seconds(30))
        await io.shutdown()
        await context.terminate()
        #expect(report.delivered == checkIns.count, "\(report)")
        return ids
    }

    /// The site's participants named Quintero, and their TouchPoint 54 event ids.
    func quinteros(_ base: String) async throws -> (people: [ETO.Participant], enrolled: [Int], eventIDs: [String]) {
        let http = try SwitchboardHTTPClient(logger: Logger(label: "reader"))
        let client = ETOClient(http: http, baseURL: base + "/API", logger: Logger(label: "reader"))
        do {
            let session = CredentialSource<ETO.SiteSession>.fixed(
                try await client.logIn(
                    ETO.Account(email: WorkerProcessTests.etoEmail, password: WorkerProcessTests.etoPassword, siteID: 101)))
            let people = try await client.participants(siteID: 101, lastName: "Quintero", auth: session).participants
            let enrolled = try await client.participants(siteID: 101, programID: 792, lastName: "Quintero", auth: session).participants
            var ids: [String] = []
            for person in people {
                let responses = try await client.touchPointResponses(subjectID: person.subjectID ?? 0, touchPointID: 54, auth: session)
                ids += responses.flatMap { $0.elements.filter { $0.elementID == 822 }.compactMap(\.value) }
            }
            try await http.shutdown()
            return (people, enrolled.map(\.id), ids)
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    /// Starts the first ETO worker (log `eto-1.log`) and returns once it has joined the group, so
    /// that a walk-in published next is journaled after the group exists: its delivery is `first`
    /// and the worker adds at once. (One journaled before, or delivered again, first waits out
    /// another member's add that may be on its way, 40 s.)
    static func joined(_ stack: WorkerProcessTests.Stack) async throws -> ChildProcess {
        let eto = try stack.eto("eto-1.log")
        try await waitUntil("the worker has joined the group", timeout: .seconds(60), interval: .milliseconds(50)) {
            stack.programs.read("eto-1.log").contains("ready: joined the group")
        }
        return eto
    }

    func journal(_ directory: TemporaryDirectory, _ type: String) -> [[String: Any]] {
        ((try? JournalFile.contents(at: directory.path("broker/journal.sqlite"), type: type)) ?? []).compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test(
        "a walk-in whose worker is killed -9 between the participant's add and its enrollment is one participant, enrolled, with one response"
    )
    func killedMidCreate() async throws {
        let directory = try TemporaryDirectory("eto-walkin-kill")
        defer { directory.remove() }
        let stack = try await WorkerProcessTests().stack(directory)
        let programs = stack.programs
        defer { stack.stop() }
        // The enrollment waits 20 s: the add is done, the worker is in the middle of the walk-in.
        try await stack.fault(
            #"{"api": "eto", "method": "POST", "path": "/*participant/enrollment*", "kind": "latency", "latency_ms": 20000, "count": 1}"#)
        var eto = try await Self.joined(stack)
        let ids = try await publish([Self.rosa], as: "desk-1", directory: directory, ingest: stack.endpoints.ingest)
        try await waitUntil("the worker has added the participant", timeout: .seconds(60), interval: .milliseconds(100)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-1.log"))") }
            return try await stack.requests("eto").contains {
                ($0["method"] as? String) == "POST" && (($0["path"] as? String) ?? "").lowercased().hasSuffix("actor.svc/participant")
                    && ($0["status"] as? Int) == 200
            }
        }
        eto.signal(SIGKILL)
        #expect(await eto.waitForExit(timeout: .seconds(10)) != nil)
        #expect(try await quinteros(stack.base).people.count == 1, "the add went through before the kill")
        eto = try stack.eto("eto-2.log")
        try await waitUntil("the walk-in is recorded", timeout: .seconds(90), interval: .milliseconds(250)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-2.log"))") }
            return !journal(directory, "eto.response.recorded").isEmpty
        }
        let (people, enrolled, eventIDs) = try await quinteros(stack.base)
        #expect(people.count == 1, "one person, however the walk-in was interrupted")
        #expect(enrolled == people.map(\.id), "enrolled in the check-in's program")
        #expect(eventIDs == ids, "one response, holding the check-in's event id")
        let created = journal(directory, "eto.participant.created")
        #expect(created.count == 1 && created.first?["created"] as? Bool == false, "\(created)")
        #expect(created.first?["participant_id"] as? Int == people.first?.id)
        let recorded = journal(directory, "eto.response.recorded")
        #expect(recorded.count == 1 && recorded.first?["event_id"] as? String == ids.first && recorded.first?["created"] as? Bool == true)
        for log in ["eto-1.log", "eto-2.log"] {
            let text = programs.read(log)
            for word in ["Rosa", "Quintero", "1990-05-04"] { #expect(!text.contains(word), "\(log) shows \(word)") }
        }
        eto.signal(SIGTERM)
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto-2.log"))")
    }

    @Test("a walk-in whose worker is killed -9 while its participant add is held up (latency) is one participant with one response")
    func killedDuringSlowAdd() async throws {
        let directory = try TemporaryDirectory("eto-walkin-slow-add")
        defer { directory.remove() }
        let stack = try await WorkerProcessTests().stack(directory)
        let programs = stack.programs
        defer { stack.stop() }
        try await stack.fault(
            #"{"api": "eto", "method": "POST", "path": "/*participant/", "kind": "latency", "latency_ms": 30000, "count": 1}"#)
        var eto = try await Self.joined(stack)
        let ids = try await publish([Self.rosa], as: "desk-1", directory: directory, ingest: stack.endpoints.ingest)
        try await waitUntil("the worker has looked for the walk-in", timeout: .seconds(60), interval: .milliseconds(50)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-1.log"))") }
            return try await stack.requests("eto").contains {
                (($0["path"] as? String) ?? "").lowercased().contains("actor.svc/participants/")
            }
        }
        eto.signal(SIGKILL)
        #expect(await eto.waitForExit(timeout: .seconds(10)) != nil)
        eto = try stack.eto("eto-2.log")
        try await waitUntil("the walk-in is recorded", timeout: .seconds(120), interval: .milliseconds(250)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-2.log"))") }
            return !journal(directory, "eto.response.recorded").isEmpty
        }
        // The held-up add lands 30 s after it was sent. The redelivery comes once the broker
        // has taken the killed member's delivery back (its disconnect, or the group's liveness of
        // 3 s), finds no one yet, and waits (the add in doubt, 40 s) before it looks again. The
        // 30 s leave room for a loaded machine: with 8 s, a CI run's restart took long enough
        // that the add had landed before the redelivery looked.
        let (people, _, eventIDs) = try await quinteros(stack.base)
        #expect(people.count == 1, "\(people.map(\.id))")
        #expect(eventIDs == ids)
        let created = journal(directory, "eto.participant.created")
        #expect(created.count == 1 && created.first?["created"] as? Bool == false, "\(created)")
        #expect(programs.read("eto-2.log").contains("eto-add-in-doubt"), "the redelivery waited before adding")
        eto.signal(SIGTERM)
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto-2.log"))")
    }

    @Test("two kiosks' offline walk-ins of the same person (same ordering key) make one ETO participant and two responses")
    func twoProducersOnePerson() async throws {
        let directory = try TemporaryDirectory("eto-walkin-two")
        defer { directory.remove() }
        let stack = try await WorkerProcessTests().stack(directory)
        let programs = stack.programs
        defer { stack.stop() }
        var second = Self.rosa
        second.kioskID = "desk-2"
        second.checkedInAt = "2026-11-22T21:05:00Z"
        #expect(CheckInForm.orderingKey(Self.rosa) == CheckInForm.orderingKey(second))
        // Both are journaled before the worker starts: the group could hand it both at once, but
        // for their shared key.
        var ids = try await publish([Self.rosa], as: "desk-1", directory: directory, ingest: stack.endpoints.ingest)
        ids += try await publish([second], as: "desk-2", directory: directory, ingest: stack.endpoints.ingest)
        let eto = try stack.eto("eto.log")
        try await waitUntil("both walk-ins are recorded", timeout: .seconds(90), interval: .milliseconds(250)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto.log"))") }
            return journal(directory, "eto.response.recorded").count >= 2
        }
        let (people, enrolled, eventIDs) = try await quinteros(stack.base)
        #expect(people.count == 1, "\(people.map(\.id))")
        #expect(enrolled == people.map(\.id))
        #expect(Set(eventIDs) == Set(ids) && eventIDs.count == 2)
        let created = journal(directory, "eto.participant.created").compactMap { $0["created"] as? Bool }
        #expect(created.sorted { !$0 && $1 } == [false, true], "one made, one found: \(created)")
        eto.signal(SIGTERM)
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto.log"))")
    }

    func list(_ client: ServiceClient, _ query: ETOServiceContent.RosterQuery) async throws -> ETOServiceContent.Roster {
        let reply = try await client.request(service: "eto", operation: "participants.list", content: try WireJSON.encode(query))
        return try JSONDecoder().decode(ETOServiceContent.Roster.self, from: reply.content)
    }

    /// Every page of a listing: the ids, the number of pages, the mark (the same on every page).
    func listAll(_ client: ServiceClient, since: String? = nil, limit: Int) async throws -> (ids: [Int], pages: Int, mark: String) {
        var ids: [Int] = []
        var after: String? = nil
        var pages = 0
        var marks: Set<String> = []
        while true {
            let page = try await list(client, .init(siteID: 101, since: since, after: after, limit: limit))
            pages += 1
            ids += page.participants.map(\.participantID)
            marks.insert(page.mark)
            #expect(page.next == nil || page.participants.count == limit)
            guard let next = page.next else { break }
            after = next
        }
        #expect(marks.count == 1, "every page of a listing has the first page's mark: \(marks)")
        return (ids, pages, marks.first ?? "")
    }

    /// The failure of a request that must be refused; nil when it was answered.
    func refusal(_ client: ServiceClient, _ content: String) async -> (status: Int, failure: ServiceFailure)? {
        do {
            _ = try await client.request(service: "eto", operation: "participants.list", content: Data(content.utf8))
            return nil
        } catch {
            guard case .serviceError(let status, let failure) = error else {
                return (0, ServiceFailure(code: "other", message: "\(error)"))
            }
            return (status, failure)
        }
    }

    /// The event ids in subject 5000's (Ana's) responses to TouchPoint 54.
    func anaEventIDs(_ base: String) async throws -> [String] {
        let http = try SwitchboardHTTPClient(logger: Logger(label: "reader"))
        let client = ETOClient(http: http, baseURL: base + "/API", logger: Logger(label: "reader"))
        do {
            let session = CredentialSource<ETO.SiteSession>.fixed(
                try await client.logIn(
                    ETO.Account(email: WorkerProcessTests.etoEmail, password: WorkerProcessTests.etoPassword, siteID: 101)))
            let responses = try await client.touchPointResponses(subjectID: 5000, touchPointID: 54, auth: session)
            try await http.shutdown()
            return responses.flatMap { $0.elements.filter { $0.elementID == 822 }.compactMap(\.value) }
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    @Test(
        "through the broker, a check-in's first delivery is written without listing the participant's responses; a worker killed -9 mid-write leaves one response, found by the redelivery's look"
    )
    func firstDeliveryAndKilledWrite() async throws {
        let directory = try TemporaryDirectory("eto-first-delivery")
        defer { directory.remove() }
        let stack = try await WorkerProcessTests().stack(directory)
        let programs = stack.programs
        defer { stack.stop() }
        var eto = try stack.eto("eto-1.log")
        func listCalls() async throws -> Int {
            try await stack.requests("eto").filter { (($0["path"] as? String) ?? "").contains("ListTouchPointResponses") }.count
        }
        func recorded(_ id: String) -> [[String: Any]] {
            journal(directory, "eto.response.recorded").filter { $0["event_id"] as? String == id }
        }
        // The group is made by the worker's JOIN: an event journaled before it could have been
        // delivered by an earlier group of that name, so only events after it are `first`.
        try await waitUntil("the worker has joined its group", timeout: .seconds(60), interval: .milliseconds(50)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-1.log"))") }
            return programs.read("eto-1.log").contains("joined the group")
        }
        var ana = CheckIn(
            participant: .init(etoParticipantID: 1000), siteID: 101, programID: 792, kioskID: "desk-1", checkedInAt: "2026-11-22T21:04:00Z")
        let first = try await publish([ana], as: "desk-1", directory: directory, ingest: stack.endpoints.ingest)
        try await waitUntil("the check-in is recorded", timeout: .seconds(60), interval: .milliseconds(100)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-1.log"))") }
            return !recorded(first[0]).isEmpty
        }
        let paths = try await stack.requests("eto").map { ($0["path"] as? String) ?? "" }
        #expect(try await listCalls() == 0, "the first delivery (DELIVER first: true) does not list Ana's responses: \(paths)")
        #expect(recorded(first[0]).first?["created"] as? Bool == true)

        // The next write is held up 1.5 s in the emulator, which lands it all the same; the
        // worker is killed -9 once the emulator holds it, before its answer (and before the
        // worker remembers the response). The broker gives the event to the restarted worker
        // after the liveness (3 s), as attempt 2: it looks, and finds the write.
        try await stack.fault(
            #"{"api": "eto", "method": "POST", "path": "/*TouchPointResponseAdd*", "kind": "latency", "latency_ms": 1500, "count": 1}"#)
        ana.checkedInAt = "2026-11-23T21:04:00Z"
        let second = try await publish([ana], as: "desk-2", directory: directory, ingest: stack.endpoints.ingest)
        try await waitUntil("the emulator holds the write", timeout: .seconds(60), interval: .milliseconds(10)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-1.log"))") }
            let rules = try JSONSerialization.jsonObject(with: try await stack.control(.get, "faults")) as? [[String: Any]] ?? []
            return rules.contains { ($0["injected"] as? Int ?? 0) >= 1 }
        }
        eto.signal(SIGKILL)
        #expect(await eto.waitForExit(timeout: .seconds(10)) != nil)
        eto = try stack.eto("eto-2.log")
        try await waitUntil("the second check-in is recorded", timeout: .seconds(90), interval: .milliseconds(250)) {
            guard eto.isRunning else { throw WaitTimedOut(description: "eto exited: \(programs.read("eto-2.log"))") }
            return !recorded(second[0]).isEmpty
        }
        #expect(try await listCalls() >= 1, "the redelivery (attempt 2) looked")
        #expect(recorded(second[0]).first?["created"] as? Bool == false, "the look found the write the killed worker sent")
        let ids = try await anaEventIDs(stack.base)
        #expect(ids.filter { $0 == first[0] }.count == 1 && ids.filter { $0 == second[0] }.count == 1, "\(ids)")
        eto.signal(SIGTERM)
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto-2.log"))")
    }

    @Test(
        "participants.list through the service plane: stable pages, next absent on the last, a mark that yields only later changes, 400s naming the field"
    )
    func rosterOverServicePlane() async throws {
        let directory = try TemporaryDirectory("eto-roster")
        defer { directory.remove() }
        let stack = try await WorkerProcessTests().stack(directory)
        let programs = stack.programs
        defer { stack.stop() }
        let eto = try stack.eto("eto.log", extra: ["--no-group"])
        let context = try Context()
        let io = try IOThread(context: context)
        var settings = ServiceClient.Settings()
        settings.timeout = .seconds(20)
        let client = ServiceClient(io: io, endpoint: stack.endpoints.service, settings: settings, logger: Logger(label: "roster"))
        try await waitUntil("eto registers with the broker", timeout: .seconds(30)) { (try? await client.isAlive("eto")) == true }

        let whole = try await listAll(client, limit: 500)
        #expect(whole.pages == 1 && whole.ids.count == 12 && whole.ids == whole.ids.sorted(), "\(whole)")
        let paged = try await listAll(client, limit: 5)
        #expect(paged.ids == whole.ids && paged.pages == 3, "\(paged)")
        let first = try await list(client, .init(siteID: 101, limit: 500))
        let ana = first.participants.first { $0.participantID == 1000 }
        #expect(ana?.firstName == "Ana" && ana?.lastName == "Ortiz" && ana?.dateOfBirth == "1976-02-23", "\(String(describing: ana))")
        let program = try await list(client, .init(siteID: 101, programID: 793, limit: 500))
        #expect(Set(program.participants.map(\.participantID)) == [1000, 1012, 1024])

        // Nothing changed since the mark; then one participant is added in ETO.
        #expect(try await listAll(client, since: whole.mark, limit: 200).ids.isEmpty)
        let http = try SwitchboardHTTPClient(logger: Logger(label: "writer"))
        let writer = ETOClient(http: http, baseURL: stack.base + "/API", logger: Logger(label: "writer"))
        let session = try await writer.logIn(
            ETO.Account(email: WorkerProcessTests.etoEmail, password: WorkerProcessTests.etoPassword, siteID: 101))
        let added = try await writer.addParticipant(
            firstName: "Rosa", lastName: "Quintero", dateOfBirth: Date(timeIntervalSince1970: 641_779_200), gender: .female,
            auth: .fixed(session))
        try await http.shutdown()
        let changes = try await listAll(client, since: whole.mark, limit: 200)
        #expect(changes.ids == [added.id] && changes.mark != whole.mark, "\(changes)")

        let refused: [(String, String)] = [
            (#"{"site_id": 101, "limit": 0}"#, "limit"), (#"{"site_id": 101, "limit": 501}"#, "limit"),
            (#"{"site_id": 101, "after": "page-two"}"#, "after"), (#"{"site_id": 101, "since": "yesterday"}"#, "since"),
            (#"{"site_id": "101"}"#, "site_id"),
        ]
        for (content, field) in refused {
            let answer = await refusal(client, content)
            #expect(answer?.status == 400 && answer?.failure.code == "bad-request", "\(content): \(String(describing: answer))")
            #expect(answer?.failure.message.contains(field) == true, "\(content): \(String(describing: answer))")
        }
        let cursor = "c1.1000.-.\(whole.mark.dropFirst(3))"
        #expect(await refusal(client, #"{"site_id": 101, "after": "\#(cursor)"}"#) == nil, "a cursor of ours is accepted")

        await client.close()
        await io.shutdown()
        await context.terminate()
        eto.signal(SIGTERM)
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto.log"))")
    }
}
