import Foundation
import GRDB
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization
import Testing

@testable import SwitchboardWorkers

/// The ETO worker's memory of its check-ins in its event outbox's file: a response is remembered
/// in the commit that puts its `eto.response.recorded` in the outbox, and an older worker's
/// `eto.sqlite` is carried over once.
@Suite("ETO check-in memory in the outbox's file")
struct ETOCheckInMemoryTests {
    static func recorded(_ id: String, response: Int64) -> ETOCheckInStore.Recorded {
        .init(checkInEventID: id, siteID: 101, subjectID: 5000, participantID: 1000, touchPointID: 54, responseID: response)
    }

    static func event(_ id: String, response: Int64) throws -> Outbox.NewEvent {
        try ETOPublication(
            ETOResponseRecorded(
                eventID: id, busSeq: 7, siteID: 101, programID: 792, participantID: 1000, touchPointID: 54, responseID: response,
                created: true),
            key: "person:1000"
        ).outboxEvent
    }

    @Test("a response and its event commit together: both are there, or, when the outbox refuses the event, neither")
    func responseAndEventInOneCommit() async throws {
        let directory = try TemporaryDirectory("eto-memory-outbox")
        defer { directory.remove() }
        let outbox = try Outbox(path: directory.path("events-outbox.sqlite"), producer: "eto-test")
        let store = try ETOCheckInStore(sharing: outbox)
        #expect(store.path == outbox.path)

        let (a, b) = (UUIDv7.string(), UUIDv7.string())
        try await store.writing(a, at: 1)
        try await store.recorded(Self.recorded(a, response: 41), publishing: try Self.event(a, response: 41))
        #expect(try await store.response(of: a)?.responseID == 41)
        #expect(try await !store.writeStarted(a), "the note goes in the same commit")
        let pending = try await outbox.pending(limit: 10)
        #expect(pending.map(\.type) == [ETOResponseRecorded.type])
        let content = try JSONDecoder().decode(ETOResponseRecorded.self, from: try #require(pending.first).content)
        #expect(content.eventID == a && content.responseID == 41 && content.created)
        let header = try JSONDecoder().decode(EventHeader.self, from: try #require(pending.first).header)
        #expect(header.producer == "eto-test" && header.key == "person:1000" && header.producerSeq == 1)

        // The outbox refuses the next event (as a full disk would): the response is not kept
        // either, and the note that its write started stays.
        try await outbox.database.write { db in
            try db.execute(sql: "CREATE TEMP TRIGGER refuse BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        try await store.writing(b, at: 2)
        await #expect(throws: (any Error).self) {
            try await store.recorded(Self.recorded(b, response: 42), publishing: try Self.event(b, response: 42))
        }
        #expect(try await store.response(of: b) == nil)
        #expect(try await store.writeStarted(b))
        #expect(try await outbox.pending(limit: 10).count == 1)

        // Once the outbox takes events again, the same record and event go in together.
        try await outbox.database.write { db in try db.execute(sql: "DROP TRIGGER temp.refuse") }
        try await store.recorded(Self.recorded(b, response: 42), publishing: try Self.event(b, response: 42))
        #expect(try await store.response(of: b)?.responseID == 42)
        #expect(try await outbox.pending(limit: 10).map(\.producerSeq) == [1, 2], "numbered on from the counter")
    }

    @Test("the read a delivery starts with notes the write only for a check-in with neither a response nor an early void here")
    func readNotesTheWrite() async throws {
        let directory = try TemporaryDirectory("eto-memory-note")
        defer { directory.remove() }
        let store = try ETOCheckInStore(sharing: try Outbox(path: directory.path("events-outbox.sqlite"), producer: "eto-test"))
        let (fresh, recorded, voided) = (UUIDv7.string(), UUIDv7.string(), UUIDv7.string())
        #expect(
            try await store.memory(of: fresh, notingWriteAt: 1) == .init(earlyVoid: nil, response: nil, writeStarted: false, noted: true))
        #expect(try await store.writeStarted(fresh))
        // Read again (a redelivery): the note from before shows, and is noted again.
        #expect(
            try await store.memory(of: fresh, notingWriteAt: 2) == .init(earlyVoid: nil, response: nil, writeStarted: true, noted: true))

        try await store.recorded(Self.recorded(recorded, response: 5), publishing: try Self.event(recorded, response: 5))
        let memory = try await store.memory(of: recorded, notingWriteAt: 3)
        #expect(memory.response?.responseID == 5 && !memory.noted && !memory.writeStarted)
        #expect(try await !store.writeStarted(recorded))

        try await store.voidedEarly(voided, by: "void-1", at: "2026-11-28T05:00:00Z")
        #expect(try await store.memory(of: voided, notingWriteAt: 4) == .init(earlyVoid: "void-1", response: nil, writeStarted: false))
        #expect(try await !store.writeStarted(voided))
    }

    @Test("an older worker's eto.sqlite is copied into the outbox's file once, renamed, and a copy made again keeps what changed since")
    func olderFileCopiedOnce() async throws {
        let directory = try TemporaryDirectory("eto-memory-import")
        defer { directory.remove() }
        let (recorded, voided, early, added, started) = (
            UUIDv7.string(), UUIDv7.string(), UUIDv7.string(), UUIDv7.string(), UUIDv7.string()
        )
        do {
            let old = try ETOCheckInStore(directory: directory.path)
            try await old.recorded(Self.recorded(recorded, response: 1))
            try await old.recorded(Self.recorded(voided, response: 2))
            try await old.voided(voided, by: "void-2")
            try await old.voidedEarly(early, by: "void-3", at: "2026-11-28T05:00:00Z")
            try await old.adding(added, at: 123)
            try await old.writing(started, at: 456)
        }
        let own = directory.path(ETOCheckInStore.ownFileName)
        let outboxPath = directory.path("events-outbox.sqlite")

        func check(_ store: ETOCheckInStore) async throws {
            #expect(try await store.response(of: recorded)?.responseID == 1)
            #expect(try await store.response(of: voided)?.voidEventID == "void-2")
            #expect(try await store.earlyVoid(of: early) == "void-3")
            #expect(try await store.addSent(added) == 123)
            #expect(try await store.writeStarted(started))
            #expect(try await store.memory(of: UUIDv7.string()) == .init(earlyVoid: nil, response: nil, writeStarted: false))
        }
        do {
            let outbox = try Outbox(path: outboxPath, producer: "eto-test")
            let store = try ETOCheckInStore(sharing: outbox, importing: directory.path)
            try await check(store)
            #expect(!FileManager.default.fileExists(atPath: own), "renamed, so no later start copies it")
            #expect(FileManager.default.fileExists(atPath: own + ".imported"))
            // What happens after the copy belongs to the new file only.
            try await store.recorded(Self.recorded(started, response: 3), publishing: try Self.event(started, response: 3))
            try await store.voided(recorded, by: "void-1")
        }
        // A copy cut short before its rename (the worker killed) is made again at the next
        // start: rows already here stay as they are.
        try FileManager.default.copyItem(atPath: own + ".imported", toPath: own)
        let outbox = try Outbox(path: outboxPath, producer: "eto-test")
        let store = try ETOCheckInStore(sharing: outbox, importing: directory.path)
        #expect(try await store.response(of: recorded)?.voidEventID == "void-1")
        #expect(try await store.response(of: started)?.responseID == 3)
        #expect(try await !store.writeStarted(started), "a note whose response is here is not copied again")
        #expect(try await store.earlyVoid(of: early) == "void-3")
        #expect(!FileManager.default.fileExists(atPath: own))
        // A start with nothing to copy leaves the memory as it is.
        let again = try ETOCheckInStore(sharing: outbox, importing: directory.path)
        #expect(try await again.response(of: voided)?.voidEventID == "void-2")
        #expect(try await outbox.pending(limit: 10).count == 1)
    }

    @Test("the recorder with the memory in the outbox's file: a check-in's event is enqueued with its response, not through publish")
    func recorderEnqueuesWithTheResponse() async throws {
        let handlers = HandlerTests()
        try await handlers.withBackends { b in
            let directory = try TemporaryDirectory("eto-memory-recorder")
            defer { directory.remove() }
            let outbox = try Outbox(path: directory.path("events-outbox.sqlite"), producer: "eto-test")
            let store = try ETOCheckInStore(sharing: outbox)
            let published = ETOFrontDeskTests.Published()
            let recorder = ETOCheckInRecorder(eto: b.etoAccess(), configuration: .default, store: store, logger: b.logs.logger) {
                published.add($0)
            }
            let id = UUIDv7.string()
            var event = try handlers.event(ETOLookTests.checkIn(), id: id)
            event.firstDelivery = true
            #expect(await recorder.handle(event) == .done)
            let response = try #require(try await store.response(of: id))
            let pending = try await outbox.pending(limit: 10)
            #expect(pending.map(\.type) == [ETOResponseRecorded.type])
            let content = try JSONDecoder().decode(ETOResponseRecorded.self, from: try #require(pending.first).content)
            #expect(content.eventID == id && content.responseID == response.responseID && content.created)
            #expect(published.all.withLock { $0 }.isEmpty, "nothing went through publish")

            // Its ACK lost, it comes again: the record answers, and the event is enqueued again
            // (created false), as protocol section 16.2 has it.
            event.attempt = 2
            event.firstDelivery = false
            #expect(await recorder.handle(event) == .done)
            let again = try await outbox.pending(limit: 10)
            #expect(again.count == 2)
            let second = try JSONDecoder().decode(ETOResponseRecorded.self, from: try #require(again.last).content)
            #expect(second.responseID == response.responseID && !second.created)
        }
    }
}
