import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

/// Operators' requests run by `GroupCoordinator` on a real journal in a temporary directory,
/// with instants: no socket, no broker thread. What it asks the broker to do comes back as actions.
@Suite("Consumer groups: the coordinator of operators' requests")
struct GroupCoordinatorTests {
    static let t0 = ContinuousClock.now

    /// A journal holding `count` check-ins (bus_seq 1…count) and an empty group book.
    struct Bench {
        let directory: TemporaryDirectory
        let journal: Journal
        var book: GroupBook
        var coordinator: GroupCoordinator { GroupCoordinator(journal: journal) }

        init(events count: Int) throws {
            directory = try TemporaryDirectory("coordinator")
            journal = try Journal(path: directory.path("journal.sqlite"))
            let events = (1...Int64(count)).map { seq in
                let header = EventHeader(
                    type: CheckIn.type, producer: "kiosk-1", producerSeq: seq, schema: CheckIn.schema, session: "s", key: "person-\(seq)")
                return PendingEvent(
                    header: header, headerFields: JSONValue.parse(header.wireJSON())!.object!, rawHeader: header.wireJSON(),
                    parent: Data("{}".utf8), metadata: Data("{}".utf8), content: Data(#"{"n":\#(seq)}"#.utf8), receivedAt: 1000)
            }
            _ = try journal.append(events)
            book = try GroupBook(journal: journal, settings: ConsumerGroupSettings(liveness: .seconds(3600)), logger: Logger(label: "test"))
        }

        mutating func run(_ request: GroupAdminRequest, at milliseconds: Int = 0) throws -> (GroupAdminResult, [GroupAdminAction]) {
            try coordinator.run(
                request, by: "admin-1", book: &book, producers: ProducerTable(), now: GroupCoordinatorTests.t0 + .milliseconds(milliseconds)
            )
        }

        /// What `BrokerCore.flushGroups` does with the writes: one commit.
        mutating func commit() throws {
            try journal.commitGroups(book.writes)
            book.writes = []
        }

        func remove() {
            try? journal.close()
            directory.remove()
        }
    }

    static func failure(_ body: () throws -> Void) -> GroupRequestFailure? {
        do {
            try body()
            return nil
        } catch {
            return error as? GroupRequestFailure
        }
    }

    static func group(_ result: GroupAdminResult) -> GroupInfo? {
        if case .group(let info) = result { return info }
        return nil
    }

    @Test("create audits and writes; again with the same topics changes nothing; other topics are 409 and change nothing")
    func create() throws {
        var bench = try Bench(events: 3)
        defer { bench.remove() }
        let (result, actions) = try bench.run(.createGroup(group: "filemaker", topics: ["checkin.", "person."], start: nil))
        let created = try #require(Self.group(result))
        #expect(created.name == "filemaker" && created.start == "earliest" && created.cursor == 0 && created.head == 3 && created.lag == 3)
        #expect(
            actions == [
                .audit(
                    GroupAudit(
                        action: "created", group: "filemaker", by: "admin-1",
                        extra: ["topics": .array([.string("checkin."), .string("person.")]), "start": .string("earliest")]))
            ])
        #expect(bench.book.writes.count == 1)
        try bench.commit()

        let (again, none) = try bench.run(.createGroup(group: "filemaker", topics: ["person.", "checkin."], start: .head))
        #expect(Self.group(again)?.start == "earliest" && none.isEmpty && bench.book.writes.isEmpty, "a repeat is the same group")

        let conflict = Self.failure { _ = try bench.run(.createGroup(group: "filemaker", topics: ["eto."], start: nil)) }
        #expect(conflict?.status == 409 && conflict?.code == "conflict")
        #expect(bench.book.writes.isEmpty && bench.book.groups["filemaker"]?.topics == ["checkin.", "person."])

        let (listed, _) = try bench.run(.listGroups)
        #expect(listed == .groups(GroupList(groups: [created])))
    }

    @Test("reset starts the group again where asked and its members join the new machine; delete forgets it; an unknown group is 404")
    func resetAndDelete() throws {
        var bench = try Bench(events: 3)
        defer { bench.remove() }
        _ = try bench.run(.createGroup(group: "eto", topics: ["checkin."], start: nil))
        try bench.commit()
        // A member holding two deliveries.
        let member = GroupMemberID(Data("m1".utf8))
        _ = try bench.book.withGroup("eto") { runtime in
            _ = try runtime.state.join(member: member, name: "eto-1", credit: 2, now: Self.t0)
            runtime.members[member] = ("eto-1", nil, 2, 1)
            _ = runtime.state.offer([1, 2, 3].map { GroupCandidate(busSeq: $0, key: nil) }, through: 3, now: Self.t0)
        }
        bench.book.connections[member.rawValue] = ["eto"]
        #expect(bench.book.groups["eto"]?.state.status.pending == 2)

        let (result, actions) = try bench.run(.resetGroup(group: "eto", start: .sequence(3)), at: 10)
        let reset = try #require(Self.group(result))
        #expect(reset.start == "3" && reset.cursor == 2 && reset.members.map(\.name) == ["eto-1"], "\(reset)")
        #expect(actions.first == .audit(GroupAudit(action: "reset", group: "eto", by: "admin-1", extra: ["start": .string("3")])))
        #expect(actions.count == 2, "the audit, then what the new machine asks: \(actions)")

        let (deleted, after) = try bench.run(.deleteGroup(group: "eto"))
        #expect(deleted == .deleted(GroupDeleted(deleted: "eto")))
        #expect(after == [.audit(GroupAudit(action: "deleted", group: "eto", by: "admin-1")), .forget(group: "eto")])
        #expect(bench.book.groups.isEmpty && bench.book.connections.isEmpty)
        for request: GroupAdminRequest in [
            .deleteGroup(group: "eto"), .resetGroup(group: "eto", start: nil), .showDeadLetter(group: "eto", busSeq: 1),
            .listDeadLetters(DeadLetterQuery(group: "eto")), .dropDeadLetters(group: "eto", .all),
        ] {
            let missing = Self.failure { _ = try bench.run(request) }
            #expect(missing == .notFound("group 'eto' not found"), "\(request)")
        }
    }

    @Test("dead letters: listed with their counts, shown with their event, replayed (deliveries and audit), then none waits")
    func deadLetters() throws {
        var bench = try Bench(events: 3)
        defer { bench.remove() }
        _ = try bench.run(.createGroup(group: "filemaker", topics: ["checkin."], start: nil))
        try bench.commit()
        let letters = [2, 99].map { seq in
            DeadLetterRecord(
                group: "filemaker", busSeq: Int64(seq), dlqSeq: nil, eventID: UUIDv7.string(), type: CheckIn.type, key: "person-\(seq)",
                attempts: 5, code: "bad-data", message: "no", at: 1_000 + Int64(seq), state: .dead)
        }
        try bench.journal.commitGroups(letters.map { .deadLetter($0, eventIndex: nil) })

        let (listed, _) = try bench.run(.listDeadLetters(DeadLetterQuery(limit: 1)))
        guard case .deadLetters(let page) = listed else { Issue.record("\(listed)"); return }
        #expect(page.total == 2 && page.byCode == ["bad-data": 2] && page.deadLetters.map(\.busSeq) == [2] && page.next != nil)
        let (second, _) = try bench.run(.listDeadLetters(DeadLetterQuery(limit: 1, after: page.next)))
        guard case .deadLetters(let last) = second else { Issue.record("\(second)"); return }
        #expect(last.deadLetters.map(\.busSeq) == [99] && last.next == nil)
        let stranger = Self.failure { _ = try bench.run(.listDeadLetters(DeadLetterQuery(after: "page-2"))) }
        #expect(stranger?.status == 422 && stranger?.message.contains("'after'") == true)

        let (shown, _) = try bench.run(.showDeadLetter(group: "filemaker", busSeq: 2))
        guard case .deadLetter(let detail) = shown else { Issue.record("\(shown)"); return }
        #expect(detail.letter.busSeq == 2 && detail.eventContent == Data(#"{"n":2}"#.utf8))

        // 99 is not journaled: a replay of every one is refused whole.
        let gone = Self.failure { _ = try bench.run(.replayDeadLetters(group: "filemaker", .all)) }
        #expect(gone?.status == 409 && bench.book.writes.isEmpty)

        let (replayed, actions) = try bench.run(.replayDeadLetters(group: "filemaker", .busSeq(2)))
        #expect(replayed == .settled(DeadLetterSettled(replayed: [2])), "one by bus_seq has no `remaining`")
        #expect(
            actions.contains(.audit(GroupAudit(action: "dlq-replayed", group: "filemaker", by: "admin-1", extra: ["bus_seq": .integer(2)])))
        )
        try bench.commit()
        let (dropped, _) = try bench.run(.dropDeadLetters(group: "filemaker", .matching(code: "bad-data", before: nil, limit: 10)))
        #expect(dropped == .settled(DeadLetterSettled(dropped: [99], remaining: 0)))
        try bench.commit()
        let none = Self.failure { _ = try bench.run(.dropDeadLetters(group: "filemaker", .all)) }
        #expect(none == .notFound("group 'filemaker' has no dead letter waiting"))
    }
}
