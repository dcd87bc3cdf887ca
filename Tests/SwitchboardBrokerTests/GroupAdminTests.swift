import Foundation
import GRDB
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// Operators' requests on the groups endpoint, through `GroupAdminClient`, against a real broker.
@Suite("Consumer groups: operators' requests (GroupAdminClient against a broker)")
struct GroupAdminTests {
    static func publish(_ fixture: BrokerFixture, count: Int, from first: Int64 = 1) async throws -> [EventHeader] {
        let producer = try await fixture.producer()
        var headers: [EventHeader] = []
        for seq in first..<(first + Int64(count)) {
            let (header, frames) = try Events.frames(seq: seq)
            #expect(try await Events.exchange(producer, frames).command == .ack)
            headers.append(header)
        }
        await producer.close()
        return headers
    }

    /// The members in these tests are raw sockets that never heartbeat: a long liveness keeps
    /// them members however long a loaded machine delays the test (these tests are not about
    /// liveness; `GroupStateTests` and `GroupInputTests` are).
    static func patient(_ configuration: inout BrokerConfiguration) {
        configuration.groupLiveness = .seconds(120)
    }

    /// The `groups.changed` events journaled so far, as objects.
    static func audits(_ fixture: BrokerFixture) throws -> [[String: JSONValue]] {
        try JournalFile.contents(at: fixture.directory.path("broker/journal.sqlite"), type: "groups.changed").compactMap {
            JSONValue.parse(Data($0.utf8))?.object
        }
    }

    /// Dead, replayed, dropped.
    static func counts(_ group: GroupInfo) -> [Int] {
        [group.deadLetters.dead, group.deadLetters.replayed, group.deadLetters.dropped]
    }

    static func text(_ object: [String: JSONValue], _ key: String) -> String? {
        if case .string(let value)? = object[key] { return value }
        return nil
    }

    @Test("create, list, reset and delete; creating again is idempotent, other topics are a conflict, an unknown group is 404")
    func lifecycle() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        _ = try await Self.publish(fixture, count: 3)
        let admin = fixture.groupsClient()
        #expect(try await admin.groups().isEmpty)

        let created = try await admin.createGroup("filemaker", topics: ["checkin."])
        #expect(created.name == "filemaker" && created.topics == ["checkin."] && created.start == "earliest")
        #expect(created.cursor == 0 && created.head == 3 && created.lag == 3, "\(created)")
        #expect(Self.counts(created) == [0, 0, 0] && created.members.isEmpty)
        let again = try await admin.createGroup("filemaker", topics: ["checkin."], start: .head)
        #expect(again.start == "earliest" && again.cursor == 0, "an existing group is left as it is")
        let conflict = await #expect(throws: GroupAdminError.self) { try await admin.createGroup("filemaker", topics: ["person."]) }
        #expect(conflict?.kind == .refused && conflict?.status == 409 && conflict?.code == "conflict", "\(String(describing: conflict))")

        let eto = try await admin.createGroup("eto", topics: ["checkin.", "person."], start: .head)
        // The head has moved past the check-ins: the `groups.changed` event of filemaker's creation is journaled too.
        #expect(eto.head > 3 && eto.cursor == eto.head && eto.lag == 0 && eto.start == "head", "\(eto)")
        #expect(try await admin.groups().map(\.name) == ["eto", "filemaker"])

        let back = try await admin.resetGroup("eto", start: .sequence(2))
        #expect(back.cursor == 1 && back.lag == 2 && back.start == "2", "\(back)")
        let ahead = try await admin.resetGroup("filemaker", start: .head)
        #expect(ahead.cursor == ahead.head && ahead.lag == 0 && ahead.start == "head", "\(ahead)")

        try await admin.deleteGroup("eto")
        #expect(try await admin.groups().map(\.name) == ["filemaker"])
        let missing = await #expect(throws: GroupAdminError.self) { try await admin.deleteGroup("eto") }
        #expect(missing?.description == "group 'eto' not found (404 not-found)", "\(String(describing: missing))")
        let calls: [() async throws -> Void] = [
            { _ = try await admin.resetGroup("eto") },
            { _ = try await admin.deadLetters(group: "eto") },
            { _ = try await admin.deadLetter(group: "eto", busSeq: 1) },
            { _ = try await admin.replay(group: "eto", .all) },
        ]
        for call in calls {
            let error = await #expect(throws: GroupAdminError.self) { try await call() }
            #expect(error?.status == 404 && error?.code == "not-found" && error?.message == "group 'eto' not found")
        }

        // Every change is journaled, naming who asked ("-": no CURVE, no principal).
        try await waitUntil("five groups.changed events") { try Self.audits(fixture).count == 5 }
        let audits = try Self.audits(fixture)
        #expect(
            audits.map { "\(Self.text($0, "action") ?? "?") \(Self.text($0, "group") ?? "?")" } == [
                "created filemaker", "created eto", "reset eto", "reset filemaker", "deleted eto",
            ])
        #expect(audits.allSatisfy { Self.text($0, "by") == "-" && Self.text($0, "at") != nil })
        await fixture.stop()
    }

    @Test("bad content is refused with 422 naming the field; an unknown operation is 404")
    func badContent() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let admin = fixture.groupsClient()
        _ = try await admin.createGroup("filemaker", topics: ["checkin."])
        let cases: [(String, JSONValue, String)] = [
            ("groups.create", .object(["group": .string("filemaker")]), "'topics' is required"),
            ("groups.create", .object(["group": .string("File Maker"), "topics": .array([.string("checkin.")])]), "'group'"),
            ("groups.create", .object(["topics": .array([.string("checkin.")])]), "'group' is required"),
            ("groups.create", .object(["group": .string("eto"), "topics": .array([])]), "'topics'"),
            (
                "groups.create", .object(["group": .string("eto"), "topics": .array([.string("checkin.")]), "start": .string("soon")]),
                "'start'"
            ),
            ("groups.reset", .object(["group": .string("filemaker"), "start": .integer(0)]), "'start'"),
            ("dlq.list", .object(["state": .string("zombie")]), "'state'"),
            ("dlq.list", .object(["state": .integer(1)]), "'state'"),
            ("dlq.show", .object(["group": .string("filemaker")]), "'bus_seq' is required"),
            ("dlq.show", .object(["group": .string("filemaker"), "bus_seq": .integer(0)]), "'bus_seq' must be at least 1"),
            ("dlq.show", .object(["group": .string("filemaker"), "bus_seq": .string("1")]), "'bus_seq'"),
            ("dlq.replay", .object(["group": .string("filemaker")]), "'bus_seq'"),
            ("dlq.drop", .object(["group": .string("filemaker"), "bus_seq": .integer(1), "all": .bool(true)]), "'bus_seq'"),
            ("groups.list", .array([]), "content must be a JSON object"),
        ]
        for (operation, content, expected) in cases {
            let error = await #expect(throws: GroupAdminError.self, "\(operation) \(content)") {
                _ = try await admin.request(operation, content)
            }
            #expect(error?.status == 422 && error?.code == "invalid-content", "\(operation): \(String(describing: error))")
            #expect(error?.message.contains(expected) == true, "\(operation): \(String(describing: error))")
        }
        let unknown = await #expect(throws: GroupAdminError.self) { _ = try await admin.request("groups.rename") }
        #expect(unknown?.status == 404 && unknown?.code == "unknown-operation")
        let absent = await #expect(throws: GroupAdminError.self) { _ = try await admin.deadLetter(group: "filemaker", busSeq: 7) }
        #expect(absent?.status == 404 && absent?.message == "group 'filemaker' has no dead letter for bus_seq 7")
        await fixture.stop()
    }

    @Test(
        "dlq.list pages: 1,500 dead letters with long messages come back in pages under the reply limit, each once, oldest or newest first, with the counts of all by code"
    )
    func deadLetterPages() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let count = 1500
        _ = try await Self.publish(fixture, count: count)
        let member = try await fixture.groupPeer()
        _ = try await GroupWire.joined(JoinHeader(group: "eto", topics: ["checkin."], credit: 200, member: "eto-1"), on: member)
        // Messages of 900 characters: a page of 1,000 would be about 1 MB, more than a client takes.
        let message = String(repeating: "m", count: 900)
        for _ in 0..<count {
            let (delivery, _) = try await GroupWire.delivery(on: member)
            let code = delivery.busSeq % 3 == 0 ? "eto-http-400" : "participant-unmatched"
            try await member.send(
                GroupWire.settle(SettleHeader(.term, group: "eto", busSeq: delivery.busSeq, attempt: 1, code: code, message: message)))
        }
        let admin = fixture.groupsClient(timeout: .seconds(20))
        try await waitUntil("every dead letter is recorded", timeout: .seconds(30)) {
            try await admin.deadLetterPage(limit: 1).total == count
        }
        let first = try await admin.deadLetterPage(limit: 1000)
        #expect(first.total == count && first.byCode == ["eto-http-400": 500, "participant-unmatched": 1000])
        #expect(first.deadLetters.count < 1000 && first.next != nil, "the page stops at the reply's size, not at 1,000")
        var seen: [Int64] = []
        var pages = 0
        let all = try await admin.deadLetters(pageSize: 1000) { _ in pages += 1 }
        seen = all.map(\.busSeq)
        #expect(seen == Array(1...Int64(count)), "every dead letter once, oldest first")
        #expect(pages > 1)
        let newest = try await admin.deadLetterPage(newest: true, limit: 3)
        #expect(newest.deadLetters.map(\.busSeq) == [1500, 1499, 1498])
        let after = try await admin.deadLetterPage(newest: true, limit: 3, after: newest.next)
        #expect(after.deadLetters.map(\.busSeq) == [1497, 1496, 1495])
        let filtered = try await admin.deadLetterPage(group: "eto", state: .replayed)
        #expect(filtered.total == 0 && filtered.deadLetters.isEmpty && filtered.next == nil)
        // Bulk, by code, in steps: each of one code's 500 replayed once, the other code's left.
        var steps: [(Int, Int)] = []
        let replayed = try await admin.settleAll(replay: true, group: "eto", code: "eto-http-400", step: 200) { steps.append(($0, $1)) }
        #expect(replayed.count == 500 && Set(replayed).count == 500 && replayed.allSatisfy { $0 % 3 == 0 })
        #expect(steps.map(\.0) == [200, 400, 500] && steps.last?.1 == 0, "\(steps)")
        let left = try await admin.deadLetterPage(limit: 1)
        #expect(left.total == 1000 && left.byCode == ["participant-unmatched": 1000])
        let none = await #expect(throws: GroupAdminError.self, "nothing is older than 1970") {
            _ = try await admin.settleAll(replay: false, group: "eto", before: Date(timeIntervalSince1970: 0))
        }
        #expect(none?.status == 404)

        // The request vectors of protocol/vectors/groups: the valid ones answered, the others 422
        // naming their field.
        let folder = Vectors.directory.appendingPathComponent("groups")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("dlq-list-request-") }.sorted()
        #expect(names.count >= 5)
        for name in names {
            let vector = try #require(JSONValue.parse(try Data(contentsOf: folder.appendingPathComponent(name)))?.object)
            let content = try #require(vector["content"])
            let expect = try #require(vector["expect"]?.object)
            if expect["valid"] == .bool(true) {
                _ = try await admin.request("dlq.list", content)
            } else {
                let refused = await #expect(throws: GroupAdminError.self, "\(name)") { _ = try await admin.request("dlq.list", content) }
                guard case .string(let field)? = expect["field"] else { continue }
                #expect(
                    refused?.status == 422 && refused?.message.contains("'\(field)'") == true, "\(name): \(String(describing: refused))")
            }
        }
        await member.close()
        await fixture.stop()
    }

    @Test(
        "a member's TERM makes a dead letter: dlq.list and dlq.show see it, dlq.replay delivers it again from attempt 1, dlq.drop ends it")
    func deadLetters() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let published = try await Self.publish(fixture, count: 1)
        let member = try await fixture.groupPeer()
        let joined = try await GroupWire.joined(JoinHeader(group: "filemaker", topics: ["checkin."], credit: 1, member: "fm-1"), on: member)
        #expect(joined.group == "filemaker" && joined.member == "fm-1")
        let (first, event) = try await GroupWire.delivery(on: member)
        #expect(first.busSeq == 1 && first.attempt == 1)
        #expect(try JSONDecoder().decode(EventHeader.self, from: event.parent).eventID == published[0].eventID)
        try await member.send(
            GroupWire.settle(
                SettleHeader(.term, group: "filemaker", busSeq: 1, attempt: 1, code: "bad-data", message: "date of birth is in the future"))
        )

        let admin = fixture.groupsClient()
        try await waitUntil("the dead letter is listed") { try await admin.deadLetters().count == 1 }
        let letter = try #require(try await admin.deadLetters(group: "filemaker").first)
        #expect(letter.group == "filemaker" && letter.busSeq == 1 && letter.eventID == published[0].eventID)
        #expect(letter.type == CheckIn.type && letter.attempts == 1 && letter.code == "bad-data" && letter.state == .dead)
        #expect(letter.message == "date of birth is in the future" && (letter.dlqSeq ?? 0) > 1 && Timestamp.parse(letter.at) != nil)
        let group = try #require(try await admin.groups().first)
        #expect(group.deadLetters.dead == 1 && group.pending == 0 && group.lag == 0, "\(group)")
        #expect(group.members.map { "\($0.name) \($0.inFlight)/\($0.credit)" } == ["fm-1 0/1"])
        // The dlq.<group> event reports it too (no payload in it).
        let reported = try JournalFile.contents(at: fixture.directory.path("broker/journal.sqlite"), type: "dlq.filemaker")
        #expect(reported.count == 1 && reported[0].contains("\"code\":\"bad-data\"") && !reported[0].contains("Ana"))

        let detail = try await admin.deadLetter(group: "filemaker", busSeq: 1)
        #expect(detail.letter == letter)
        let content = try JSONDecoder().decode(CheckIn.self, from: try #require(detail.eventContent))
        #expect(content.participant.firstName == "Ana")
        #expect(try JSONDecoder().decode(EventHeader.self, from: try #require(detail.eventHeader)).eventID == published[0].eventID)

        #expect(try await admin.replay(group: "filemaker", .busSeq(1)) == [1])
        let (again, _) = try await GroupWire.delivery(on: member)
        #expect(again.busSeq == 1 && again.attempt == 1, "a replay counts from attempt 1")
        try await member.send(GroupWire.settle(SettleHeader(.ack, group: "filemaker", busSeq: 1, attempt: 1)))
        #expect(try await admin.deadLetters().isEmpty)
        #expect(try await admin.deadLetters(state: .replayed).map(\.busSeq) == [1])
        let replayedAgain = await #expect(throws: GroupAdminError.self) { _ = try await admin.replay(group: "filemaker", .busSeq(1)) }
        #expect(replayedAgain?.status == 404, "only a dead letter in state dead can be replayed")

        // A second one, dropped with --all.
        let second = try await Self.publish(fixture, count: 1, from: 2)
        let (next, nextEvent) = try await GroupWire.delivery(on: member)
        #expect(try JSONDecoder().decode(EventHeader.self, from: nextEvent.parent).eventID == second[0].eventID)
        try await member.send(GroupWire.settle(SettleHeader(.term, group: "filemaker", busSeq: next.busSeq, attempt: 1, code: "duplicate")))
        try await waitUntil("the second dead letter") { try await admin.deadLetters(group: "filemaker").count == 1 }
        #expect(try await admin.drop(group: "filemaker", .all) == [next.busSeq])
        #expect(try await admin.deadLetters().isEmpty)
        #expect(try await admin.deadLetters(state: nil).map(\.state) == [.replayed, .dropped])
        #expect(Self.counts(try #require(try await admin.groups().first)) == [0, 1, 1])

        // The group's creation by the member's JOIN is audited too.
        try await waitUntil("the replay and the drop are journaled") { try Self.audits(fixture).count == 3 }
        let audits = Array(try Self.audits(fixture).dropFirst())
        #expect(try Self.audits(fixture).first.map { Self.text($0, "action") } == "created")
        #expect(audits.map { Self.text($0, "action") } == ["dlq-replayed", "dlq-dropped"])
        #expect(audits.map { $0["bus_seq"] } == [.integer(1), .integer(next.busSeq)])
        #expect(audits.allSatisfy { Self.text($0, "group") == "filemaker" && Self.text($0, "by") == "-" })
        await member.close()
        await fixture.stop()
    }

    @Test(
        "dlq.show, dlq.replay and dlq.drop by bus_seq find one dead letter among 120,000 by the journal's key, not by listing (the 100,000 listed before missed it)"
    )
    func oneAmongMany() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let admin = fixture.groupsClient(timeout: .seconds(20))
        _ = try await admin.createGroup("eto", topics: ["checkin."])
        // 120,000 dead letters written straight into the journal file while the broker is stopped
        // (making them one TERM at a time would take minutes).
        await fixture.stop(remove: false)
        let count: Int64 = 120_000
        do {
            let journal = try Journal(path: fixture.directory.path("broker/journal.sqlite"))
            try await journal.queue.write { db in
                let insert = try db.makeStatement(
                    sql: """
                        INSERT INTO dead_letters (grp, bus_seq, dlq_seq, event_id, type, key, attempts, code, message, at, state)
                        VALUES ('eto', ?, NULL, ?, 'checkin.recorded', 'participant:1', 1, 'bad-data', '', ?, 'dead')
                        """)
                for seq in 1...count {
                    try insert.execute(arguments: [seq, "01J0000000000000000\(seq)", 1_700_000_000_000 + seq])
                }
            }
        }
        let again = try await BrokerFixture.start(directory: fixture.directory, Self.patient)
        let client = again.groupsClient(timeout: .seconds(20))
        #expect(try await client.deadLetterPage(group: "eto", limit: 1).total == Int(count))
        let started = ContinuousClock.now
        let shown = try await client.deadLetter(group: "eto", busSeq: count)
        #expect(shown.letter.busSeq == count && shown.letter.state == .dead)
        #expect(try await client.drop(group: "eto", .busSeq(count - 1)) == [count - 1])
        #expect(try await client.deadLetter(group: "eto", busSeq: count - 1).letter.state == .dropped)
        // Found, but its event was never journaled: 409, not the 404 of a dead letter not found.
        let gone = await #expect(throws: GroupAdminError.self) { _ = try await client.replay(group: "eto", .busSeq(count - 2)) }
        #expect(gone?.status == 409, "\(String(describing: gone))")
        // Not a timed assertion (the machine is shared): the figure is printed for people.
        print("three look-ups among 120,000 dead letters took \(started.duration(to: .now))")
        let missing = await #expect(throws: GroupAdminError.self) { _ = try await client.deadLetter(group: "eto", busSeq: count + 1) }
        #expect(missing?.status == 404)
        let settled = await #expect(throws: GroupAdminError.self, "a dropped one is not waiting") {
            _ = try await client.drop(group: "eto", .busSeq(count - 1))
        }
        #expect(settled?.status == 404)
        await again.stop()
    }

    @Test("groups.list counts a dead letter made by a TERM just before it, in the same loop iteration")
    func listAfterTerm() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        _ = try await Self.publish(fixture, count: 1)
        // One socket sends the TERM and then the request, so the broker reads them in that order.
        let member = try await fixture.groupPeer()
        _ = try await GroupWire.joined(JoinHeader(group: "filemaker", topics: ["checkin."], credit: 1), on: member)
        let (delivery, _) = try await GroupWire.delivery(on: member)
        let request = RequestHeader(operation: "groups.list", timeoutMilliseconds: 5000)
        try await member.send(
            GroupWire.settle(SettleHeader(.term, group: "filemaker", busSeq: delivery.busSeq, attempt: delivery.attempt, code: "bad-data")))
        try await member.send(Envelope(command: .request, header: try WireJSON.encode(request)).frames())
        let reply = try await GroupWire.next(.reply, on: member)
        #expect(try reply.decodeHeader(ReplyHeader.self).requestID == request.requestID)
        let listed = try JSONDecoder().decode([String: [GroupInfo]].self, from: reply.content)
        #expect(listed["groups"]?.first?.deadLetters.dead == 1, "\(String(decoding: reply.content, as: UTF8.self))")
        await member.close()
        await fixture.stop()
    }

    @Test("no broker at the endpoint: the request times out in its own time with a message naming the endpoint")
    func timeout() async throws {
        let directory = try TemporaryDirectory("groups-nobody")
        defer { directory.remove() }
        let context = try Context()
        let io = try IOThread(context: context)
        let endpoint = "ipc://\(directory.path("nobody"))"
        let client = GroupAdminClient(io: io, endpoint: endpoint, settings: .init(timeout: .milliseconds(300)))
        let started = ContinuousClock.now
        let error = await #expect(throws: GroupAdminError.self) { _ = try await client.groups() }
        // Bounded, not exact: with the whole suite running on two cores, 300 ms can take seconds.
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(error?.kind == .timeout && error?.status == nil)
        #expect(error?.description == "no answer to 'groups.list' from the broker's groups endpoint \(endpoint) within 300ms")
        let invalid = GroupAdminClient(io: io, endpoint: "nowhere", settings: .init(timeout: .milliseconds(300)))
        let refused = await #expect(throws: GroupAdminError.self) { _ = try await invalid.groups() }
        #expect(refused?.kind == .connection)
        await io.shutdown()
        await context.terminate()
    }

    @Test("the policy: every role on the groups endpoint lists; only admin shows a dead event or changes anything")
    func policy() {
        for role: Role in [.admin, .monitor, .worker(service: "eto")] {
            #expect(Policy.groupOperation(role, operation: "groups.list") == nil)
            #expect(Policy.groupOperation(role, operation: "dlq.list") == nil)
        }
        for operation in ["dlq.show", "dlq.replay", "dlq.drop", "groups.create", "groups.reset", "groups.delete"] {
            #expect(Policy.groupOperation(.admin, operation: operation) == nil)
            #expect(Policy.groupOperation(.monitor, operation: operation) != nil, "\(operation)")
            #expect(Policy.groupOperation(.worker(service: "eto"), operation: operation) != nil, "\(operation)")
        }
        #expect(Policy.groupOperation(.monitor, operation: "dlq.show")?.contains("personal data") == true)
    }

    @Test(
        "with CURVE: a monitor and a worker list groups and dead letters but get 403 for dlq.show and dlq.replay; admin may, and is named")
    func roles() async throws {
        let secure = try await SecureBroker.start(
            principals: [
                ("admin-1", .admin, nil), ("ops-1", .monitor, nil), ("eto-1", .worker(service: "eto"), nil), ("riverside-1", .kiosk, nil),
            ], Self.patient)
        let fixture = secure.fixture
        let kiosk = try await secure.dealer("riverside-1", fixture.endpoints.ingest)
        #expect(
            try await Events.exchange(kiosk, try Events.frames(producer: "riverside-1", seq: 1).1, timeout: .seconds(10)).command == .ack)
        let member = try await fixture.groupPeer(try secure.clientOptions("eto-1"))
        _ = try await GroupWire.joined(JoinHeader(group: "eto", topics: ["checkin."], credit: 1), on: member)
        let (delivery, _) = try await GroupWire.delivery(on: member)
        try await member.send(GroupWire.settle(SettleHeader(.term, group: "eto", busSeq: delivery.busSeq, attempt: 1, code: "bad-data")))

        let admin = fixture.groupsClient(timeout: .seconds(10), socketOptions: try secure.clientOptions("admin-1"))
        let monitor = fixture.groupsClient(timeout: .seconds(10), socketOptions: try secure.clientOptions("ops-1"))
        let worker = fixture.groupsClient(timeout: .seconds(10), socketOptions: try secure.clientOptions("eto-1"))
        try await waitUntil("the dead letter") { try await monitor.deadLetters(group: "eto").count == 1 }
        for reader in [monitor, worker] {
            #expect(try await reader.groups().map(\.name) == ["eto"])
            #expect(try await reader.deadLetters().map(\.busSeq) == [delivery.busSeq])
            let calls: [() async throws -> Void] = [
                { _ = try await reader.deadLetter(group: "eto", busSeq: delivery.busSeq) },
                { _ = try await reader.replay(group: "eto", .busSeq(delivery.busSeq)) },
                { _ = try await reader.drop(group: "eto", .all) },
                { _ = try await reader.createGroup("sap", topics: ["checkin."]) },
            ]
            for call in calls {
                let error = await #expect(throws: GroupAdminError.self) { try await call() }
                #expect(error?.status == 403 && error?.code == "forbidden", "\(String(describing: error))")
            }
        }
        #expect(try await monitor.deadLetters(group: "eto").first?.state == .dead, "a refused replay changes nothing")

        let detail = try await admin.deadLetter(group: "eto", busSeq: delivery.busSeq)
        #expect(detail.eventContent.map { String(decoding: $0, as: UTF8.self).contains("Ana") } == true)
        #expect(try await admin.replay(group: "eto", .busSeq(delivery.busSeq)) == [delivery.busSeq])
        let (again, _) = try await GroupWire.delivery(on: member)
        #expect(again.busSeq == delivery.busSeq && again.attempt == 1)
        try await waitUntil("the replay is journaled") { try Self.audits(fixture).count == 2 }
        #expect(try Self.audits(fixture).first.map { Self.text($0, "by") } == "eto-1", "the JOIN that created the group names its member")
        #expect(try Self.audits(fixture).last.map { Self.text($0, "by") } == "admin-1")
        let refusals = try JournalFile.contents(at: fixture.directory.path("broker/journal.sqlite"), type: "security.refused")
        #expect(refusals.contains { $0.contains("dlq.show") && $0.contains("ops-1") }, "\(refusals)")
        await kiosk.close()
        await member.close()
        await secure.stop()
    }
}
