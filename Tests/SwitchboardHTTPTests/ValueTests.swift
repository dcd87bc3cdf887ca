import Foundation
import SwitchboardHTTP
import Testing

/// The pure parts: retry decisions, Retry-After, redaction, wire values. No I/O.
struct ValueTests {
    @Test func retryDecisions() {
        let policy = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(100), maxDelay: .milliseconds(250), random: { 0.999_999 })
        let busy = RetryPolicy.Outcome.response(status: 503, retryAfter: nil, logicalFailure: false)
        #expect(policy.decide(attempt: 1, idempotent: false, outcome: busy) == .stop)
        #expect(policy.decide(attempt: 3, idempotent: true, outcome: busy) == .stop)
        guard case .retry(let first) = policy.decide(attempt: 1, idempotent: true, outcome: busy),
            case .retry(let second) = policy.decide(attempt: 2, idempotent: true, outcome: .connectionFailure)
        else {
            Issue.record("expected retries")
            return
        }
        #expect(first > .milliseconds(99) && first <= .milliseconds(100))
        #expect(second > .milliseconds(199) && second <= .milliseconds(200))
        let capped = RetryPolicy(maxAttempts: 9, baseDelay: .milliseconds(100), maxDelay: .milliseconds(250), random: { 0.999_999 })
        guard case .retry(let third) = capped.decide(attempt: 5, idempotent: true, outcome: busy) else {
            Issue.record("expected a retry")
            return
        }
        #expect(third <= .milliseconds(250))
        let zeroJitter = RetryPolicy(random: { 0 })
        #expect(zeroJitter.decide(attempt: 1, idempotent: true, outcome: busy) == .retry(after: .zero))
        for status in [400, 401, 404, 500, 501] {
            #expect(
                policy.decide(attempt: 1, idempotent: true, outcome: .response(status: status, retryAfter: nil, logicalFailure: false))
                    == .stop)
        }
        for status in [408, 429, 502, 504] {
            #expect(
                policy.decide(
                    attempt: 1, idempotent: true, outcome: .response(status: status, retryAfter: .seconds(1), logicalFailure: false))
                    == .retry(after: .seconds(1)))
            #expect(
                policy.decide(attempt: 1, idempotent: true, outcome: .response(status: status, retryAfter: nil, logicalFailure: true))
                    == .stop)
        }
        #expect(policy.decide(attempt: 1, idempotent: true, outcome: .permanentFailure) == .stop)
        #expect(
            policy.decide(attempt: 1, idempotent: true, outcome: .response(status: 503, retryAfter: .seconds(600), logicalFailure: false))
                == .retry(after: .seconds(30)))
    }

    @Test func retryAfterForms() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryPolicy.parseRetryAfter("7", now: now) == .seconds(7))
        #expect(RetryPolicy.parseRetryAfter(" 0 ", now: now) == .seconds(0))
        // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
        #expect(RetryPolicy.parseRetryAfter("Tue, 14 Nov 2023 22:13:50 GMT", now: now) == .seconds(30))
        #expect(RetryPolicy.parseRetryAfter("Tue, 14 Nov 2023 22:00:00 GMT", now: now) == .zero)
        #expect(RetryPolicy.parseRetryAfter("soon", now: now) == nil)
        #expect(RetryPolicy.parseRetryAfter("-5", now: now) == nil)
    }

    @Test func redactorCoversEncodedForms() {
        let secret = "a b/c&d+é"
        let redactor = Redactor(secrets: [secret, "ana:\(secret)"])
        let b64 = Data("ana:\(secret)".utf8).base64EncodedString()
        let inputs = [
            "raw \(secret)", "query a%20b%2Fc%26d%2B%C3%A9", "plus a+b%2Fc%26d%2B%C3%A9", "json a b\\/c&d+é", "basic \(b64)",
        ]
        for input in inputs {
            let output = redactor.redact(input)
            #expect(output.contains(Redactor.placeholder), "\(input)")
            #expect(!output.contains("c&d") && !output.contains("c%26d") && !output.contains(b64), "\(output)")
        }
        #expect(
            Redactor().redactURL("https://h/users?user=ana&password=x%20y&token=t1&q=ok")
                == "https://h/users?user=ana&password=‹redacted›&token=‹redacted›&q=ok")
        #expect(
            Redactor().redactBody(Data(#"{"SSOAuthToken":"426330ef","Email":"a@b","Password":"p\"w"}"#.utf8))
                == #"{"SSOAuthToken":"‹redacted›","Email":"a@b","Password":"‹redacted›"}"#)
        let headers: HTTPHeaderFields = [
            "Authorization": "Bearer x", "securityToken": "abc", "enterpriseGuid": "ent", "Accept": "application/json",
        ]
        #expect(
            headers.description == "Authorization: ‹redacted›, securityToken: ‹redacted›, enterpriseGuid: ent, Accept: application/json")
    }

    @Test func wcfDates() throws {
        #expect(WCFDate(wire: "/Date(1571411927090)/")?.milliseconds == 1_571_411_927_090)
        #expect(WCFDate(wire: "/Date(1571411927090)/")?.offsetMinutes == nil)
        #expect(WCFDate(wire: "/Date(1571411927090+0130)/")?.offsetMinutes == 90)
        #expect(WCFDate(wire: "\\/Date(1571411927090-0500)\\/")?.offsetMinutes == -300)
        #expect(WCFDate(wire: "/Date(-86400000)/")?.date == Date(timeIntervalSince1970: -86400))
        for bad in ["", "/Date()/", "/Date(12a)/", "Date(1)", "/Date(1-05)/", "/Date(1)", "2019-10-18"] {
            #expect(WCFDate(wire: bad) == nil, "\(bad)")
        }
        struct Holder: Codable { var at: WCFDate }
        let decoded = try JSONDecoder().decode(Holder.self, from: Data(#"{"at":"\/Date(1484028633406)\/"}"#.utf8))
        #expect(decoded.at.milliseconds == 1_484_028_633_406)
        let encoded = String(decoding: try JSONEncoder().encode(decoded), as: UTF8.self)
        #expect(encoded == #"{"at":"\/Date(1484028633406)\/"}"#)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Holder.self, from: Data(#"{"at":"yesterday"}"#.utf8)) }
    }

    @Test func fileMakerIDs() throws {
        struct Row: Codable { var recordId: FileMakerID }
        #expect(try JSONDecoder().decode(Row.self, from: Data(#"{"recordId":"32"}"#.utf8)).recordId == "32")
        #expect(try JSONDecoder().decode(Row.self, from: Data(#"{"recordId":32}"#.utf8)).recordId == 32)
        #expect(String(decoding: try JSONEncoder().encode(Row(recordId: 147)), as: UTF8.self) == #"{"recordId":"147"}"#)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Row.self, from: Data(#"{"recordId":true}"#.utf8)) }
    }

    @Test func vendorErrorShapes() {
        #expect(VendorError.parse(Data(#"{"messages":[{"code":"0","message":"OK"}]}"#.utf8)) == nil)
        #expect(
            VendorError.parse(Data(#"{"messages":[{"code":"306","message":"Record modification ID does not match"}]}"#.utf8))
                == VendorError(code: "306", message: "Record modification ID does not match"))
        #expect(
            VendorError.parse(Data(#"{"Detail":"Object reference not set"}"#.utf8))
                == VendorError(code: nil, message: "Object reference not set"))
        #expect(VendorError.parse(Data(#"{"ExceptionDetail":{"Message":"boom"},"Message":null}"#.utf8))?.message == "boom")
        #expect(
            VendorError.parse(Data(#"{"status":409,"error":"Conflict","message":"duplicate"}"#.utf8))
                == VendorError(code: "Conflict", message: "duplicate"))
        #expect(VendorError.parse(Data("<html/>".utf8)) == nil)
    }
}
