import SwitchboardKiosk
import SwitchboardProtocol
import Testing

@Suite("Check-in form and CSV")
struct CheckInFormTests {
    @Test("flags become a valid check-in; the example from the README works")
    func fromFlags() throws {
        let checkIn = try CheckInForm.make(
            ["first_name": "Ana", "last_name": "Diaz", "site_id": "12", "program_id": "3"], kioskID: "riverside-1")
        #expect(checkIn.siteID == 12)
        #expect(checkIn.participant.firstName == "Ana")
        try checkIn.validate()
    }

    @Test(
        "bad input names the field the person used",
        arguments: [
            (["last_name": "Diaz", "first_name": "Ana", "site_id": "abc", "program_id": "3"], "--site"),
            (["last_name": "Diaz", "first_name": "Ana", "program_id": "3"], "--site"),
            (["last_name": "Diaz", "first_name": "Ana", "site_id": "1", "program_id": "3", "date_of_birth": "2999-01-01"], "--dob"),
            (["last_name": "Diaz", "first_name": "Ana", "site_id": "1", "program_id": "3", "latitude": "47.6"], "--longitude"),
            (["first_name": "Ana", "site_id": "1", "program_id": "3"], "--last"),
            (
                [
                    "last_name": "Diaz", "first_name": "Ana", "site_id": "1", "program_id": "3", "latitude": "91", "longitude": "0",
                    "accuracy_m": "5",
                ], "--latitude"
            ),
        ])
    func namesTheField(values: [String: String], field: String) {
        let flags = [
            "first_name": "--first", "last_name": "--last", "date_of_birth": "--dob", "site_id": "--site", "program_id": "--program",
            "latitude": "--latitude", "longitude": "--longitude", "accuracy_m": "--accuracy",
        ]
        do {
            _ = try CheckInForm.make(values, kioskID: "k1") { flags[$0] ?? $0 }
            Issue.record("accepted \(values)")
        } catch {
            #expect(error.field == field, "\(error)")
        }
    }

    @Test("CSV parsing handles quotes, doubled quotes, commas and CRLF, and reports an open quote")
    func csv() throws {
        let rows = try CheckInForm.parseCSV("first_name,notes\r\nAna,\"said \"\"hi\"\", left\"\r\n\r\n\"Li\",\"two\nlines\"\n")
        #expect(rows.count == 3)
        #expect(rows[1].fields == ["Ana", "said \"hi\", left"])
        #expect(rows[2].fields == ["Li", "two\nlines"])
        #expect(rows[2].line == 4)
        #expect(throws: CheckInForm.Problem.self) { try CheckInForm.parseCSV("a,b\n\"open,x\n") }
    }
}
