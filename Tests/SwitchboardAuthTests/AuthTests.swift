import Foundation
import Logging
import SwitchboardAuth
import SwitchboardBackends
import SwitchboardBus
import SwitchboardCredentials
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardTesting
import SwitchboardTokens
import Testing

/// Issue 5's "done means", through real parts: emulator, broker, auth service, worker cache.
@Suite(.timeLimit(.minutes(3))) struct AuthTests {
    @Test func aThousandWritesLogInOnceAnExpiryOnceMoreAndAHundredConcurrentRequestsOnce() async throws {
        try await AuthStack.run { stack in
            let auth = CredentialSource.provider(stack.tokens.fileMaker(account: "switchboard", database: "Shelter"))
            let fileMaker = stack.fileMaker
            // 1,000 writes, 8 at a time.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<8 {
                    group.addTask {
                        for n in 0..<125 {
                            _ = try await fileMaker.create(layout: "CheckIns", fieldData: ["EventID": .text("w-\(lane)-\(n)")], auth: auth)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await stack.fileMakerLogIns() == 1)

            // A forced 952 in the middle of the stream: one more log-in, and the write succeeds.
            _ = try await stack.control(
                .post, "faults", json: #"{"api":"filemaker","method":"POST","path":"/*/records","kind":"expire","count":1}"#)
            for n in 0..<20 {
                _ = try await fileMaker.create(layout: "CheckIns", fieldData: ["EventID": .text("after-expiry-\(n)")], auth: auth)
            }
            #expect(try await stack.fileMakerLogIns() == 2)

            // Every session ends; 100 requests arrive together and all see 952.
            _ = try await stack.control(.post, "expire", json: #"{"api":"filemaker"}"#)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<100 {
                    group.addTask {
                        _ = try await fileMaker.create(layout: "CheckIns", fieldData: ["EventID": .text("burst-\(n)")], auth: auth)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await stack.fileMakerLogIns() == 3)
            let creates = try await stack.requests(api: "filemaker").filter { ($0["path"] as? String)?.hasSuffix("/records") == true }
            #expect(creates.filter { $0["status"] as? Int == 200 }.count == 1_120)
        }
    }

    /// A back end that ends every session soon after it starts (the chaos run's expiry every 100
    /// calls): each session worked, so each log-in counts against the after-use budget in the
    /// worker's cache and, told by `token.get` … `worked`, in auth's, and every write goes
    /// through. Without the report of what worked, the storm guard's two refuse the third.
    @Test func sessionsThatWorkedAreNotAStormButTokensThatNeverWorkAre() async throws {
        let limit = RefreshLimit(maximum: 2, per: 60, afterUse: 20)
        try await AuthStack.run(refreshLimit: limit) { stack in
            let fileMaker = stack.fileMaker
            let auth = stack.tokens.fileMakerSource(account: "switchboard", database: "Shelter")
            for n in 0..<6 {
                _ = try await fileMaker.create(layout: "CheckIns", fieldData: ["EventID": .text("worked-\(n)")], auth: auth)
                _ = try await stack.control(.post, "expire", json: #"{"api":"filemaker"}"#)
            }
            _ = try await fileMaker.create(layout: "CheckIns", fieldData: ["EventID": .text("worked-last")], auth: auth)
            #expect(try await stack.fileMakerLogIns() == 7)
        }
        try await AuthStack.run(refreshLimit: limit) { stack in
            let fileMaker = stack.fileMaker
            // The same calls through a source that reports nothing: every loss looks like a storm.
            let auth = CredentialSource.provider(stack.tokens.fileMaker(account: "switchboard", database: "Shelter"))
            var failure: (any Error)?
            for n in 0..<6 {
                do {
                    _ = try await fileMaker.create(layout: "CheckIns", fieldData: ["EventID": .text("blind-\(n)")], auth: auth)
                } catch {
                    failure = error
                    break
                }
                _ = try await stack.control(.post, "expire", json: #"{"api":"filemaker"}"#)
            }
            // The worker's own guard refuses the third log-in (the refresh-limit error reaches
            // the client as "credential unavailable").
            #expect(failure.map { "\($0)".contains("credentialUnavailable") } == true, "\(String(describing: failure))")
            #expect(try await stack.fileMakerLogIns() == 2)
            // It says why and when a refresh is allowed again, so a worker waits that long.
            let refused = try #require(failure as? HTTPError)
            #expect(refused.message.contains("refresh limit exceeded"), "\(refused.message)")
            let wait = try #require(refused.retryAfter).timeIntervalSinceNow
            #expect(wait > 0 && wait <= 60, "\(wait)")
        }
    }

    /// Auth's own guard (14.2 `refresh-limit`, shared by every worker of the account) trips
    /// before a worker's: the worker's error says to try again after the interval.
    @Test func authsRefreshLimitTellsTheWorkerWhenToTryAgain() async throws {
        try await AuthStack.run(refreshLimit: RefreshLimit(maximum: 2, per: 60, afterUse: 2)) { stack in
            let roomy = AuthTokenProvider(
                client: stack.client,
                cache: CredentialCache(configuration: .init(refreshLimit: RefreshLimit(maximum: 50, per: 60), logger: stack.logs.logger)))
            var credential = try await roomy.credential(backend: "filemaker", account: "switchboard")
            roomy.rejected(credential, backend: "filemaker", account: "switchboard")
            credential = try await roomy.credential(backend: "filemaker", account: "switchboard")
            roomy.rejected(credential, backend: "filemaker", account: "switchboard")
            let started = Date()
            let error = await #expect(throws: AuthError.self) {
                try await roomy.credential(backend: "filemaker", account: "switchboard")
            }
            #expect(error?.code == .refreshLimit, "\(String(describing: error))")
            let at = try #require(error?.retryAfter)
            #expect(at.timeIntervalSince(started) >= 59 && at.timeIntervalSinceNow <= 60, "\(at)")
            #expect(try await stack.fileMakerLogIns() == 2)
        }
    }

    @Test func aWrongPasswordNamesTheBackEndAndAccountAndIsTriedOncePerCall() async throws {
        try await AuthStack.run(fileMakerPassword: "not-the-password") { stack in
            let body = Data(#"{"backend":"filemaker","account":"switchboard"}"#.utf8)
            func failure(_ operation: String, _ body: Data) async -> (Int, ServiceFailure)? {
                do {
                    _ = try await stack.client.request(service: "auth", operation: operation, content: body)
                    return nil
                } catch {
                    if case .serviceError(let status, let failure) = error { return (status, failure) }
                    return nil
                }
            }
            for call in 1...2 {
                let (status, failure) = try #require(await failure("token.get", body))
                #expect(status == 502)
                #expect(failure.code == "login-failed")
                #expect(failure.message.contains("filemaker") && failure.message.contains("switchboard"), "\(failure.message)")
                #expect(failure.retryable == false)
                #expect(try await stack.fileMakerLogIns() == call, "one attempt per call, no retry loop")
            }
            // Through a worker's client, the error is as clear.
            let auth = CredentialSource.provider(stack.tokens.fileMaker(account: "switchboard", database: "Shelter"))
            await #expect {
                _ = try await stack.fileMaker.create(layout: "CheckIns", fieldData: [:], auth: auth)
            } throws: { error in
                "\(error)".contains("filemaker") && "\(error)".contains("switchboard")
            }
            #expect(try await stack.fileMakerLogIns() == 3)
            // And a worker's cache sees auth's own code, `login-failed` (not "auth unavailable"),
            // so the storm guard counts the next log-in against the ordinary budget (14.3).
            let refused = await #expect(throws: AuthError.self) {
                try await stack.tokens.credential(backend: "filemaker", account: "switchboard")
            }
            #expect(refused?.code == .loginFailed && refused?.refusedCredentials == true, "\(String(describing: refused))")
            #expect(await failure("token.get", Data(#"{"backend":"filemaker","account":"nobody"}"#.utf8))?.0 == 404)
            #expect(await failure("token.get", Data("{}".utf8))?.0 == 400)
            #expect(await failure("token.steal", Data("{}".utf8))?.0 == 404)
        }
    }

    @Test func everyBackEndsCredentialComesThroughAuthAndWorks() async throws {
        try await AuthStack.run { stack in
            let eto = try await stack.tokens.credential(backend: "eto", account: "intake@riverside.example")
            #expect(eto.headers["securityToken"] == eto.token)
            #expect(eto.attributes["program"] == "792")
            let directory = try await stack.tokens.credential(backend: "directory", account: "outreach-team")
            let people = try await DirectoryClient(
                http: stack.http, baseURL: stack.emulator.baseURL + "/directory", logger: stack.logs.logger
            )
            .people(auth: .fixed(Directory.APIKey(key: directory.token, user: "outreach-team")))
            #expect(people.count == 3)
            let sap = try await stack.tokens.credential(backend: "sap", account: "outreach1")
            let status = try await SAPMobileServicesClient(
                http: stack.http, baseURL: stack.emulator.baseURL, applicationID: "org.riverside.outreach",
                credentials: SAP.UserCredentials(user: "outreach1", password: "sap-demo-Passw0rd!"), logger: stack.logs.logger
            ).check(SAP.ConnectionID(sap.token))
            #expect(status == .valid)
            let fileMaker = try await stack.tokens.credential(backend: "filemaker", account: "switchboard")
            #expect(fileMaker.headers["Authorization"] == "Bearer \(fileMaker.token)")
            #expect(fileMaker.expiresAt != nil)

            // Asked again, the worker's cache answers: auth is not asked, nobody logs in again.
            _ = try await stack.tokens.credential(backend: "filemaker", account: "switchboard")
            #expect(try await stack.fileMakerLogIns() == 1)

            let reply = try await stack.client.request(service: "auth", operation: "status")
            #expect(reply.status == 200)
            let text = String(decoding: reply.content, as: UTF8.self)
            let statusJSON = try #require(try JSONSerialization.jsonObject(with: reply.content) as? [String: Any])
            let accounts = try #require(statusJSON["accounts"] as? [[String: Any]])
            #expect(accounts.count == 4)
            #expect(accounts.allSatisfy { $0["logged_in"] as? Bool == true })
            for secret in AuthStack.passwords + [eto.token, directory.token, sap.token, fileMaker.token] {
                #expect(!text.contains(secret), "status shows a secret")
            }
        }
    }

    @Test(
        "check answers per account: working, refused (a wrong password) or unreachable; SAP's registration is checked with the server, never made twice; no secret in the answer"
    )
    func checkSaysWhichAccountsWork() async throws {
        // Nothing listens on port 9 of this host: the Directory cannot be reached.
        try await AuthStack.run(fileMakerPassword: "not-the-password", directoryBase: "https://127.0.0.1:9/directory") { stack in
            func check(_ content: String = "{}") async throws -> [String: [String: Any]] {
                let reply = try await stack.client.request(service: "auth", operation: "check", content: Data(content.utf8))
                let text = String(decoding: reply.content, as: UTF8.self)
                for secret in AuthStack.passwords + ["not-the-password"] { #expect(!text.contains(secret), "check shows a secret") }
                let object = try #require(try JSONSerialization.jsonObject(with: reply.content) as? [String: Any])
                #expect(object["checked_at"] is String)
                let accounts = try #require(object["accounts"] as? [[String: Any]])
                return Dictionary(uniqueKeysWithValues: accounts.map { ($0["backend"] as? String ?? "", $0) })
            }
            func registrations() async throws -> Int {
                try await stack.requests(api: "sap").filter {
                    ($0["method"] as? String) == "POST" && ($0["path"] as? String)?.hasSuffix("/Connections") == true
                }.count
            }
            let first = try await check()
            #expect(first.count == 4)
            #expect(first["eto"]?["result"] as? String == "working", "\(first)")
            #expect(first["sap"]?["result"] as? String == "working", "\(first)")
            #expect(first["filemaker"]?["result"] as? String == "refused" && first["filemaker"]?["code"] as? String == "login-failed")
            #expect((first["filemaker"]?["detail"] as? String)?.contains("switchboard") == true, "names the account")
            #expect(first["directory"]?["result"] as? String == "unreachable", "\(first)")
            #expect(try await registrations() == 1)

            // Again: the same registration, checked with the server, not a second one.
            let second = try await check(#"{"backend":"sap"}"#)
            #expect(second.keys.sorted() == ["sap"])
            #expect((second["sap"]?["detail"] as? String)?.contains("knows") == true, "\(second)")
            #expect(try await registrations() == 1)
            // Workers get the registration the check made.
            let sap = try await stack.tokens.credential(backend: "sap", account: "outreach1")
            #expect(try await registrations() == 1)
            // The server forgets it: the check registers again, once.
            _ = try await SAPMobileServicesClient(
                http: stack.http, baseURL: stack.emulator.baseURL, applicationID: "org.riverside.outreach",
                credentials: SAP.UserCredentials(user: "outreach1", password: "sap-demo-Passw0rd!"), logger: stack.logs.logger
            ).delete(SAP.ConnectionID(sap.token))
            let third = try await check(#"{"backend":"sap"}"#)
            #expect(third["sap"]?["result"] as? String == "working" && (third["sap"]?["detail"] as? String)?.contains("again") == true)
            #expect(try await registrations() == 2)
            await #expect(throws: ServiceClientError.self) {
                _ = try await stack.client.request(service: "auth", operation: "check", content: Data(#"{"backend":1}"#.utf8))
            }
            #expect(stack.logs.lines(containing: ["not-the-password"]).isEmpty)
        }
    }

    @Test func invalidationByFingerprintOnlyDropsTheCurrentToken() async throws {
        try await AuthStack.run { stack in
            let first = try await stack.service.token(for: CredentialKey(backend: "directory", account: "outreach-team"))
            let key = CredentialKey(backend: "directory", account: "outreach-team")
            #expect(!stack.service.invalidate(key, fingerprint: "00000000"))
            #expect(stack.service.invalidate(key, fingerprint: first.fingerprint))
            #expect(!stack.service.invalidate(key, fingerprint: first.fingerprint), "already gone")
        }
    }

    @Test func fileMakerSessionsAreKeptAliveAcrossTheIdleClockAndLoggedOutAtShutdown() async throws {
        try await AuthStack.run { stack in
            let key = CredentialKey(backend: "filemaker", account: "switchboard")
            let credential = try await stack.service.token(for: key)
            _ = try await stack.control(.post, "clock", json: #"{"advance_seconds":840}"#)
            await stack.service.keepAliveOnce(window: 3600)
            _ = try await stack.control(.post, "clock", json: #"{"advance_seconds":840}"#)
            // 28 minutes after log-in, the token still works: the keep-alive reset the idle clock.
            let session = FileMaker.Session(credential, account: "switchboard", database: "Shelter")
            _ = try await stack.fileMaker.record(layout: "CheckIns", id: "1", auth: .fixed(session))
            #expect(stack.service.cache.cached(key)?.token == credential.token)
            #expect(try await stack.fileMakerLogIns() == 1)

            await stack.service.logOutAll()
            let validate = try await stack.fileMaker.validateSession(session)
            #expect(!validate)
            let logOuts = try await stack.requests(api: "filemaker").filter { ($0["method"] as? String) == "DELETE" }
            #expect(logOuts.count == 1)
        }
    }

    @Test func noSecretReachesALogLineAnErrorOrAnEvent() async throws {
        try await AuthStack.run(fileMakerPassword: "fm-wrong-Passw0rd!") { stack in
            var secrets = AuthStack.passwords + ["fm-wrong-Passw0rd!"]
            var errors: [String] = []
            for (backend, account) in [
                ("eto", "intake@riverside.example"), ("directory", "outreach-team"), ("sap", "outreach1"), ("filemaker", "switchboard"),
            ] {
                do {
                    let credential = try await stack.tokens.credential(backend: backend, account: account)
                    secrets.append(credential.token)
                    // enterpriseGuid names an enterprise and is no secret (SwitchboardHTTP's Redactor).
                    secrets.append(contentsOf: credential.headers.filter { $0.key != "enterpriseGuid" }.values)
                    errors.append("\(credential)")
                } catch {
                    errors.append("\(error)")
                }
            }
            #expect(errors.contains { $0.contains("filemaker") && $0.contains("switchboard") })
            let pending = try await stack.outbox.pending(limit: 100)
            #expect(Set(pending.map(\.type)) == ["auth.token.issued", "auth.login.failed"])
            let events = pending.map { String(decoding: $0.content, as: UTF8.self) }
            // The fields of schemas/auth.event.v1.json, and no others.
            let allowed: Set<String> = ["backend", "account", "fingerprint", "expires_at", "reason", "at"]
            for event in pending {
                let object = try #require(try JSONSerialization.jsonObject(with: event.content) as? [String: Any])
                #expect(Set(object.keys).isSubset(of: allowed), "\(object.keys)")
                #expect(object["backend"] is String && object["account"] is String && object["at"] is String)
                #expect(throws: Never.self, "\(event.type)") { try AuthContent.validateEvent(event.content) }
            }
            let logs = stack.logs.all
            #expect(!logs.isEmpty)
            for secret in secrets where !secret.isEmpty {
                #expect(
                    !logs.contains { $0.contains(secret) }, "a log line shows a secret: \(logs.filter { $0.contains(secret) }.prefix(2))")
                #expect(
                    !errors.contains { $0.contains(secret) },
                    "an error or description shows a secret: \(errors.filter { $0.contains(secret) })")
                #expect(!events.contains { $0.contains(secret) }, "an event shows a secret")
            }
        }
    }
}
