import Foundation
import Logging
import SwitchboardBackends
import SwitchboardBus
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardWorkers

/// `DirectorySyncer` against the real emulator over HTTP, with its real store and a real outbox
/// in a temporary directory: what lands in the Directory and what is queued for the bus.
@Suite("Directory syncer against the emulator")
struct DirectorySyncerTests {
    static let account = "outreach-team"
    static let password = "dir-demo-Passw0rd!"
    /// The seed's people of outreach-team.
    static let seedCount = 3

    struct Fixture: Sendable {
        let emulator: RunningEmulator
        let http: SwitchboardHTTPClient
        let directory: TemporaryDirectory
        let outbox: Outbox
        let syncer: DirectorySyncer
        let key: CredentialSource<Directory.APIKey>

        var client: DirectoryClient { syncer.client }

        func fault(_ json: String) async throws {
            var request = HTTPRequest(.post, emulator.baseURL, path: ["_emulator", "faults"], api: .generic("control"), operation: "fault")
            request.body = .raw(Data(json.utf8), contentType: "application/json")
            try await http.response(for: request).requireSuccess()
        }

        /// The events queued so far: type and decoded content.
        func queued() async throws -> [(type: String, content: [String: Any])] {
            try await outbox.pending(limit: 10_000).map { entry in
                (entry.type, (try JSONSerialization.jsonObject(with: entry.content) as? [String: Any]) ?? [:])
            }
        }

        func people() async throws -> [Directory.Person] { try await client.people(auth: key) }
    }

    func withSyncer<T: Sendable>(maxMissing: Double = 0.5, _ body: @Sendable (Fixture) async throws -> T) async throws -> T {
        try await withEmulator { emulator in
            let logs = LogCapture()
            let directory = try TemporaryDirectory("directory-syncer")
            defer { directory.remove() }
            let http = try SwitchboardHTTPClient(
                configuration: .init(retryPolicy: RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(1), maxDelay: .milliseconds(2))),
                logger: logs.logger)
            do {
                let client = DirectoryClient(http: http, baseURL: emulator.baseURL + "/directory", logger: logs.logger)
                let key = CredentialSource<Directory.APIKey>.provider { _, _ in
                    try await client.logIn(user: Self.account, password: Self.password)
                }
                let outbox = try Outbox(path: directory.path("state/events-outbox.sqlite"), producer: "directory-worker")
                let store = try DirectorySyncStore(path: directory.path("state/directory-sync.sqlite"))
                let syncer = DirectorySyncer(
                    client: client, key: key, account: Self.account, store: store, guard: DirectoryGuard(maxMissing: maxMissing),
                    logger: logs.logger
                ) { events in _ = try await outbox.enqueue(events) }
                let value = try await body(
                    Fixture(emulator: emulator, http: http, directory: directory, outbox: outbox, syncer: syncer, key: key))
                #expect(!logs.all.joined(separator: "\n").contains(Self.password), "a log line shows the password")
                try await http.shutdown()
                return value
            } catch {
                try? await http.shutdown()
                throw error
            }
        }
    }

    func event(_ type: String, _ content: some Encodable, id: String = UUIDv7.string(), producer: String = "kiosk-1") throws -> WorkerEvent
    {
        WorkerEvent(
            header: EventHeader(
                eventID: id, type: type, producer: producer, producerSeq: 1, busSeq: 9, schema: "\(type)/1", session: "s"),
            content: try WireJSON.encode(content))
    }

    @Test(
        "the first poll publishes the list; a person added and one removed in the Directory are one fact each; an unchanged list publishes nothing"
    )
    func pollPublishesFacts() async throws {
        try await withSyncer { f in
            guard case .decided(.accept(let first)) = await f.syncer.poll() else { throw Failure("first poll not accepted") }
            #expect(first.first && first.created.count == Self.seedCount)
            var queued = try await f.queued()
            #expect(
                queued.count == Self.seedCount
                    && queued.allSatisfy { $0.type == "person.created" && $0.content["source"] as? String == "directory" })
            #expect(Set(queued.compactMap { $0.content["person_id"] as? Int }) == [1, 2, 3])

            let added = try await f.client.addPerson(name: "Eve Stone", office: "Harbor Family Center", auth: f.key)
            try await f.client.deletePerson(id: 2, auth: f.key)
            await f.syncer.poll()
            queued = Array(try await f.queued().dropFirst(Self.seedCount))
            #expect(queued.count == 2)
            #expect(queued.first?.type == "person.created" && queued.first?.content["person_id"] as? Int == added.id)
            #expect(queued.first?.content["name"] as? String == "Eve Stone")
            #expect(queued.last?.type == "person.deleted" && queued.last?.content["person_id"] as? Int == 2)
            #expect(queued.last?.content["name"] as? String == "Ahmed Saleh")
            let keys = try await f.outbox.pending(limit: 100).compactMap { try JSONDecoder().decode(EventHeader.self, from: $0.header).key }
            #expect(keys.last == "directory-person-2")

            #expect(await f.syncer.poll() == .decided(.unchanged))
            #expect(try await f.queued().count == Self.seedCount + 2)
        }
    }

    @Test(
        "a request to add, delivered twice, adds one person and publishes its fact once; the syncer's next poll does not publish it again")
    func addOnce() async throws {
        try await withSyncer { f in
            await f.syncer.poll()
            let request = try event(
                "person.created", PersonCreated(personID: nil, name: "Marcus Bell", office: "Eastside Outreach", source: "operator"))
            #expect(await f.syncer.handle(request) == .done)
            #expect(await f.syncer.handle(request) == .done)
            let marcus = try await f.people().filter { $0.name == "Marcus Bell" }
            #expect(marcus.count == 1)
            #expect(await f.syncer.poll() == .decided(.unchanged))
            let facts = Array(try await f.queued().dropFirst(Self.seedCount))
            #expect(facts.count == 1, "one fact for one add: \(facts.map(\.type))")
            #expect(facts.first?.type == "person.created" && facts.first?.content["person_id"] as? Int == marcus.first?.id)
            #expect(facts.first?.content["source"] as? String == "directory")

            // Another request for the same name and office finds the person there: still one.
            let again = try event(
                "person.created", PersonCreated(personID: nil, name: "Marcus Bell", office: "Eastside Outreach", source: "kiosk"))
            #expect(await f.syncer.handle(again) == .done)
            #expect(try await f.people().filter { $0.name == "Marcus Bell" }.count == 1)
        }
    }

    @Test("an add cut short by a crash after the Directory call is published by the poll as a fact, and its redelivery adds nothing")
    func crashAfterAdd() async throws {
        try await withSyncer { f in
            await f.syncer.poll()
            let request = try event(
                "person.created", PersonCreated(personID: nil, name: "Li Wei", office: "Harbor Family Center", source: "operator"))
            // What handle() does up to the crash: the intent, then the Directory call.
            try await f.syncer.store.begin(
                DirectoryIntent(eventID: request.eventID, action: .add, name: "Li Wei", office: "Harbor Family Center"))
            let li = try await f.client.addPerson(name: "Li Wei", office: "Harbor Family Center", auth: f.key)
            guard case .decided(.accept(let changes)) = await f.syncer.poll() else { throw Failure("poll not accepted") }
            #expect(changes.adopted == [request.eventID: li.id] && changes.created.map(\.id) == [li.id])
            #expect(try await f.queued().count == Self.seedCount + 1)
            #expect(await f.syncer.handle(request) == .done)
            #expect(try await f.people().filter { $0.name == "Li Wei" }.count == 1)
        }
    }

    @Test("a request to delete by id removes the person once and publishes its fact once; the poll adds nothing; a gone person is no error")
    func deleteOnce() async throws {
        try await withSyncer { f in
            await f.syncer.poll()
            let request = try event("person.deleted", PersonDeleted(personID: 3, name: "Nia Owens", office: nil, source: "kiosk"))
            #expect(await f.syncer.handle(request) == .done)
            #expect(try await f.people().map(\.id) == [1, 2])
            #expect(await f.syncer.handle(request) == .done)
            #expect(await f.syncer.poll() == .decided(.unchanged))
            let facts = Array(try await f.queued().dropFirst(Self.seedCount))
            #expect(facts.count == 1 && facts.first?.type == "person.deleted" && facts.first?.content["person_id"] as? Int == 3)
            #expect(facts.first?.content["name"] as? String == "Nia Owens" && facts.first?.content["source"] as? String == "directory")
            // Another request for the same (gone) person: DELETE answers 404, which is done.
            let late = try event("person.deleted", PersonDeleted(personID: 3, name: nil, office: nil, source: "kiosk"))
            #expect(await f.syncer.handle(late) == .done)
        }
    }

    @Test("a delete naming another person than the Directory's is a dead letter; by name and office it needs exactly one match")
    func deleteRefusals() async throws {
        try await withSyncer { f in
            await f.syncer.poll()
            let wrong = try event("person.deleted", PersonDeleted(personID: 1, name: "Nia Owens", office: nil, source: "kiosk"))
            let mismatch = await f.syncer.handle(wrong)
            #expect(mismatch.code == "person-mismatch")
            // Reasons name people by id, never by name (issue 31): not the request's, not the Directory's.
            #expect(
                mismatch
                    == .deadLetter(
                        code: "person-mismatch", message: "Directory person 1 has another name than the request's; nothing was deleted"),
                "\(mismatch)")
            let nobody = try event("person.deleted", PersonDeleted(personID: nil, name: "Nobody", office: "Nowhere", source: "kiosk"))
            let unmatched = await f.syncer.handle(nobody)
            #expect(
                unmatched
                    == .deadLetter(code: "person-unmatched", message: "no Directory person at office 'Nowhere' has the request's name"),
                "\(unmatched)")
            _ = try await f.client.addPerson(name: "Grace Lin", office: "Riverside Emergency Shelter", auth: f.key)
            let twins = try event(
                "person.deleted", PersonDeleted(personID: nil, name: "Grace Lin", office: "Riverside Emergency Shelter", source: "kiosk"))
            let settlement = await f.syncer.handle(twins)
            #expect(settlement.code == "person-unmatched" && "\(settlement)".contains("ids 1, "))
            #expect(!"\(settlement)".contains("Grace") && !"\(settlement)".contains("Lin "), "\(settlement)")
            let byName = try event(
                "person.deleted", PersonDeleted(personID: nil, name: "Nia Owens", office: "Street Outreach, van 2", source: "kiosk"))
            #expect(await f.syncer.handle(byName) == .done)
            #expect(try await f.people().contains { $0.id == 3 } == false)
            #expect(try await f.people().count == 3)
        }
    }

    @Test("facts, the syncer's own included, are acknowledged without touching the Directory; bad requests are dead letters")
    func factsAndBadContent() async throws {
        try await withSyncer { f in
            let fact = try event(
                "person.deleted", PersonDeleted(personID: 1, name: "Grace Lin", office: "Riverside Emergency Shelter", source: "directory"),
                producer: "directory-worker")
            #expect(await f.syncer.handle(fact) == .done)
            let created = try event("person.created", PersonCreated(personID: 1, name: "Grace Lin", office: "X", source: "directory"))
            #expect(await f.syncer.handle(created) == .done)
            #expect(try await f.people().count == Self.seedCount)
            let withID = try event("person.created", PersonCreated(personID: 9, name: "Zed", office: "X", source: "operator"))
            #expect(await f.syncer.handle(withID).code == "invalid-content")
            let blank = try event("person.created", PersonCreated(personID: nil, name: " ", office: "X", source: "operator"))
            #expect(await f.syncer.handle(blank).code == "invalid-content")
            var garbled = try event("person.created", ["name": 5])
            garbled.content = Data("{\"name\":5}".utf8)
            #expect(await f.syncer.handle(garbled).code == "invalid-content")
        }
    }

    @Test("an empty list once is held back (directory.sync.suspect, no deletes); the list back to normal publishes nothing")
    func guardHoldsATransientEmptyList() async throws {
        try await withSyncer { f in
            await f.syncer.poll()
            try await f.fault(#"{"api":"directory","method":"GET","path":"/directory/people/*","kind":"body","body":[],"count":1}"#)
            #expect(await f.syncer.poll() == .decided(.hold(list: [], previous: Self.seedCount, missing: Self.seedCount)))
            var queued = try await f.queued()
            #expect(queued.count == Self.seedCount + 1)
            #expect(queued.last?.type == "directory.sync.suspect")
            #expect(queued.last?.content["missing"] as? Int == Self.seedCount && queued.last?.content["previous"] as? Int == Self.seedCount)
            #expect(await f.syncer.poll() == .decided(.accept(PollChanges(snapshot: try await f.syncer.store.snapshot() ?? []))))
            queued = try await f.queued()
            #expect(!queued.contains { $0.type == "person.deleted" })
            #expect(try await f.syncer.store.snapshot()?.count == Self.seedCount)
        }
    }

    @Test("an emptied list confirmed by the next poll publishes the deletes; a request is not applied on a suspect list")
    func guardConfirmed() async throws {
        try await withSyncer { f in
            await f.syncer.poll()
            for id in 1...3 { try await f.client.deletePerson(id: id, auth: f.key) }
            let request = try event(
                "person.created", PersonCreated(personID: nil, name: "Marcus Bell", office: "Eastside", source: "operator"))
            #expect(await f.syncer.handle(request).code == "directory-suspect")
            #expect(try await f.people().isEmpty)
            guard case .decided(.hold) = await f.syncer.poll() else { throw Failure("not held back") }
            #expect(try await f.queued().filter { $0.type == "person.deleted" }.isEmpty)
            guard case .decided(.accept(let changes)) = await f.syncer.poll() else { throw Failure("not confirmed") }
            #expect(changes.confirmed && changes.deleted.map(\.id) == [1, 2, 3])
            #expect(try await f.queued().filter { $0.type == "person.deleted" }.count == 3)
            #expect(await f.syncer.handle(request) == .done)
        }
    }

    @Test("a Directory failure is settled by kind: 5xx retried, 4xx a dead letter; a failed poll changes nothing")
    func failures() async throws {
        try await withSyncer { f in
            await f.syncer.poll()
            try await f.fault(#"{"api":"directory","method":"GET","path":"/directory/people/*","kind":"status","status":503,"count":2}"#)
            guard case .failed = await f.syncer.poll() else { throw Failure("a 503 poll must fail") }
            #expect(try await f.syncer.store.snapshot()?.count == Self.seedCount)
            try await f.fault(#"{"api":"directory","method":"POST","path":"/directory/people/*","kind":"status","status":400,"count":1}"#)
            let request = try event(
                "person.created", PersonCreated(personID: nil, name: "Marcus Bell", office: "Eastside", source: "operator"))
            #expect(await f.syncer.handle(request).code == "directory-http-400")
            try await f.fault(#"{"api":"directory","method":"POST","path":"/directory/people/*","kind":"status","status":503,"count":1}"#)
            #expect(await f.syncer.handle(request).code == "directory-http-503")
            #expect(await f.syncer.handle(request) == .done)
            #expect(try await f.people().filter { $0.name == "Marcus Bell" }.count == 1)
        }
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
