import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SwitchboardEmulators
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// The ETO emulator against `shared/apis/eto.md`: the SSO log-in chain, session headers, the
/// catalog, participants, search, enrollment, TouchPoints, expiry and routing.
@Suite("ETO contract", .timeLimit(.minutes(1)))
struct ETOContractTests {
    static let email = "intake@riverside.example"
    static let password = "eto-demo-Passw0rd!"
    static let enterprise = "6513270e-269e-4d37-b2a7-4de452e6b438"
    static let site = 101

    // MARK: SSOAuthenticate

    @Test func authenticateGrantsAGUIDAndEchoesThePassword() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.authenticate(Self.email, Self.password)
            #expect(answer.status == 200)
            #expect(answer.mediaType == "application/json")
            let result = try #require(try answer.value["SSOAuthenticateResult"])
            let token = try #require(result["SSOAuthToken"]?.stringValue)
            #expect(WireFormat.isGUID(token))
            #expect(token != WireFormat.zeroGUID)
            #expect(result["AuthStatusCode"] == .integer(0))
            #expect(result["Password"] == .string(Self.password))
            #expect(result["Email"] == .string(Self.email))
            #expect(result["AccessKey"]?.stringValue != nil)
            #expect(result["MarketplaceId"]?.integerValue != nil)
            #expect(result["TimeZoneOffset"]?.isNull == true)
        }
    }

    @Test func badCredentialsAreHTTP200WithTheAllZeroGUID() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            for (email, password) in [(Self.email, "wrong-Passw0rd!"), ("nobody@riverside.example", Self.password)] {
                let answer = try await wire.authenticate(email, password)
                #expect(answer.status == 200)
                let result = try #require(try answer.value["SSOAuthenticateResult"])
                #expect(result["SSOAuthToken"] == .string(WireFormat.zeroGUID))
            }
            // The denied token opens nothing.
            let enterprises = try await wire.call(.GET, "/API/Security.svc/GetSSOEnterprises/\(WireFormat.zeroGUID)")
            #expect(enterprises.status == 401)
        }
    }

    @Test func malformedAuthenticateBodyIs400WithAFaultDetail() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let broken = try await wire.call(
                .POST, "/API/Security.svc/SSOAuthenticate/", body: Data("{\"security\":".utf8), contentType: "application/json")
            #expect(broken.status == 400)
            #expect(try broken.value["Detail"]?.stringValue?.isEmpty == false)
            let wrongShape = try await wire.call(.POST, "/API/Security.svc/SSOAuthenticate/", json: ["Email": Self.email])
            #expect(wrongShape.status == 400)
            #expect(try wrongShape.value["Detail"]?.stringValue?.isEmpty == false)
        }
    }

    @Test func nonJSONAuthenticateBodyIs400LikeEveryOtherRefusal() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, "/API/Security.svc/SSOAuthenticate/", body: Data("Email=intake&Password=x".utf8),
                contentType: "application/x-www-form-urlencoded")
            #expect(answer.status == 400)
            #expect(try answer.value["Detail"]?.stringValue?.isEmpty == false)
        }
    }

    // MARK: Enterprises, sites, site log-in

    @Test func enterprisesAreKeyGUIDStringValuePairs() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let sso = try await wire.sso()
            let answer = try await wire.call(.GET, "/API/Security.svc/GetSSOEnterprises/\(sso)")
            #expect(answer.status == 200)
            let list = try #require(try answer.value.arrayValue)
            #expect(list.count == 1)
            let first = try #require(list.first)
            #expect(first["Key"] == .string(Self.enterprise))
            #expect(WireFormat.isGUID(first["Key"]?.stringValue))
            #expect(first["Value"] == .string("Riverside Continuum of Care"))

            // An account restricted to no enterprise sees none, and may not list the sites.
            let auditor = try await wire.sso("auditor@riverside.example", "eto-audit-Passw0rd!")
            let none = try await wire.call(.GET, "/API/Security.svc/GetSSOEnterprises/\(auditor)")
            #expect(none.status == 200)
            #expect(try none.value == .array([]))
            let sites = try await wire.call(.GET, "/API/Security.svc/GetSSOSites/\(auditor)/\(Self.enterprise)")
            #expect(sites.status == 400)
        }
    }

    @Test func sitesAreKeyIntValueStringPairs() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let sso = try await wire.sso()
            let answer = try await wire.call(.GET, "/API/Security.svc/GetSSOSites/\(sso)/\(Self.enterprise)")
            #expect(answer.status == 200)
            let list = try #require(try answer.value.arrayValue)
            #expect(list.map { $0["Key"] } == [.integer(101), .integer(102), .integer(103)])
            #expect(
                list.map { $0["Value"]?.stringValue } == ["Riverside Emergency Shelter", "Harbor Family Center", "Eastside Youth Shelter"])
        }
    }

    @Test func siteLogInReturnsABareJSONString() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let sso = try await wire.sso()
            let answer = try await wire.call(.GET, "/API/Security.svc/SSOSiteLogin/\(Self.site)/\(Self.enterprise)/\(sso)/-360")
            #expect(answer.status == 200)
            #expect(answer.mediaType == "application/json")
            #expect(answer.text.hasPrefix("\"") && answer.text.hasSuffix("\""))
            let token = try #require(try answer.value.stringValue)
            #expect(WireFormat.isGUID(token))
            #expect(token != sso)
        }
    }

    @Test func siteLogInRefusalsAre400() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let sso = try await wire.sso()
            let unknownEnterprise = "11111111-2222-3333-4444-555555555555"
            for path in [
                "/API/Security.svc/SSOSiteLogin/\(Self.site)/\(unknownEnterprise)/\(sso)/0",  // unknown enterprise
                "/API/Security.svc/SSOSiteLogin/999/\(Self.enterprise)/\(sso)/0",  // site not in the enterprise
                "/API/Security.svc/SSOSiteLogin/\(Self.site)/\(Self.enterprise)/\(sso)/minus-six",  // non-numeric offset
                "/API/Security.svc/SSOSiteLogin/riverside/\(Self.enterprise)/\(sso)/0",  // non-numeric site
            ] {
                let answer = try await wire.call(.GET, path)
                #expect(answer.status == 400, "\(path)")
                #expect(try answer.value["Detail"]?.stringValue?.isEmpty == false)
            }
            let sites = try await wire.call(.GET, "/API/Security.svc/GetSSOSites/\(sso)/\(unknownEnterprise)")
            #expect(sites.status == 400)
        }
    }

    // MARK: Session headers

    @Test func laterCallsNeedBothSessionHeaders() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.siteLogIn()
            let path = "/API/Security.svc/GetSiteInfo/\(Self.site)"
            let cases: [(String, [(String, String)])] = [
                ("no headers", []),
                ("token only", [("securityToken", token)]),
                ("enterprise only", [("enterpriseGuid", Self.enterprise)]),
                ("wrong token", Wire.eto(UUID().uuidString.lowercased())),
                ("wrong enterprise", [("enterpriseGuid", "11111111-2222-3333-4444-555555555555"), ("securityToken", token)]),
            ]
            for (name, headers) in cases {
                let answer = try await wire.call(.GET, path, headers: headers)
                #expect(answer.status == 401, "\(name)")
                #expect(try answer.value["Detail"]?.stringValue?.isEmpty == false, "\(name)")
            }
            let good = try await wire.call(.GET, path, headers: Wire.eto(token))
            #expect(good.status == 200)
        }
    }

    @Test func updateCurrentProgram() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let path = "/API/Security.svc/UpdateCurrentProgram/"
            let ok = try await wire.call(.POST, path, headers: headers, json: ["ProgramID": 792])
            #expect(ok.status == 200)
            let disabled = try await wire.call(.POST, path, headers: headers, json: ["ProgramID": 794])
            #expect(disabled.status == 400)
            #expect(try disabled.value["Detail"]?.stringValue?.isEmpty == false)
            let otherSite = try await wire.call(.POST, path, headers: headers, json: ["ProgramID": 801])
            #expect(otherSite.status == 400)
            let missing = try await wire.call(.POST, path, headers: headers, json: [String: Any]())
            #expect(missing.status == 400)
        }
    }

    // MARK: Catalog

    @Test func programsIncludeDisabledOnes() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let answer = try await wire.call(.GET, "/API/Form.svc/Forms/Program/GetPrograms/\(Self.site)", headers: headers)
            #expect(answer.status == 200)
            let list = try #require(try answer.value.arrayValue)
            #expect(list.map { $0["ID"] } == [.integer(792), .integer(793), .integer(794)])
            #expect(list.map { $0["Disabled"] } == [.bool(false), .bool(false), .bool(true)])
            for program in list {
                #expect(program["Name"]?.stringValue?.isEmpty == false)
                #expect(program["Confidential"]?.boolValue != nil)
                #expect(WireFormat.isGUID(program["GUID"]?.stringValue))
            }
            let enabled = list.filter { $0["Disabled"] != .bool(true) }.compactMap { $0["Name"]?.stringValue }
            #expect(enabled == ["Emergency Shelter", "Street Outreach"])
        }
    }

    @Test func siteInfoCarriesTheTimeouts() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let answer = try await wire.call(.GET, "/API/Security.svc/GetSiteInfo/\(Self.site)", headers: headers)
            #expect(answer.status == 200)
            let info = try answer.value
            #expect(info["IdleTimeout_ThresholdInMinutes"] == .integer(20))
            #expect(info["SecurityTokenRecycleIntervalInMinutes"] == .integer(60))
        }
    }

    // MARK: Participants and search

    @Test func participantByCLID() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let answer = try await wire.call(.GET, "/API/Actor.svc/participant/1000", headers: headers)
            #expect(answer.status == 200)
            let p = try answer.value
            #expect(p["ID"] == .integer(1000))
            #expect(p["FirstName"] == .string("Ana"))
            #expect(p["MiddleInitial"] == .string("A"))
            #expect(p["LastName"] == .string("Ortiz"))
            #expect(p["DateOfBirth"] == .string("/Date(193881600000)/"))
            #expect(p["CaseNumber"] == .string("RC-24000"))
            #expect(p["Gender"] == .integer(0))
            #expect(p["Disabled"] == .bool(false))
            #expect(p["SubjectID"] == .integer(5000))
            #expect(WireFormat.isGUID(p["GUID"]?.stringValue))

            // A date of birth before 1970 is a negative WCF date.
            let older = try await wire.call(.GET, "/API/Actor.svc/participant/1003", headers: headers)
            #expect(try older.value["DateOfBirth"] == .string("/Date(-140313600000)/"))
        }
    }

    @Test func participantOfAnotherSiteIs400() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            for clid in ["1001", "999999", "abc"] {
                let answer = try await wire.call(.GET, "/API/Actor.svc/participant/\(clid)", headers: headers)
                #expect(answer.status == 400, "CLID \(clid)")
                #expect(try answer.value["Detail"]?.stringValue?.isEmpty == false)
            }
        }
    }

    @Test func searchByProgramAndText() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let answer = try await wire.call(.GET, "/API/Search.svc/Search/792/ortiz", headers: headers)
            #expect(answer.status == 200)
            let hits = try #require(try answer.value.arrayValue)
            #expect(hits.count == 1)
            let hit = try #require(hits.first)
            #expect(hit["CLID"] == .integer(1000))
            #expect(hit["FName"] == .string("Ana"))
            #expect(hit["LName"] == .string("Ortiz"))
            #expect(hit["DOB"] == .string("/Date(193881600000)/"))
            #expect(hit["ProgramStartDate"] == .string("/Date(1484028633406)/"))

            // Any part of a first name, last name or case number, in any case; not more than one.
            for text in ["ORTIZ", "rti", "z", "An", "rc-24000", "%20ortiz%20"] {
                let found = try #require(try await wire.call(.GET, "/API/Search.svc/Search/792/\(text)", headers: headers).value.arrayValue)
                #expect(found.contains { $0["CLID"] == .integer(1000) }, "\(text)")
            }
            for text in ["ortizz", "ortiz ana", "rc-240000"] {
                let found = try #require(try await wire.call(.GET, "/API/Search.svc/Search/792/\(text)", headers: headers).value.arrayValue)
                #expect(!found.contains { $0["CLID"] == .integer(1000) }, "\(text)")
            }

            // Another site's participant is not found; a program of another site is refused.
            let elsewhere = try await wire.call(.GET, "/API/Search.svc/Search/792/bell", headers: headers)
            #expect(try elsewhere.value == .array([]))
            let foreign = try await wire.call(.GET, "/API/Search.svc/Search/801/bell", headers: headers)
            #expect(foreign.status == 400)
        }
    }

    // MARK: Enrollment

    @Test func enrollment() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let path = "/API/Actor.svc/participant/enrollment/"
            let body: [String: Any] = ["participantID": 1003, "programID": 793, "startDate": "/Date(1700000000000)/"]
            let answer = try await wire.call(.POST, path, headers: headers, json: body)
            #expect(answer.status == 200)
            let id = try answer.value["SaveParticipantEnrollmentResult"]?["ID"]
            #expect(id?.integerValue != nil)

            let found = try await wire.call(.GET, "/API/Search.svc/Search/793/hart", headers: headers)
            #expect(try found.value[0]?["ProgramStartDate"] == .string("/Date(1700000000000)/"))

            let duplicate = try await wire.call(.POST, path, headers: headers, json: body)
            #expect(duplicate.status == 400)
            #expect(try duplicate.value["Detail"]?.stringValue?.isEmpty == false)

            var badDate = body
            badDate["programID"] = 792
            badDate["participantID"] = 1006
            badDate["startDate"] = "2023-11-14"
            let refused = try await wire.call(.POST, path, headers: headers, json: badDate)
            #expect(refused.status == 400)
        }
    }

    // MARK: TouchPoints

    static func checkIn(element: Int = 819, choice: Int = 1277, created: Int64) -> [String: Any] {
        [
            "TouchPointResponse": [
                "TouchPointID": 54, "SubjectID": 5000, "ResponseCreatedDate": "/Date(\(created))/", "ProgramID": 792,
                "ResponseElements": [
                    ["ElementID": element, "ElementType": 5, "Value": "Bed 7"],
                    ["ElementID": 814, "ElementType": 4, "ResponseElementChoices": [["TouchPointElementChoiceID": choice]]],
                ],
            ] as [String: Any]
        ]
    }

    /// A date element (820, "Night of", type 9) whose year does not fit a date: refused with
    /// 400, as any malformed date. It used to overflow `FindCriterion.dateKey` and kill the
    /// emulator (issue 15, found while fuzzing the FileMaker find parser).
    @Test func touchPointDateElementWithAnOverlongYearIsRefused() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            for (value, status) in [("1/1/99999999999999999", 400), ("11/20/2026", 200)] {
                var body = Self.checkIn(created: 1_700_000_123_456)
                var response = body["TouchPointResponse"] as? [String: Any] ?? [:]
                response["ResponseElements"] = [["ElementID": 820, "ElementType": 9, "Value": value]]
                body["TouchPointResponse"] = response
                let answer = try await wire.call(.POST, "/API/TouchPoint.svc/TouchPointResponseAdd/", headers: headers, json: body)
                #expect(answer.status == status, "\(value): \(answer.text)")
            }
        }
    }

    @Test func touchPointResponseRoundTrip() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let created: Int64 = 1_700_000_123_456
            let added = try await wire.call(
                .POST, "/API/TouchPoint.svc/TouchPointResponseAdd/", headers: headers, json: Self.checkIn(created: created))
            #expect(added.status == 200)
            let id = try #require(try added.value["AddTouchPointResponseResult"]?["TouchPointResponseID"]?.integerValue)

            let list = try await wire.call(
                .GET, "/API/TouchPoint.svc/ListTouchPointResponses?SubjectID=5000&TouchPointID=54", headers: headers)
            #expect(list.status == 200)
            let items = try #require(try list.value.arrayValue)
            let listed = try #require(items.first { $0["TouchPointResponseID"] == .integer(id) })
            #expect(listed["ResponseCreatedDate"] == .string("/Date(\(created))/"))

            let one = try await wire.call(
                .GET, "/API/TouchPoint.svc/GetTouchPointResponse?TouchPointID=54&TouchPointResponseID=\(id)", headers: headers)
            #expect(one.status == 200)
            let response = try one.value
            #expect(response["TouchPointResponseID"] == .integer(id))
            #expect(response["TouchPointID"] == .integer(54))
            #expect(response["SubjectID"] == .integer(5000))
            #expect(response["ProgramID"] == .integer(792))
            #expect(WireFormat.wcfMilliseconds(response["ResponseCreatedDate"]?.stringValue) == created)
            let elements = try #require(response["ResponseElements"]?.arrayValue)
            #expect(elements.count == 2)
            #expect(elements.first { $0["ElementID"] == .integer(819) }?["Value"] == .string("Bed 7"))
            let choice = elements.first { $0["ElementID"] == .integer(814) }?["ResponseElementChoices"]?[0]?["TouchPointElementChoiceID"]
            #expect(choice == .integer(1277))
        }
    }

    /// Responses are read through an index (subject → responses, id → response) rather than a
    /// scan; it must keep ETO's visibility (only the subject's site sees them) and be rebuilt
    /// from a state file at start.
    @Test func touchPointResponsesStaySiteScopedAndSurviveARestart() async throws {
        let directory = try TemporaryDirectory("eto-responses")
        defer { directory.remove() }
        let state = directory.path("state.json")
        let list = "/API/TouchPoint.svc/ListTouchPointResponses?SubjectID=5000&TouchPointID=54"
        let ids = try await withEmulator({ $0.statePath = state }) { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            var ids: [Int64] = []
            for created in [1_700_000_000_001, 1_700_000_000_002] as [Int64] {
                let added = try await wire.call(
                    .POST, "/API/TouchPoint.svc/TouchPointResponseAdd/", headers: headers, json: Self.checkIn(created: created))
                ids.append(try #require(try added.value["AddTouchPointResponseResult"]?["TouchPointResponseID"]?.integerValue))
            }
            // Another site's session sees neither the list nor the response.
            let elsewhere = Wire.eto(try await wire.siteLogIn(site: 102))
            #expect(try await wire.call(.GET, list, headers: elsewhere).value.arrayValue?.isEmpty == true)
            let hidden = try await wire.call(
                .GET, "/API/TouchPoint.svc/GetTouchPointResponse?TouchPointID=54&TouchPointResponseID=\(ids[0])", headers: elsewhere)
            #expect(hidden.status == 400)
            // The wrong TouchPoint for an existing response id is refused too.
            let wrong = try await wire.call(
                .GET, "/API/TouchPoint.svc/GetTouchPointResponse?TouchPointID=55&TouchPointResponseID=\(ids[0])", headers: headers)
            #expect(wrong.status == 400)
            return ids
        }
        try await withEmulator({ $0.statePath = state }) { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let items = try #require(try await wire.call(.GET, list, headers: headers).value.arrayValue)
            let listed = items.compactMap { $0["TouchPointResponseID"]?.integerValue }
            #expect(Array(listed.suffix(2)) == ids)
            let one = try await wire.call(
                .GET, "/API/TouchPoint.svc/GetTouchPointResponse?TouchPointID=54&TouchPointResponseID=\(ids[1])", headers: headers)
            #expect(WireFormat.wcfMilliseconds(try one.value["ResponseCreatedDate"]?.stringValue) == 1_700_000_000_002)
        }
    }

    @Test func touchPointResponseWithoutACreatedDateIsStampedWithTheEmulatorClock() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            try await wire.advanceClock(seconds: 2 * 86_400)  // far from the wall clock, before logging in
            let headers = Wire.eto(try await wire.siteLogIn())
            let before = try await wire.emulatorNowMilliseconds()
            var body = Self.checkIn(created: 0)
            var response = try #require(body["TouchPointResponse"] as? [String: Any])
            response["ResponseCreatedDate"] = nil
            body["TouchPointResponse"] = response
            let added = try await wire.call(.POST, "/API/TouchPoint.svc/TouchPointResponseAdd/", headers: headers, json: body)
            #expect(added.status == 200)
            let id = try #require(try added.value["AddTouchPointResponseResult"]?["TouchPointResponseID"]?.integerValue)
            let after = try await wire.emulatorNowMilliseconds()
            let one = try await wire.call(
                .GET, "/API/TouchPoint.svc/GetTouchPointResponse?TouchPointID=54&TouchPointResponseID=\(id)", headers: headers)
            let created = try #require(WireFormat.wcfMilliseconds(try one.value["ResponseCreatedDate"]?.stringValue))
            // The control API's `now` has whole seconds; allow for that.
            #expect(created >= before - 1_000 && created <= after + 1_000)
        }
    }

    @Test func invalidTouchPointElementsAre400() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let path = "/API/TouchPoint.svc/TouchPointResponseAdd/"
            let unknownElement = try await wire.call(.POST, path, headers: headers, json: Self.checkIn(element: 9999, created: 1))
            #expect(unknownElement.status == 400)
            #expect(try unknownElement.value["Detail"]?.stringValue?.isEmpty == false)
            let unknownChoice = try await wire.call(.POST, path, headers: headers, json: Self.checkIn(choice: 1300, created: 1))
            #expect(unknownChoice.status == 400)
            // Nothing was stored by the refused calls.
            let list = try await wire.call(.GET, "/API/TouchPoint.svc/ListTouchPointResponses?SubjectID=5000", headers: headers)
            #expect(try list.value.arrayValue?.count == 1)
        }
    }

    // MARK: Expiry

    @Test func idleSiteTokenExpires() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let path = "/API/Security.svc/GetSiteInfo/\(Self.site)"
            try await wire.advanceClock(seconds: 19 * 60)
            #expect(try await wire.call(.GET, path, headers: headers).status == 200)
            try await wire.advanceClock(seconds: 19 * 60)  // idle time restarts with each use
            #expect(try await wire.call(.GET, path, headers: headers).status == 200)
            try await wire.advanceClock(seconds: 21 * 60)
            let expired = try await wire.call(.GET, path, headers: headers)
            #expect(expired.status == 401)
            #expect(try expired.value["Detail"]?.stringValue?.isEmpty == false)
        }
    }

    @Test func siteTokenIsRecycledEvenWhenBusy() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let headers = Wire.eto(try await wire.siteLogIn())
            let path = "/API/Security.svc/GetSiteInfo/\(Self.site)"
            for _ in 0..<3 {
                try await wire.advanceClock(seconds: 19 * 60)
                #expect(try await wire.call(.GET, path, headers: headers).status == 200)
            }
            try await wire.advanceClock(seconds: 4 * 60)  // 61 minutes after log-in, 4 idle
            #expect(try await wire.call(.GET, path, headers: headers).status == 401)
        }
    }

    @Test func ssoTokenExpiresAfterSixtyMinutes() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let sso = try await wire.sso()
            let path = "/API/Security.svc/GetSSOEnterprises/\(sso)"
            try await wire.advanceClock(seconds: 59 * 60)
            #expect(try await wire.call(.GET, path).status == 200)
            try await wire.advanceClock(seconds: 2 * 60)
            let expired = try await wire.call(.GET, path)
            #expect(expired.status == 401)
            #expect(try expired.value["Detail"]?.stringValue?.isEmpty == false)
        }
    }

    // MARK: Routing

    @Test func wrongMethodIs405() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let sso = try await wire.sso()
            let headers = Wire.eto(try await wire.siteLogIn())
            let cases: [(HTTPMethod, String)] = [
                (.GET, "/API/Security.svc/SSOAuthenticate/"),
                (.POST, "/API/Security.svc/GetSSOEnterprises/\(sso)"),
                (.GET, "/API/Security.svc/UpdateCurrentProgram/"),
                (.DELETE, "/API/Actor.svc/participant/1000"),
                (.GET, "/API/TouchPoint.svc/TouchPointResponseAdd/"),
                (.POST, "/API/Form.svc/Forms/Program/GetPrograms/\(Self.site)"),
            ]
            for (method, path) in cases {
                let answer = try await wire.call(method, path, headers: headers)
                #expect(answer.status == 405, "\(method) \(path)")
            }
        }
    }

    @Test func unknownOperationIs404() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            for path in ["/API/Security.svc/NoSuchOperation", "/API/Nothing.svc/Anything/1", "/API/Security.svc"] {
                let answer = try await wire.call(.GET, path)
                #expect(answer.status == 404, "\(path)")
            }
        }
    }

    @Test func serviceAndOperationNamesAreCaseInsensitiveAndATrailingSlashIsFine() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = try await wire.call(
                .POST, "/API/security.svc/ssoauthenticate", json: ["security": ["Email": Self.email, "Password": Self.password]])
            #expect(auth.status == 200)
            let sso = try #require(try auth.value["SSOAuthenticateResult"]?["SSOAuthToken"]?.stringValue)
            #expect(try await wire.call(.GET, "/API/SECURITY.SVC/GETSSOENTERPRISES/\(sso)/").status == 200)
            let login = try await wire.call(.GET, "/API/security.svc/ssoSiteLogin/\(Self.site)/\(Self.enterprise)/\(sso)/0/")
            let token = try #require(try login.value.stringValue)
            let headers = Wire.eto(token)
            #expect(try await wire.call(.GET, "/API/form.svc/forms/program/getprograms/\(Self.site)/", headers: headers).status == 200)
            #expect(try await wire.call(.GET, "/API/ACTOR.SVC/Participant/1000/", headers: headers).status == 200)
            #expect(
                try await wire.call(.POST, "/API/security.svc/updatecurrentprogram", headers: headers, json: ["ProgramID": 792]).status
                    == 200)
        }
    }

    // MARK: Request log

    @Test func requestLogNamesCredentialsButNeverShowsThem() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let sso = try await wire.sso()
            let sites = try await wire.call(.GET, "/API/Security.svc/GetSSOSites/\(sso)/\(Self.enterprise)")
            #expect(sites.status == 200)
            let login = try await wire.call(.GET, "/API/Security.svc/SSOSiteLogin/\(Self.site)/\(Self.enterprise)/\(sso)/0")
            let token = try #require(try login.value.stringValue)
            let headers = Wire.eto(token)
            #expect(try await wire.call(.GET, "/API/Form.svc/Forms/Program/GetPrograms/\(Self.site)", headers: headers).status == 200)
            #expect(try await wire.call(.GET, "/API/Actor.svc/participant/1000", headers: headers).status == 200)
            _ = try await wire.authenticate(Self.email, "not-the-Passw0rd!")

            let log = try await wire.requestLogText(api: "eto")
            expectNoSecrets([Self.password, "not-the-Passw0rd!", sso, token], in: log)
            #expect(log.contains("password of \(Self.email)"))
            #expect(log.contains("sso eto-sso-1"))
            #expect(log.contains("securityToken eto-security-token-1"))
            let entries = try await wire.requests(api: "eto")
            #expect(entries.count == 6)
            #expect(entries.allSatisfy { $0["credential"] is String })
        }
    }
}

extension Wire {
    func authenticate(_ email: String, _ password: String) async throws -> Answer {
        try await call(.POST, "/API/Security.svc/SSOAuthenticate/", json: ["security": ["Email": email, "Password": password]])
    }

    /// A live SSO token, or a thrown mismatch.
    func sso(
        _ email: String = ETOContractTests.email, _ password: String = ETOContractTests.password
    ) async throws -> String {
        let answer = try await authenticate(email, password)
        guard answer.status == 200, let token = try answer.value["SSOAuthenticateResult"]?["SSOAuthToken"]?.stringValue,
            token != WireFormat.zeroGUID
        else { throw Mismatch("ETO SSOAuthenticate failed: \(answer.status)") }
        return token
    }

    /// A site security token for the seed's intake account.
    func siteLogIn(site: Int = ETOContractTests.site) async throws -> String {
        let sso = try await sso()
        let answer = try await call(.GET, "/API/Security.svc/SSOSiteLogin/\(site)/\(ETOContractTests.enterprise)/\(sso)/0")
        guard answer.status == 200, let token = try answer.value.stringValue else {
            throw Mismatch("ETO SSOSiteLogin failed: \(answer.status)")
        }
        return token
    }

    /// The headers every call after the site log-in sends.
    static func eto(_ token: String) -> [(String, String)] {
        [("enterpriseGuid", ETOContractTests.enterprise), ("securityToken", token), ("Accept", "application/json")]
    }
}
