import Foundation
import SwitchboardBackends
import SwitchboardHTTP
import Testing

@Suite("Errors, retries and re-authentication", .timeLimit(.minutes(2)))
struct ErrorTests {
    // MARK: Wrong passwords: a clear error, one attempt

    @Test("ETO: the all-zero GUID is invalidCredentials naming eto and the email, one attempt")
    func etoWrongPassword() async throws {
        try await withHarness { h async throws in
            let error = await #expect(throws: HTTPError.self) {
                try await h.eto.logIn(ETO.Account(email: Seed.etoEmail, password: "not-the-Passw0rd!", siteID: 101))
            }
            #expect(error?.code == .invalidCredentials && error?.api == "eto")
            let text = String(describing: error)
            #expect(text.contains(Seed.etoEmail) && text.contains("eto") && !text.contains("not-the-Passw0rd!"))
            #expect(error?.bodyExcerpt == nil, "the SSOAuthenticate body echoes the password")
            #expect(try await h.count("eto", path: "SSOAuthenticate") == 1)
            #expect(try await h.requests("eto").count == 1, "the chain stops at SSOAuthenticate")
        }
    }

    @Test("FileMaker: 212 is invalidCredentials naming filemaker and the account, one attempt")
    func fileMakerWrongPassword() async throws {
        try await withHarness { h async throws in
            let error = await #expect(throws: HTTPError.self) {
                try await h.fileMaker().logIn(account: Seed.fmAccount, password: "wrong-fm-Passw0rd!")
            }
            #expect(error?.code == .invalidCredentials && error?.api == "filemaker" && error?.vendorCode == "212")
            let text = String(describing: error)
            #expect(text.contains(Seed.fmAccount) && !text.contains("wrong-fm-Passw0rd!"))
            #expect(try await h.count("filemaker", path: "/sessions", method: "POST") == 1)
        }
    }

    @Test("Directory: 401 is invalidCredentials naming directory and the user, one attempt")
    func directoryWrongPassword() async throws {
        try await withHarness { h async throws in
            let error = await #expect(throws: HTTPError.self) {
                try await h.directory.logIn(user: Seed.directoryUser, password: "wrong & #dir pass")
            }
            #expect(error?.code == .invalidCredentials && error?.api == "directory" && error?.status == 401)
            let text = String(describing: error)
            #expect(text.contains(Seed.directoryUser) && !text.contains("wrong & #dir pass") && !text.contains("wrong%20%26"))
            #expect(try await h.count("directory", path: "/users") == 1)
        }
    }

    @Test("Directory: an error page with status 200 is not a key")
    func directoryErrorPageIsNotAKey() async throws {
        try await withHarness { h async throws in
            try await h.fault(["api": "directory", "kind": "login-page", "count": 1])
            let error = await #expect(throws: HTTPError.self) {
                try await h.directory.logIn(user: Seed.directoryUser, password: Seed.directoryPassword)
            }
            #expect(error?.code == .decoding && error?.status == 200)
        }
    }

    @Test("SAP: 401 is invalidCredentials naming sap and the user, one attempt, no challenge loop")
    func sapWrongPassword() async throws {
        try await withHarness { h async throws in
            let error = await #expect(throws: HTTPError.self) { try await h.sap.register(user: Seed.sapUser, password: "wrong-sap") }
            #expect(error?.code == .invalidCredentials && error?.api == "sap")
            #expect(String(describing: error).contains(Seed.sapUser))
            #expect(try await h.count("sap", path: "Connections") == 1)
            // A user who may not register gets 403, also once.
            let refused = await #expect(throws: HTTPError.self) {
                try await h.sap.register(user: "auditor", password: "sap-audit-Passw0rd!")
            }
            #expect(refused?.status == 403 && refused?.code != .invalidCredentials)
            #expect(try await h.count("sap", path: "Connections") == 2)
        }
    }

    // MARK: Retries

    @Test("FileMaker: a 500 that carries a code is not retried")
    func fileMakerLogicalErrorNotRetried() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            try await h.fault(["api": "filemaker", "kind": "status", "status": 500, "code": "101", "count": 1])
            let error = await #expect(throws: HTTPError.self) { try await fm.records(layout: "CheckIns", auth: auth) }
            #expect(error?.vendorCode == "101" && error?.attempts == 1)
            #expect(try await h.count("filemaker", path: "/layouts/CheckIns/records") == 1)
        }
    }

    @Test("Idempotent calls are retried on 503, 502 and a closed connection, within the policy")
    func transientFailuresRetried() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            try await h.fault(["api": "filemaker", "path": "/*/records", "kind": "status", "status": 503, "count": 2])
            #expect(try await fm.records(layout: "Staff", auth: auth).data.count == 5)
            #expect(
                try await h.requests("filemaker").filter { ($0["path"] as? String)?.contains("Staff/records") == true }.map {
                    $0["status"] as? Int
                } == [503, 503, 200])

            try await h.fault(["api": "filemaker", "path": "/*/_find", "kind": "status", "status": 502, "count": 1])
            #expect(try await fm.find(layout: "Staff", [.matching(("Name", "Grace"))], auth: auth).data.count == 1)
            #expect(try await h.count("filemaker", path: "/_find") == 2)

            let session = try await h.eto.logIn(ETO.Account(email: Seed.etoEmail, password: Seed.etoPassword, siteID: 101, programID: 792))
            try await h.fault(["api": "eto", "path": "/*/participant/*", "kind": "close", "count": 1])
            #expect(try await h.eto.participant(id: 1003, auth: .fixed(session)).lastName == "Hart")
            #expect(
                try await h.requests("eto").filter { ($0["path"] as? String)?.contains("participant") == true }.map { $0["status"] as? Int }
                    == [0, 200])

            // Past the policy's three attempts the error is reported, with the count.
            try await h.fault(["api": "directory", "kind": "status", "status": 503, "count": 5])
            let error = await #expect(throws: HTTPError.self) {
                try await h.directory.logIn(user: Seed.directoryUser, password: Seed.directoryPassword)
            }
            #expect(error?.status == 503 && error?.attempts == 3)
            #expect(try await h.count("directory", path: "/users") == 3)
        }
    }

    @Test("Writes that are not idempotent are not retried on 503")
    func writesNotRetried() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            try await h.fault(["api": "filemaker", "method": "POST", "path": "/*/records", "kind": "status", "status": 503, "count": 1])
            let error = await #expect(throws: HTTPError.self) { try await fm.create(layout: "Staff", fieldData: ["Name": "X"], auth: auth) }
            #expect(error?.status == 503 && error?.attempts == 1)
            #expect(try await h.count("filemaker", path: "Staff/records", method: "POST") == 1)
        }
    }

    // MARK: Re-authentication

    @Test("FileMaker: a forced expiry mid-run costs exactly one re-log-in, and the call succeeds")
    func fileMakerExpiryThroughProvider() async throws {
        try await withHarness { h async throws in
            let fm = h.fileMaker()
            let slot = CountingProvider { try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword) }
            let auth = CredentialSource.provider(slot.provider)
            #expect(try await fm.records(layout: "Staff", auth: auth).data.count == 5)
            #expect(slot.logIns == 1)
            try await h.fault(["api": "filemaker", "path": "/*/_find", "kind": "expire", "count": 1])
            let found = try await fm.find(layout: "CheckIns", [.matching(("FirstName", "Ana"))], auth: auth)
            #expect(found.data.count == 1)
            #expect(slot.logIns == 2)
            #expect(try await fm.record(layout: "CheckIns", id: "1", auth: auth)["FirstName"] == "Ana")
            #expect(slot.logIns == 2, "the fresh token is reused")
            #expect(try await h.count("filemaker", path: "/sessions", method: "POST") == 2)
            #expect(try await h.count("filemaker", path: "/_find") == 2)

            // Rejected again after the refresh: reported, no third attempt.
            try await h.fault(["api": "filemaker", "path": "/*/_find", "kind": "expire", "count": 2])
            let error = await #expect(throws: HTTPError.self) {
                try await fm.find(layout: "CheckIns", [.matching(("FirstName", "Ana"))], auth: auth)
            }
            #expect(error?.code == .credentialRejected)
            #expect(try await h.count("filemaker", path: "/_find") == 4)
            #expect(slot.logIns == 3)

            // A fixed credential that is rejected is reported as such, without a retry.
            let session = try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword)
            try await h.expire("filemaker")
            let fixed = await #expect(throws: HTTPError.self) { try await fm.layouts(auth: .fixed(session)) }
            #expect(fixed?.code == .credentialRejected && fixed?.vendorCode == "952")
        }
    }

    @Test("FileMaker: a token idle past 15 minutes is refused; validateSession says so")
    func fileMakerIdleExpiry() async throws {
        try await withHarness { h async throws in
            let fm = h.fileMaker()
            let session = try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword)
            #expect(!session.isProbablyExpired(lastUsed: Date()))
            #expect(session.isProbablyExpired(lastUsed: Date(timeIntervalSinceNow: -15 * 60)))
            try await h.advanceClock(seconds: 14 * 60)
            #expect(try await fm.validateSession(session))
            try await h.advanceClock(seconds: 15 * 60 + 1)
            #expect(try await fm.validateSession(session) == false)
        }
    }

    @Test("ETO: an expired session or a log-in page triggers one re-run of the log-in chain")
    func etoExpiryThroughProvider() async throws {
        try await withHarness { h async throws in
            let eto = h.eto
            let account = ETO.Account(email: Seed.etoEmail, password: Seed.etoPassword, siteID: 101, programID: 792)
            let slot = CountingProvider { try await eto.logIn(account) }
            let auth = CredentialSource.provider(slot.provider)
            #expect(try await eto.participant(id: 1000, auth: auth).firstName == "Ana")
            try await h.expire("eto")
            #expect(try await eto.search(programID: 792, text: "Ana", auth: auth).contains { $0.clid == 1000 })
            #expect(slot.logIns == 2)
            try await h.fault(["api": "eto", "path": "/*/participant/*", "kind": "login-page", "count": 1])
            #expect(try await eto.participant(id: 1003, auth: auth).firstName == "Devon")
            #expect(slot.logIns == 3)
            #expect(try await h.count("eto", path: "SSOAuthenticate") == 3)
        }
    }

    @Test("Directory: a rotated key is refreshed once through the provider")
    func directoryExpiryThroughProvider() async throws {
        try await withHarness { h async throws in
            let directory = h.directory
            let slot = CountingProvider { try await directory.logIn(user: Seed.directoryUser, password: Seed.directoryPassword) }
            #expect(try await directory.people(auth: .provider(slot.provider)).count == 3)
            try await h.expire("directory")
            #expect(try await directory.people(auth: .provider(slot.provider)).count == 3)
            #expect(slot.logIns == 2)
            // Deleting an unknown person is a 404 that is not about the key: no refresh.
            let error = await #expect(throws: HTTPError.self) { try await directory.deletePerson(id: 999, auth: .provider(slot.provider)) }
            #expect(error?.status == 404 && slot.logIns == 2)
        }
    }

    @Test("SAP: check, service root and delete carry the user's credentials, at once or on the challenge")
    func sapCallsWithAConnectionAuthenticateTheUser() async throws {
        try await withHarness { h async throws in
            let id = try await h.sap.register(user: Seed.sapUser, password: Seed.sapPassword).id
            try await h.clearRequests()
            // Preemptive: one request each.
            #expect(try await h.sap.check(id) == .valid)
            #expect(try await h.sap.serviceRoot(auth: .fixed(id)).contains("Beds"))
            let sent = try await h.requests("sap")
            #expect(sent.map { $0["status"] as? Int } == [200, 200])

            // On the challenge: the 401 with `WWW-Authenticate: Basic` is answered once, and succeeds.
            try await h.clearRequests()
            let waiting = h.sap(SAP.UserCredentials(user: Seed.sapUser, password: Seed.sapPassword, mode: .onChallenge))
            #expect(try await waiting.check(id) == .valid)
            #expect(try await waiting.connection(id)?.userName == Seed.sapUser)
            #expect(try await waiting.delete(id))
            #expect(try await waiting.check(id) == .gone)
            let challenged = try await h.requests("sap")
            #expect(challenged.map { $0["status"] as? Int } == [401, 200, 401, 200, 401, 200, 401, 404])
        }
    }

    @Test("SAP: wrong or missing credentials on a connection call are invalidCredentials, never retried or re-registered")
    func sapWrongCredentialsOnConnectionCalls() async throws {
        try await withHarness { h async throws in
            let id = try await h.sap.register(user: Seed.sapUser, password: Seed.sapPassword).id
            let wrongPassword = "sap-Wrong-Passw0rd!"
            for mode in [BasicAuthorizer.Mode.preemptive, .onChallenge] {
                let wrong = h.sap(SAP.UserCredentials(user: Seed.sapUser, password: wrongPassword, mode: mode))
                try await h.clearRequests()
                for call in 0..<3 {
                    let error = await #expect(throws: HTTPError.self) {
                        switch call {
                        case 0: _ = try await wrong.check(id)
                        case 1: _ = try await wrong.connection(id)
                        default: try await wrong.delete(id)
                        }
                    }
                    #expect(error?.code == .invalidCredentials && error?.api == "sap" && error?.status == 401)
                    let text = String(describing: error)
                    #expect(text.contains(Seed.sapUser) && !text.contains(wrongPassword))
                }
                // One request per call when sent at once; the bare one and one answer on the challenge.
                #expect(try await h.requests("sap").count == (mode == .preemptive ? 3 : 6))
            }
            // No credentials at all: the challenge cannot be answered.
            let error = await #expect(throws: HTTPError.self) { try await h.sap(nil).check(id) }
            #expect(error?.code == .invalidCredentials)

            // Through a provider a 401 is not a dead connection: nobody registers again.
            let sap = h.sap
            let slot = CountingProvider { try await sap.register(user: Seed.sapUser, password: Seed.sapPassword).id }
            let wrong = h.sap(SAP.UserCredentials(user: Seed.sapUser, password: wrongPassword))
            try await h.clearRequests()
            let rootError = await #expect(throws: HTTPError.self) { try await wrong.serviceRoot(auth: .provider(slot.provider)) }
            #expect(rootError?.code == .invalidCredentials)
            #expect(slot.logIns == 1)
            #expect(try await h.count("sap", path: "Connections") == 1)
            #expect(try await h.requests("sap").count == 2, "one registration, one service-root call")
            // The connection survived every refused call.
            #expect(try await h.sap.check(id) == .valid)
        }
    }

    @Test("SAP: a deleted connection is registered again once through the provider")
    func sapExpiryThroughProvider() async throws {
        try await withHarness { h async throws in
            let sap = h.sap
            let slot = CountingProvider { try await sap.register(user: Seed.sapUser, password: Seed.sapPassword).id }
            #expect(try await sap.serviceRoot(auth: .provider(slot.provider)).count == 3)
            try await h.expire("sap")
            #expect(try await sap.serviceRoot(auth: .provider(slot.provider)).count == 3)
            #expect(slot.logIns == 2)
            #expect(try await h.count("sap", path: "Connections") == 2)
        }
    }
}
