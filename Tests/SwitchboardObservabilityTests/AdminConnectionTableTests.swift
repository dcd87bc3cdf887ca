import Testing

@testable import SwitchboardObservability

/// The admin server's connection table, driven with no I/O: which connection makes room.
@Suite("Admin connection table")
struct AdminConnectionTableTests {
    func admitted(_ admission: AdminConnectionTable<String>.Admission) -> (id: UInt64, makingRoom: String?)? {
        if case .admitted(let id, let makingRoom) = admission { return (id, makingRoom) }
        return nil
    }

    @Test("under the limit every connection is admitted; at it, the one waiting longest for a head makes room, never a busy one")
    func makingRoom() throws {
        var table = AdminConnectionTable<String>(limit: 3)
        let a = try #require(admitted(table.open("a")))
        let b = try #require(admitted(table.open("b")))
        let c = try #require(admitted(table.open("c")))
        #expect(a.makingRoom == nil && b.makingRoom == nil && c.makingRoom == nil)
        // a is busy answering; b has waited longest of the others.
        table.busy(a.id)
        let d = try #require(admitted(table.open("d")))
        #expect(d.makingRoom == "b")
        // a finishes: it waits again, from now, so c (waiting since it opened) goes first.
        table.waiting(a.id)
        #expect(admitted(table.open("e"))?.makingRoom == "c")
        #expect(table.entries.map(\.connection) == ["a", "d", "e"])
    }

    @Test("when every connection is busy the newcomer is refused; a closed one frees its place; closing an evicted one changes nothing")
    func refusing() throws {
        var table = AdminConnectionTable<String>(limit: 2)
        let a = try #require(admitted(table.open("a")))
        let b = try #require(admitted(table.open("b")))
        table.busy(a.id)
        table.busy(b.id)
        guard case .refused = table.open("c") else {
            Issue.record("a third connection was admitted while both were busy")
            return
        }
        table.closed(b.id)
        let d = try #require(admitted(table.open("d")))
        #expect(d.makingRoom == nil)
        table.waiting(a.id)
        #expect(admitted(table.open("e"))?.makingRoom == "d")
        table.closed(d.id)
        #expect(table.entries.map(\.connection) == ["a", "e"])
    }
}
