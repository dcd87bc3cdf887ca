import Foundation
import SwitchboardKiosk
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite("CSV import never traps")
struct CSVRobustnessTests {
    @Test("random CSV text parses or is refused with a Problem, and every parsed row goes through the form")
    func randomCSV() {
        var random = SeededGenerator(seed: 31)
        let alphabet = Array("ab,\"\n\r 19-0.2Zé\u{0}\t")
        let columns = CheckInForm.columns
        for _ in 0..<20_000 {
            let text = String((0..<Int.random(in: 0...80, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
            guard let rows = try? CheckInForm.parseCSV(text) else { continue }
            for row in rows {
                // Values under random column names, as a header line would name them.
                var values: [String: String] = [:]
                for field in row.fields { values[columns.randomElement(using: &random)!] = field }
                _ = try? CheckInForm.make(values, kioskID: "k1")
            }
        }
    }
}

@Suite("CSV quotes are Unicode scalars")
struct CSVQuoteTests {
    /// fuzz-csv's failure (issue 15): a quote followed by a combining mark (U+0592) is one
    /// Character but two scalars. The import reads scalars, so the quote stays a quote; the fuzz
    /// target's writer, which doubled quotes with `replacingOccurrences` (per Character), did not.
    @Test("a quote followed by a combining mark is still a quote, quoted or not")
    func quoteBeforeACombiningMark() throws {
        let found = "f\"\"\"\"\"\"\"\u{592}\"0am_il\"A\"\"\"\"\"id,"
        #expect(try CheckInForm.parseCSV(found).map(\.fields) == [["f\"\"\"\"\"\"\"\u{592}\"0am_il\"A\"\"\"\"\"id", ""]])
        let quoted = "\"f\"\"\u{592}b\",\"\u{592}c\"\n"
        #expect(try CheckInForm.parseCSV(quoted).map(\.fields) == [["f\"\u{592}b", "\u{592}c"]])
    }
}

@Suite("Check-in ordering key")
struct OrderingKeyTests {
    @Test("the key follows the person (case and spaces folded), names no one, and prefers the ETO id")
    func key() {
        func checkIn(_ first: String?, _ last: String?, _ dob: String?, id: Int64? = nil) -> CheckIn {
            CheckIn(
                participant: .init(etoParticipantID: id, firstName: first, lastName: last, dateOfBirth: dob), siteID: 1, programID: 1,
                kioskID: "k", checkedInAt: "2026-11-22T21:04:00Z")
        }
        let a = CheckInForm.orderingKey(checkIn("Ana", "Ortiz", "1976-02-23"))
        #expect(a == CheckInForm.orderingKey(checkIn("  ana ", "ORTIZ", "1976-02-23")))
        #expect(a != CheckInForm.orderingKey(checkIn("Ana", "Ortiz", "1976-02-24")))
        #expect(a.hasPrefix("person:") && a.count == "person:".count + 16)
        #expect(!a.lowercased().contains("ana") && !a.contains("1976"))
        // SHA-256("ana|ortiz|1976-02-23"), first 8 bytes (Python's hashlib agrees): protocol section 9.
        #expect(a == "person:683e6d1735634598")
        #expect(CheckInForm.orderingKey(checkIn("Ana", "Ortiz", nil, id: 1000)) == "eto:1000")
    }
}
