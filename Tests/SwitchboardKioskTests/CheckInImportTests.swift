import Foundation
import SwitchboardBus
import SwitchboardKiosk
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite("CSV import: all rows or none, a file once")
struct CheckInImportTests {
    static let header = "first_name,last_name,date_of_birth,site_id,program_id\n"

    func write(_ text: String, _ name: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a good file is queued in one go, keyed by person; the same content under another name is refused")
    func importsOnce() async throws {
        let directory = try TemporaryDirectory("import")
        defer { directory.remove() }
        let text = Self.header + "Ana,Ortiz,1976-02-23,101,792\n\"Li\",Chen,,102,801\r\n"
        let path = try write(text, "day.csv", in: directory)
        let file = try CheckInImport(path: path, kioskID: "riverside-1")
        #expect(file.events.count == 2)
        #expect(file.digest == FileDigest.of(Data(text.utf8)))
        let ana = try JSONDecoder().decode(CheckIn.self, from: file.events[0].content)
        #expect(ana.participant.firstName == "Ana" && ana.kioskID == "riverside-1" && ana.siteID == 101)
        #expect(file.events[0].key == CheckInForm.orderingKey(ana))

        let outbox = try Outbox(path: directory.path("outbox.sqlite"), producer: "riverside-1")
        try await file.enqueue(into: outbox)
        #expect(try await outbox.counts().pending == 2)
        let again = try CheckInImport(path: try write(text, "copy.csv", in: directory), kioskID: "riverside-1")
        let refused = await #expect(throws: CheckInImport.Failure.self) { try await again.enqueue(into: outbox) }
        #expect(refused?.description.hasPrefix(directory.path("copy.csv") + ": ") == true, "\(String(describing: refused))")
        #expect(try await outbox.counts().pending == 2)
    }

    @Test("one bad row refuses the whole file, naming each bad row's line and column")
    func allOrNothing() throws {
        let directory = try TemporaryDirectory("import")
        defer { directory.remove() }
        let path = try write(
            Self.header + "Ana,Ortiz,1976-02-23,101,792\nLi,Chen,,Chen,801\nSam,Lee,,101\nMo,Kay,11/11/1911,101,792\n", "bad.csv",
            in: directory)
        let refused = #expect(throws: CheckInImport.Failure.self) { try CheckInImport(path: path, kioskID: "k1") }
        let text = refused?.description ?? ""
        #expect(text.hasPrefix("\(path): 3 rows refused, nothing was queued:"), "\(text)")
        // The line and column, never the value: a value in the wrong column is personal data.
        #expect(text.contains("line 3, column 'site_id': must be a positive whole number\n"), "\(text)")
        #expect(text.contains("line 5, column 'date_of_birth': must be a date YYYY-MM-DD"), "\(text)")
        #expect(!text.contains("Chen") && !text.contains("1911"), "\(text)")
        #expect(text.contains("line 4: 4 fields, the header has 5"), "\(text)")
    }

    @Test(
        "what is not a check-in file is refused with what is wrong",
        arguments: [
            ("", "is empty"),
            ("first_name,shoe_size\nAna,40\n", "line 1: unknown column 'shoe_size' (known: first_name, last_name"),
            (header, "has a header but no rows"),
            ("first_name,site_id\n\"Ana,1\n", ": line 2: a quoted field is not closed"),
        ])
    func refused(text: String, expected: String) throws {
        let refused = #expect(throws: CheckInImport.Failure.self) {
            try CheckInImport(data: Data(text.utf8), file: "day.csv", kioskID: "k1")
        }
        #expect(refused?.description.hasPrefix("day.csv") == true)
        #expect(refused?.description.contains(expected) == true, "\(String(describing: refused))")
    }

    @Test("a file that is not UTF-8, or not there, is refused")
    func unreadable() throws {
        let latin1 = #expect(throws: CheckInImport.Failure.self) {
            try CheckInImport(data: Data([0x66, 0xE9, 0xFF, 0x0A]), file: "day.csv", kioskID: "k1")
        }
        #expect(latin1?.description == "day.csv is not UTF-8 text")
        let missing = #expect(throws: CheckInImport.Failure.self) { try CheckInImport(path: "/nonexistent/day.csv", kioskID: "k1") }
        #expect(missing?.description == "cannot read /nonexistent/day.csv")
    }

    @Test("random CSV text never traps: it is queued whole or refused with a reason")
    func randomText() {
        var random = SeededGenerator(seed: 47)
        let alphabet = Array("ab,\"\n\r 19-0.2Zé\u{0}\t")
        let headers = ["first_name,last_name,site_id,program_id\n", "site_id,program_id,notes\n", ""]
        for _ in 0..<5_000 {
            let body = String((0..<Int.random(in: 0...80, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
            let text = headers.randomElement(using: &random)! + body
            do {
                let file = try CheckInImport(data: Data(text.utf8), file: "r.csv", kioskID: "k1")
                #expect(!file.events.isEmpty)
            } catch {
                #expect("\(error)".hasPrefix("r.csv"))
            }
        }
    }
}

@Suite("Demo roster")
struct CheckInRosterTests {
    @Test("the roster's people are checked in turn; a bad row is refused at start with its line")
    func roster() throws {
        let directory = try TemporaryDirectory("roster")
        defer { directory.remove() }
        let good = directory.path("roster.csv")
        try Data("first_name,last_name,site_id,program_id\nAna,Ortiz,101,792\nLi,Chen,102,801\n".utf8).write(to: URL(fileURLWithPath: good))
        let roster = try CheckInRoster(path: good, kioskID: "demo-1")
        #expect(roster.rows.count == 2)
        #expect(try roster.checkIn(0, kioskID: "demo-1").participant.firstName == "Ana")
        #expect(try roster.checkIn(3, kioskID: "demo-1").participant.firstName == "Li")
        #expect(try roster.checkIn(4, kioskID: "demo-1").siteID == 101)

        let bad = directory.path("bad.csv")
        try Data("first_name,last_name,site_id,program_id\nAna,Ortiz,101,792\nLi,Chen,0,801\n".utf8).write(to: URL(fileURLWithPath: bad))
        let refused = #expect(throws: CheckInRoster.Failure.self) { try CheckInRoster(path: bad, kioskID: "demo-1") }
        #expect(refused?.description == "\(bad) line 3: site_id: must be a positive whole number")
        let empty = directory.path("empty.csv")
        try Data("first_name,site_id\n".utf8).write(to: URL(fileURLWithPath: empty))
        #expect(throws: CheckInRoster.Failure.self) { try CheckInRoster(path: empty, kioskID: "demo-1") }
    }
}
