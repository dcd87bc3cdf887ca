import Foundation
import SwitchboardBackends
import SwitchboardBus
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardWorkers

/// Dead-letter and retry reasons are logged by the worker and the broker and listed by
/// `switchboard dlq list`: they carry codes and ids, never what a person typed (issue 31).
@Suite("Reasons without personal data")
struct PersonalDataTests {
    static let zebulon = CheckIn(
        participant: .init(firstName: "Zebulon", lastName: "Quixotefar", dateOfBirth: "1911-11-11"), siteID: 101, programID: 792,
        kioskID: "riverside-1", checkedInAt: "2026-11-22T21:04:00Z", notes: "Quillfeather sleeps in bed 14")

    static func leaks(_ text: String) -> [String] {
        ["Zebulon", "Quixotefar", "1911-11-11", "11/11/1911", "Quillfeather"].filter { text.localizedCaseInsensitiveContains($0) }
    }

    @Test("participant-unmatched names the site, the program and the candidates' ids, whether none or several matched")
    func unmatchedMessages() {
        let none = ETOCheckInRecorder.unmatchedMessage(
            site: 101, program: 792, matches: [], sameLastName: [1042, 1003], withDateOfBirth: true)
        #expect(
            none
                == "no participant of program 792 at site 101 has the check-in's first name, last name and date of birth (participants with the same last name, other details: 1003, 1042)"
        )
        let nobody = ETOCheckInRecorder.unmatchedMessage(site: 101, program: 792, matches: [], sameLastName: [], withDateOfBirth: false)
        #expect(nobody == "no participant of program 792 at site 101 has the check-in's first name and last name")
        let several = ETOCheckInRecorder.unmatchedMessage(
            site: 102, program: 801, matches: [2002, 2001], sameLastName: [2001, 2002, 2003], withDateOfBirth: false)
        #expect(
            several
                == "2 participants of program 801 at site 102 have the check-in's first name and last name: 2001, 2002; record by participant id"
        )
    }

    @Test("a back end's message quoting the check-in loses its names, date of birth (either form) and notes; other words stay whole")
    func personalWordsRemoved() {
        let settlement = Settlement.deadLetter(
            code: "eto-http-400",
            message:
                "ETO: no ZEBULON quixotefar (born 11/11/1911, 1911-11-11) in program 792; Quillfeather sleeps in bed 14; Zebulonia stays")
        guard case .deadLetter(let code, let message) = settlement.withoutPersonalData(of: Self.zebulon) else {
            Issue.record("not a dead letter")
            return
        }
        #expect(code == "eto-http-400")
        #expect(
            message == "ETO: no [personal] [personal] (born [personal], [personal]) in program 792; [personal]; Zebulonia stays",
            "\(message)")
        let short = CheckIn(
            participant: .init(firstName: "Li", lastName: "Ng"), siteID: 101, programID: 792, kioskID: "k",
            checkedInAt: "2026-11-22T21:04:00Z")
        #expect(
            Settlement.retry(after: nil, code: "eto-timeout", message: "Limit reached for Li Ng").withoutPersonalData(of: short)
                == .retry(after: nil, code: "eto-timeout", message: "Limit reached for [personal] [personal]"))
        #expect(Settlement.done.withoutPersonalData(of: Self.zebulon) == .done)
        #expect(settlement.withoutPersonalData(of: nil) == settlement)
    }

    @Test("a FileMaker validation refusal (5xx) names its code and the written fields its message mentions, never the message")
    func fileMakerValidation() {
        let error = HTTPError(
            .vendor, context: .init(api: .fileMaker, operation: "records.create", method: "POST", redactedURL: "https://fm/records"),
            status: 500, vendorCode: "507", vendorMessage: "Value 'Zebulon Quixotefar' in field 'FirstName' fails calculation validation",
            attempts: 1, message: "HTTP 500")
        let settlement = SettlementRules.fileMaker.settlement(for: error, fields: ["FirstName", "LastName", "EventID"])
        #expect(
            settlement
                == .deadLetter(
                    code: "filemaker-507",
                    message:
                        "filemaker records.create failed: FileMaker code 507, a field's validation refused the record's value (field 'FirstName'); HTTP 500, attempts 1"
                ), "\(settlement)")
        var unnamed = error
        unnamed.vendorMessage = "Value 'Zebulon' does not meet validation entry options"
        guard case .deadLetter(_, let message) = SettlementRules.fileMaker.settlement(for: unnamed, fields: ["FirstName"]) else {
            Issue.record("a 507 was not a dead letter")
            return
        }
        #expect(message.contains("FileMaker's message names none of the written fields") && Self.leaks(message).isEmpty, "\(message)")
    }

    @Test("the eto service's errors for a search do not repeat the searched name, whatever ETO's message quotes")
    func serviceErrors() {
        let error = HTTPError(
            .vendor,
            context: .init(
                api: .eto, operation: "search.search", method: "GET", redactedURL: "https://eto/Search.svc/Search/792/‹redacted›"),
            status: 400, vendorMessage: "No participant Zebulon Quixotefar in program 792", attempts: 1, message: "HTTP 400")
        let failure = ETOService.serviceError(error, hiding: ["Zebulon", "Quixotefar", "1911-11-11"])
        #expect(failure.failure.code == "not-found")
        #expect(failure.failure.message == "ETO: No participant [personal] [personal] in program 792", "\(failure)")
    }
}

extension HandlerTests {
    @Test(
        "ETO: a search ETO refuses with a fault naming the person, and one that fails for now, settle with ids only: the fault's text and the URL's last name stay out"
    )
    func etoSearchFailuresWithoutNames() async throws {
        try await withBackends { b in
            let recorder = ETOCheckInRecorder(eto: b.etoAccess(), configuration: .default, logger: b.logs.logger)
            try await b.fault(
                #"{"api": "eto", "method": "GET", "path": "/*/Search/792/*", "kind": "status", "status": 400, "message": "No participant Zebulon Quixotefar born 1911-11-11", "count": 1}"#
            )
            let refused = await recorder.handle(try event(PersonalDataTests.zebulon))
            #expect(
                refused
                    == .deadLetter(code: "participant-unmatched", message: "ETO refused the search in program 792 at site 101 (HTTP 400)"),
                "\(refused)")
            try await b.fault(#"{"api": "eto", "method": "GET", "path": "/*/Search/792/*", "kind": "status", "status": 503, "count": 2}"#)
            let failed = await recorder.handle(try event(PersonalDataTests.zebulon))
            guard case .retry(_, let code, let message) = failed else {
                Issue.record("a 503 on the search was \(failed)")
                return
            }
            #expect(code == "eto-http-503")
            #expect(message.contains("Search.svc/Search/792/") && PersonalDataTests.leaks(message).isEmpty, "\(message)")
            let logged = b.logs.all.joined(separator: "\n")
            #expect(PersonalDataTests.leaks(logged).isEmpty, "\(logged)")
        }
    }

    @Test("FileMaker: a validation refusal quoting the value is a dead letter naming the code and the field, not the value")
    func fileMakerValidationWithoutValue() async throws {
        try await withBackends { b in
            let client = b.fileMaker
            let session = try await client.logIn(account: "switchboard", password: "fm-demo-Passw0rd!")
            let writer = FileMakerWriter(client: client, mapping: .default, session: .fixed(session), logger: b.logs.logger) { _, _ in }
            try await b.fault(
                #"{"api": "filemaker", "method": "POST", "path": "/*/records", "kind": "status", "status": 500, "code": "507", "message": "Value 'Zebulon Quixotefar' in field 'FirstName' fails calculation validation", "count": 1}"#
            )
            let settlement = await writer.handle(try event(PersonalDataTests.zebulon))
            guard case .deadLetter(let code, let message) = settlement else {
                Issue.record("a 507 was \(settlement)")
                return
            }
            #expect(code == "filemaker-507")
            #expect(message.contains("FileMaker code 507") && message.contains("field 'FirstName'"), "\(message)")
            #expect(PersonalDataTests.leaks(message).isEmpty, "\(message)")
        }
    }
}
