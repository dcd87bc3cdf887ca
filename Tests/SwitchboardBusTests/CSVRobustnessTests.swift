import Foundation
import SwitchboardBus
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
