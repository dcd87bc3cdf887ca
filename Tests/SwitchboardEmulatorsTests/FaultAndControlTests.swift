import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import SwitchboardEmulators
import SwitchboardTesting
import Testing

/// The control API: each fault kind, the request log, the clock, expiry, reset, the state file
/// and HTTPS.
@Suite struct FaultAndControlTests {
    let checkIns = Wire.fm + "/layouts/CheckIns"

    @Test func aStatusFaultHitsTheChosenRouteForItsCountInTheAPIsOwnShape() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            try await wire.fault(["api": "filemaker", "method": "POST", "path": "/*/records", "kind": "status", "status": 503, "count": 2])
            for _ in 0..<2 {
                let failed = try await wire.call(.POST, checkIns + "/records", headers: auth, json: ["fieldData": [:]])
                #expect(failed.status == 503)
                #expect(failed.header("Content-Type")?.hasPrefix("text/html") == true, "the web server in front answers 5xx")
            }
            #expect(try await wire.call(.POST, checkIns + "/records", headers: auth, json: ["fieldData": [:]]).status == 200)
            #expect(try await wire.call(.GET, checkIns + "/records/1", headers: auth).status == 200, "other routes untouched")
            // A FileMaker 500 that carries a code.
            try await wire.fault(["api": "filemaker", "kind": "status", "status": 500, "code": "101", "count": 1])
            let coded = try await wire.call(.GET, checkIns + "/records/1", headers: auth)
            #expect(coded.status == 500)
            #expect(coded.code == "101")
            // ETO answers with a WCF fault, the Directory with Spring's body, SAP with OData's.
            try await wire.fault(["api": "eto", "kind": "status", "status": 502, "count": 1])
            let eto = try await wire.call(.GET, "/API/Security.svc/GetSSOEnterprises/x")
            #expect(eto.status == 502)
            #expect(try eto.object["Detail"] is String)
            try await wire.fault(["api": "directory", "kind": "status", "status": 500, "count": 1])
            #expect(try await wire.call(.GET, "/directory/people/x").object["error"] as? String == "Internal Server Error")
            let log = try await wire.requests(api: "filemaker")
            #expect(log.filter { ($0["fault"] as? String)?.hasPrefix("status#") == true }.count == 3)
        }
    }

    @Test func aRateIsAppliedDeterministically() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            try await wire.fault([
                "api": "filemaker", "path": "/fmi/data/vLatest/productInfo", "kind": "status", "status": 502, "rate": 0.25,
            ])
            var statuses: [Int] = []
            for _ in 0..<8 { statuses.append(try await wire.call(.GET, "/fmi/data/vLatest/productInfo").status) }
            #expect(statuses == [200, 200, 200, 502, 200, 200, 200, 502])
            let rules = try await wire.call(.GET, "/_emulator/faults").json as? [[String: Any]]
            #expect(rules?.first?["matched"] as? Int == 8)
            #expect(rules?.first?["injected"] as? Int == 2)
        }
    }

    @Test func aSeededRateIsRandomAndRepeatable() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let rule: [String: Any] = [
                "api": "filemaker", "path": "/fmi/data/vLatest/productInfo", "kind": "status", "status": 502, "rate": 0.5, "seed": 7,
            ]
            func statuses() async throws -> [Int] {
                var statuses: [Int] = []
                for _ in 0..<200 { statuses.append(try await wire.call(.GET, "/fmi/data/vLatest/productInfo").status) }
                return statuses
            }
            try await wire.fault(rule)
            let first = try await statuses()
            let hits = first.filter { $0 == 502 }.count
            #expect((70...130).contains(hits), "about half of 200 (\(hits))")
            #expect(first != (0..<200).map { $0 % 2 == 1 ? 502 : 200 }, "not the deterministic period")
            #expect(first.contains(where: { $0 != 200 && $0 != 502 }) == false)
            // Two hits in a row somewhere: a period of two never gives that.
            #expect(zip(first, first.dropFirst()).contains { $0 == 502 && $1 == 502 })
            let rules = try await wire.call(.GET, "/_emulator/faults").json as? [[String: Any]]
            #expect(rules?.first?["seed"] as? Int == 7)
            #expect(rules?.first?["injected"] as? Int == hits)
            // The same seed, the same hits.
            #expect(try await wire.call(.DELETE, "/_emulator/faults").status < 300)
            try await wire.fault(rule)
            #expect(try await statuses() == first)
        }
    }

    @Test func tooManyRequestsCarriesRetryAfter() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            try await wire.fault(["api": "sap", "kind": "status", "status": 429, "retry_after": 7, "count": 1])
            let answer = try await wire.call(.GET, "/org.riverside.outreach", headers: [("X-SMP-APPCID", "x")])
            #expect(answer.status == 429)
            #expect(answer.header("Retry-After") == "7")
        }
    }

    @Test func anExpiryFaultEndsTheSessionsAndAnswersLikeTheBackEnd() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.fileMakerLogIn()
            try await wire.fault(["api": "filemaker", "kind": "expire", "count": 1])
            let expired = try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)])
            #expect(expired.status == 401)
            #expect(expired.code == "952")
            #expect(
                try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)]).code == "952", "the token is really gone")
            let fresh = try await wire.fileMakerLogIn()
            #expect(try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(fresh)]).code == "0")
        }
    }

    @Test func expireNowThroughTheControlAPI() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.fileMakerLogIn()
            let answer = try await wire.call(.POST, "/_emulator/expire", json: ["api": "filemaker"])
            #expect((try answer.object["expired"] as? [String: Any])?["filemaker"] as? Int == 1)
            #expect(try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)]).code == "952")
            let bad = try await wire.call(.POST, "/_emulator/expire", json: ["api": "nope"])
            #expect(bad.status == 400)
        }
    }

    @Test func aLogInPageWhereJSONWasExpected() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            try await wire.fault(["api": "eto", "kind": "login-page", "count": 1])
            let page = try await wire.call(.GET, "/API/Security.svc/GetSiteInfo/101")
            #expect(page.status == 200)
            #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
            #expect(page.text.contains("<form"))
        }
    }

    @Test func latencyDelaysTheAnswer() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            try await wire.fault(["api": "filemaker", "kind": "latency", "latency_ms": 300, "count": 1])
            let start = ContinuousClock.now
            #expect(try await wire.call(.GET, "/fmi/data/v1/productInfo").status == 200)
            #expect(ContinuousClock.now - start >= .milliseconds(300))
        }
    }

    @Test func aClosedConnectionGivesTheClientNoResponse() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            try await wire.fault(["api": "directory", "kind": "close", "count": 1])
            await #expect(throws: (any Error).self) {
                try await wire.call(.GET, "/directory/users?user=outreach-team&password=x")
            }
            #expect(try await wire.call(.GET, "/directory/users?user=outreach-team&password=dir-demo-Passw0rd!").status == 200)
            let log = try await wire.requests(api: "directory")
            #expect(log.first?["status"] as? Int == 0)
            #expect((log.first?["fault"] as? String)?.hasPrefix("close#") == true)
        }
    }

    @Test func badFaultsAreRefusedNamingTheField() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let cases: [([String: Any], String)] = [
                (["kind": "explode"], "kind"), (["kind": "status"], "status"), (["kind": "status", "status": 200], "status"),
                (["kind": "latency"], "latency_ms"), (["kind": "close", "rate": 2], "rate"), (["kind": "close", "api": "eto2"], "api"),
                (["kind": "close", "colour": "red"], "colour"), (["kind": "close", "path": "no-slash"], "path"),
                (["kind": "close", "rate": 0.5, "seed": -1], "seed"),
            ]
            for (rule, field) in cases {
                let answer = try await wire.call(.POST, "/_emulator/faults", json: rule)
                #expect(answer.status == 400)
                #expect((try answer.object["error"] as? String)?.contains(field) == true, "\(answer.text)")
            }
            #expect(try await wire.call(.POST, "/_emulator/faults", body: Data("{".utf8), contentType: "application/json").status == 400)
            #expect(try await wire.call(.GET, "/_emulator/nothing").status == 404)
        }
    }

    @Test func theRequestLogNamesCredentialsAndHidesSecrets() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.fileMakerLogIn()
            _ = try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)])
            _ = try await wire.call(.DELETE, Wire.fm + "/sessions/\(token)")
            _ = try await wire.call(.GET, "/directory/users?user=outreach-team&password=dir-demo-Passw0rd%21")
            let text = try await wire.call(.GET, "/_emulator/requests").text
            for secret in [token, "fm-demo-Passw0rd!", "dir-demo-Passw0rd!", "5f1c0a9e7b2d4c8e9a3b6d1f0e2c4a7b"] {
                #expect(!text.contains(secret), "the log shows a secret")
            }
            let log = try await wire.requests()
            #expect(
                log.map { $0["credential"] as? String } == [
                    "basic switchboard", "bearer filemaker-session-1", nil, "password of outreach-team",
                ])
            #expect((log[2]["path"] as? String)?.contains("‹filemaker-session-1›") == true)
            #expect(log.map { $0["status"] as? Int } == [200, 200, 200, 200])
            let after = try await wire.requests(after: 3)
            #expect(after.count == 1)
            _ = try await wire.call(.DELETE, "/_emulator/requests")
            #expect(try await wire.requests().isEmpty)
        }
    }

    @Test func resetRestoresTheSeedAndClearsFaultsLogAndClock() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.fileMakerLogIn()
            _ = try await wire.call(.DELETE, checkIns + "/records/1", headers: [Wire.bearer(token)])
            try await wire.fault(["kind": "close"])
            try await wire.advanceClock(seconds: 3600)
            #expect(try await wire.call(.POST, "/_emulator/reset").status == 200)
            let health = try await wire.call(.GET, "/_emulator/health").object
            #expect(health["clock_offset_seconds"] as? Double == 0)
            #expect((try await wire.call(.GET, "/_emulator/faults").json as? [Any])?.isEmpty == true)
            let fresh = try await wire.fileMakerLogIn()
            #expect(try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(fresh)]).code == "0")
            #expect(try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)]).code == "952")
        }
    }

    @Test func onlyTheChosenAPIsAreServed() async throws {
        try await withEmulator({ configuration in configuration.apis = [.filemaker] }) { (emulator: RunningEmulator) async throws in
            let wire = Wire(emulator)
            #expect(try await wire.call(.GET, "/fmi/data/v1/productInfo").status == 200)
            #expect(try await wire.call(.GET, "/directory/people/x").status == 404)
            #expect(try await wire.call(.POST, "/_emulator/faults", json: ["kind": "close", "api": "eto"]).status == 400)
        }
    }

    @Test func theStateFileKeepsDataAcrossRestarts() async throws {
        let directory = try TemporaryDirectory("emulator-state")
        defer { directory.remove() }
        let state = directory.path("state.json")
        let eventID = UUID().uuidString
        try await withEmulator({ $0.statePath = state }) { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let created = try await wire.call(.POST, checkIns + "/records", headers: auth, json: ["fieldData": ["EventID": eventID]])
            #expect(created.code == "0")
            let user = try await wire.call(.POST, "/directory/users", json: ["name": "night-desk", "password": "pw-\(eventID)"])
            #expect(user.status == 200)
        }
        #expect(FileManager.default.fileExists(atPath: state))
        try await withEmulator({ $0.statePath = state }) { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let found = try await wire.call(.POST, checkIns + "/_find", headers: auth, json: ["query": [["EventID": "==\(eventID)"]]])
            #expect(found.code == "0")
            #expect(try await wire.call(.GET, "/directory/users?user=night-desk&password=pw-\(eventID)").status == 200)
        }
        // A damaged state file is refused with its path named, never silently replaced.
        try Data("{\"eto\":".utf8).write(to: URL(fileURLWithPath: state))
        var configuration = Emulator.Configuration(seed: try EmulatorSeed.bundled())
        configuration.statePath = state
        #expect {
            _ = try Emulator(configuration: configuration)
        } throws: { error in
            "\(error)".contains(state)
        }
    }

    @Test func seedsWithBrokenReferencesAreRefusedClearly() throws {
        var document = try #require(try JSONSerialization.jsonObject(with: try EmulatorSeed.bundled().encodedForTests()) as? [String: Any])
        var directory = try #require(document["directory"] as? [String: Any])
        directory["people"] = ((directory["people"] as? [Any]) ?? []) + [["id": 99, "name": "Nobody", "office": "x", "user": 42]]
        document["directory"] = directory
        let data = try JSONSerialization.data(withJSONObject: document)
        #expect {
            _ = try EmulatorSeed.decode(data, source: "mine.json")
        } throws: { error in
            "\(error)".contains("mine.json") && "\(error)".contains("user 42")
        }
        #expect {
            _ = try EmulatorSeed.decode(Data("{\"eto\":{}}".utf8), source: "tiny.json")
        } throws: { error in
            "\(error)".contains("tiny.json") && "\(error)".contains("eto.")
        }
    }

    @Test func httpsWithAGeneratedCertificateIsTrustedOnlyWithItsCA() async throws {
        let tls = try EmulatorTLS.generate()
        try await withEmulator({ $0.tls = tls }) { emulator in
            #expect(emulator.baseURL.hasPrefix("https://"))
            var trusting = TLSConfiguration.makeClientConfiguration()
            trusting.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array((tls.authorityPEM ?? "").utf8)))
            trusting.certificateVerification = .fullVerification
            let trusted = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: trusting))
            // A refused handshake surfaces when the connect attempt gives up: keep that short.
            var strangerSettings = HTTPClient.Configuration(tlsConfiguration: .makeClientConfiguration())
            strangerSettings.timeout = .init(connect: .seconds(1))
            let strangers = HTTPClient(eventLoopGroupProvider: .singleton, configuration: strangerSettings)
            do {
                let answer = try await Wire(base: emulator.baseURL, client: trusted).call(.GET, "/fmi/data/v1/productInfo")
                #expect(answer.status == 200)
                let localhost = "https://localhost:\(emulator.port)"
                #expect(try await Wire(base: localhost, client: trusted).call(.GET, "/_emulator/health").status == 200)

                // A container's streaming URL is https, with the host the client used.
                let wire = Wire(base: localhost, client: trusted)
                let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
                let boundary = "sb-tls"
                let body = Data(
                    "--\(boundary)\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"a.txt\"\r\n\r\nphoto\r\n--\(boundary)--\r\n"
                        .utf8)
                let uploaded = try await wire.call(
                    .POST, Wire.fm + "/layouts/CheckIns/records/3/containers/Photo/1", headers: auth, body: body,
                    contentType: "multipart/form-data; boundary=\(boundary)")
                #expect(uploaded.code == "0")
                let record = try await wire.call(.GET, Wire.fm + "/layouts/CheckIns/records/3", headers: auth)
                let url = try #require(
                    ((record.response["data"] as? [[String: Any]])?.first?["fieldData"] as? [String: Any])?["Photo"] as? String)
                #expect(url == "\(localhost)/fmi/data/streaming/Shelter/CheckIns/3/Photo")
                #expect(try await wire.fetch(url).text == "photo")
                await #expect(throws: (any Error).self) {
                    try await Wire(base: emulator.baseURL, client: strangers).call(.GET, "/fmi/data/v1/productInfo")
                }
            } catch {
                try? await trusted.shutdown()
                try? await strangers.shutdown()
                throw error
            }
            try await trusted.shutdown()
            try await strangers.shutdown()
        }
    }
}

extension EmulatorSeed {
    func encodedForTests() throws -> Data { try JSONEncoder().encode(self) }
}
