import Foundation
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardTesting
import Synchronization
import Testing

@Suite("Secrets never reach logs or errors", .timeLimit(.minutes(2)))
struct RedactionTests {
    @Test("No password, token, key or connection id in any log line or error description of a full run")
    func nothingLeaks() async throws {
        let logs = LogCapture()
        let (secrets, texts) = try await withHarness(logs: logs) { h async throws -> ([String], [String]) in
            var secrets: [String] = []
            var texts: [String] = []
            secrets += try await Flows.eto(h)
            secrets += try await Flows.fileMaker(h)
            secrets += try await Flows.directory(h)
            secrets += try await Flows.sap(h)

            // Errors: wrong passwords, rejected credentials, vendor errors, retries that ran out.
            let wrong = ["eto-Wrong-Passw0rd!", "fm-Wrong-Passw0rd!", "dir wrong & #pass é", "sap-Wrong-Passw0rd!"]
            secrets += wrong
            func record(_ body: () async throws -> Void) async {
                do {
                    try await body()
                    Issue.record("expected an error")
                } catch {
                    texts.append(String(describing: error))
                    if let error = error as? HTTPError {
                        texts.append(error.message)
                        texts += [error.vendorMessage, error.bodyExcerpt, error.context.redactedURL].compactMap { $0 }
                    }
                }
            }
            await record { _ = try await h.eto.authenticate(email: Seed.etoEmail, password: wrong[0]) }
            await record { _ = try await h.fileMaker().logIn(account: Seed.fmAccount, password: wrong[1]) }
            await record { _ = try await h.directory.logIn(user: Seed.directoryUser, password: wrong[2]) }
            await record { _ = try await h.sap.register(user: Seed.sapUser, password: wrong[3]) }

            let fm = h.fileMaker()
            let session = try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword)
            let key = try await h.directory.logIn(user: Seed.directoryUser, password: Seed.directoryPassword)
            let eto = try await h.eto.logIn(ETO.Account(email: Seed.etoEmail, password: Seed.etoPassword, siteID: 101, programID: 792))
            let connection = try await h.sap.register(user: Seed.sapUser, password: Seed.sapPassword)
            secrets += [session.token, key.key, eto.securityToken, connection.id.value]
            texts += [String(describing: session), String(describing: key), String(describing: eto), String(describing: connection.id)]

            try await h.fault(["api": "directory", "kind": "status", "status": 503, "count": 3])
            await record { _ = try await h.directory.logIn(user: Seed.directoryUser, password: Seed.directoryPassword) }
            try await h.fault([
                "api": "filemaker", "kind": "status", "status": 500, "code": "102", "message": "Field is missing", "count": 1,
            ])
            await record { _ = try await fm.records(layout: "CheckIns", auth: .fixed(session)) }
            try await h.expire("filemaker")
            await record { try await fm.setGlobals(["CheckIns::CurrentShift": "Day"], auth: .fixed(session)) }
            try await h.expire("directory")
            await record { _ = try await h.directory.people(auth: .fixed(key)) }
            try await h.expire("eto")
            await record { _ = try await h.eto.programs(siteID: 101, auth: .fixed(eto)) }
            try await h.fault(["api": "sap", "kind": "status", "status": 500, "count": 1])
            await record { _ = try await h.sap.check(connection.id) }
            // Connection calls with a wrong password, sent at once and on the challenge.
            for mode in [BasicAuthorizer.Mode.preemptive, .onChallenge] {
                let wrongUser = h.sap(SAP.UserCredentials(user: Seed.sapUser, password: wrong[3], mode: mode))
                texts.append(String(describing: SAP.UserCredentials(user: Seed.sapUser, password: wrong[3], mode: mode)))
                await record { _ = try await wrongUser.check(connection.id) }
                await record { _ = try await wrongUser.connection(connection.id) }
                await record { _ = try await wrongUser.serviceRoot(auth: .fixed(connection.id)) }
                await record { try await wrongUser.delete(connection.id) }
            }
            return (secrets, texts)
        }
        let lines = logs.all
        #expect(lines.count > 50, "the run logged every attempt")
        #expect(texts.count > 20)
        var leaks: [String] = []
        for secret in Set(secrets) {
            #expect(secret.count >= 8)
            let encoded = secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? secret
            leaks += (lines + texts).filter { $0.contains(secret) || $0.contains(encoded) }
        }
        #expect(leaks.isEmpty, "secrets leaked into: \(leaks.map { $0.prefix(200) })")
        // The account names are there: errors must say whose log-in failed.
        #expect(texts.contains { $0.contains(Seed.etoEmail) } && texts.contains { $0.contains(Seed.sapUser) })
    }
}
