import Testing

@testable import SwitchboardWorkers

/// `DirectoryDiff.decide` as values: what a poll publishes, remembers or holds back.
@Suite("Directory diff and guard")
struct DirectoryDiffTests {
    static let ana = DirectoryEntry(id: 1, name: "Ana Diaz", office: "Riverside")
    static let ben = DirectoryEntry(id: 2, name: "Ben Okafor", office: "Riverside")
    static let cy = DirectoryEntry(id: 3, name: "Cy Park", office: "Eastside")
    static let dee = DirectoryEntry(id: 4, name: "Dee Moss", office: "Eastside")
    static let four = [ana, ben, cy, dee]
    let rule = DirectoryGuard(maxMissing: 0.5)

    func changes(_ decision: PollDecision) throws -> PollChanges {
        guard case .accept(let changes) = decision else {
            Issue.record("expected accept, got \(decision)")
            throw CancellationError()
        }
        return changes
    }

    @Test("the first list is published whole and remembered")
    func firstList() throws {
        let c = try changes(DirectoryDiff.decide(previous: nil, heldBack: nil, current: [Self.ben, Self.ana], intents: [], guard: rule))
        #expect(c.first && c.created == [Self.ana, Self.ben] && c.deleted.isEmpty && c.snapshot == [Self.ana, Self.ben])
        // An empty first list is not suspect: there was nothing to lose.
        let empty = try changes(DirectoryDiff.decide(previous: nil, heldBack: nil, current: [], intents: [], guard: rule))
        #expect(empty.first && empty.created.isEmpty && empty.snapshot.isEmpty)
    }

    @Test("an unchanged list does nothing; new ids are created, vanished ids deleted, a renamed person only remembered")
    func ordinaryChanges() throws {
        #expect(DirectoryDiff.decide(previous: Self.four, heldBack: nil, current: Self.four, intents: [], guard: rule) == .unchanged)
        let eve = DirectoryEntry(id: 5, name: "Eve Stone", office: "Riverside")
        var renamed = Self.ben
        renamed.office = "Eastside"
        let c = try changes(
            DirectoryDiff.decide(previous: Self.four, heldBack: nil, current: [Self.ana, renamed, Self.cy, eve], intents: [], guard: rule))
        #expect(c.created == [eve] && c.deleted == [Self.dee] && c.changed == [renamed])
        #expect(c.snapshot == [Self.ana, renamed, Self.cy, eve] && !c.first && !c.confirmed)
    }

    @Test(
        "the syncer's own add and delete, left pending by a crash, are matched to their requests and published as facts (the handler may have died first)"
    )
    func ownWritesAreNotNews() throws {
        let eve = DirectoryEntry(id: 5, name: "Eve Stone", office: "Riverside")
        let intents = [
            DirectoryIntent(eventID: "e-add", action: .add, name: "Eve Stone", office: "Riverside"),
            DirectoryIntent(eventID: "e-del", action: .delete, personID: 4),
        ]
        let c = try changes(
            DirectoryDiff.decide(
                previous: Self.four, heldBack: nil, current: [Self.ana, Self.ben, Self.cy, eve], intents: intents, guard: rule))
        #expect(c.created == [eve] && c.deleted.map(\.id) == [4])
        #expect(c.adopted == ["e-add": 5] && c.settledDeletes == ["e-del"])
        // A second person with the same name and office is news: one intent adopts one person.
        let twin = DirectoryEntry(id: 6, name: "Eve Stone", office: "Riverside")
        let d = try changes(
            DirectoryDiff.decide(previous: Self.four, heldBack: nil, current: Self.four + [eve, twin], intents: intents, guard: rule))
        #expect(d.adopted == ["e-add": 5] && d.created == [eve, twin])
    }

    @Test("an empty list after a non-empty one is held back, whatever the ratio")
    func emptyIsSuspect() {
        #expect(
            DirectoryDiff.decide(previous: [Self.ana], heldBack: nil, current: [], intents: [], guard: DirectoryGuard(maxMissing: 1))
                == .hold(list: [], previous: 1, missing: 1))
        #expect(
            DirectoryDiff.decide(previous: Self.four, heldBack: nil, current: [], intents: [], guard: rule)
                == .hold(list: [], previous: 4, missing: 4))
    }

    @Test("more than max-missing gone is held back; exactly max-missing is not")
    func ratio() throws {
        #expect(
            DirectoryDiff.decide(previous: Self.four, heldBack: nil, current: [Self.ana], intents: [], guard: rule)
                == .hold(list: [Self.ana], previous: 4, missing: 3))
        let half = try changes(
            DirectoryDiff.decide(previous: Self.four, heldBack: nil, current: [Self.ana, Self.ben], intents: [], guard: rule))
        #expect(half.deleted == [Self.cy, Self.dee])
        // New people do not hide missing ones: 3 of 4 gone is suspect even with 3 new.
        let new = (10...12).map { DirectoryEntry(id: $0, name: "New \($0)", office: "X") }
        #expect(
            DirectoryDiff.decide(previous: Self.four, heldBack: nil, current: [Self.ana] + new, intents: [], guard: rule)
                == .hold(list: [Self.ana] + new, previous: 4, missing: 3))
        #expect(rule.isSuspect(previous: 4, current: 1, missing: 3) && !rule.isSuspect(previous: 4, current: 2, missing: 2))
        #expect(!rule.isSuspect(previous: 0, current: 0, missing: 0))
    }

    @Test("a held-back list is accepted when the next poll returns the same list; another list is judged afresh")
    func confirmation() throws {
        let confirmed = try changes(DirectoryDiff.decide(previous: Self.four, heldBack: [], current: [], intents: [], guard: rule))
        #expect(confirmed.confirmed && confirmed.deleted == Self.four && confirmed.snapshot.isEmpty)

        // Back to normal: accepted with nothing to publish (and the held list forgotten).
        let back = try changes(DirectoryDiff.decide(previous: Self.four, heldBack: [], current: Self.four, intents: [], guard: rule))
        #expect(back.isEmpty && !back.confirmed)

        // Another suspect list: held back again, not confirmed by the first.
        #expect(
            DirectoryDiff.decide(previous: Self.four, heldBack: [], current: [Self.dee], intents: [], guard: rule)
                == .hold(list: [Self.dee], previous: 4, missing: 3))

        // Same ids with another name is not the same list.
        var renamed = Self.dee
        renamed.name = "Dee Moss-Hart"
        #expect(
            DirectoryDiff.decide(previous: Self.four, heldBack: [Self.dee], current: [renamed], intents: [], guard: rule)
                == .hold(list: [renamed], previous: 4, missing: 3))
    }
}
