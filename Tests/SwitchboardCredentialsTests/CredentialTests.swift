import Foundation
import SwitchboardCredentials
import Testing

@Suite struct CredentialTests {
    let credential = Credential(
        token: "tok-7f3a9c-very-secret", issuedAt: Date(timeIntervalSince1970: 1_800_000_000),
        expiresAt: Date(timeIntervalSince1970: 1_800_000_900), headers: ["Authorization": "Bearer hdr-4b1e-also-secret"],
        attributes: ["database": "Intake"])

    func expectNoSecret(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!text.contains("tok-7f3a9c"), sourceLocation: sourceLocation)
        #expect(!text.contains("hdr-4b1e"), sourceLocation: sourceLocation)
    }

    @Test func descriptionsShowAFingerprintAndNoSecret() {
        expectNoSecret(credential.description)
        expectNoSecret(credential.debugDescription)
        expectNoSecret("\(credential)")
        expectNoSecret(String(reflecting: credential))
        var dumped = ""
        dump(credential, to: &dumped)
        expectNoSecret(dumped)
        expectNoSecret("\([fileMaker: credential])")
        #expect(credential.fingerprint.count == 8)
        #expect(credential.fingerprint.allSatisfy { $0.isHexDigit })
        #expect(credential.description.contains(credential.fingerprint))
        #expect(credential.description.contains("Authorization"))
        #expect(credential.description.contains("database: Intake"))
        // SHA-256("abc") begins ba7816bf.
        #expect(Credential(token: "abc", issuedAt: .now).fingerprint == "ba7816bf")
    }

    @Test func errorsNameTheKeyAndNoSecret() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock, limit: RefreshLimit(maximum: 1, per: 60))
        let token = credential
        let refresh: @Sendable (CredentialKey) async throws -> Credential = { _ in token }
        let first = try await cache.credential(for: fileMaker, refresh: refresh)
        cache.invalidate(fileMaker, rejected: first)
        let error = await #expect(throws: CredentialError.self) { try await cache.credential(for: fileMaker, refresh: refresh) }
        expectNoSecret("\(error!)")
        #expect("\(error!)".contains("filemaker/switchboard-worker"))
        cache.store(credential, for: eto)
        expectNoSecret("\(cache.snapshot())")
    }

    @Test func usability() {
        let expires = credential.expiresAt!
        #expect(credential.isUsable(at: expires.addingTimeInterval(-31), margin: 30))
        #expect(!credential.isUsable(at: expires.addingTimeInterval(-30), margin: 30))
        #expect(!credential.isUsable(at: expires))
        #expect(Credential(token: "x", issuedAt: .distantPast).isUsable(at: .distantFuture, margin: 30))
    }

    @Test func keyDescription() {
        #expect(fileMaker.description == "filemaker/switchboard-worker")
    }
}
