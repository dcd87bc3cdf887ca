import Foundation
import SwitchboardCredentials
import SwitchboardTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct EncryptedCredentialFileTests {
    func mode(_ path: String) throws -> mode_t {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        guard let permissions = attributes[.posixPermissions] as? NSNumber else { throw CocoaError(.fileNoSuchFile) }
        return mode_t(permissions.uint16Value & 0o777)
    }

    func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    func credential(_ token: String, clock: ManualClock, lifetime: TimeInterval? = 900) -> Credential {
        Credential(
            token: token, issuedAt: clock.now, expiresAt: lifetime.map { clock.now.addingTimeInterval($0) },
            headers: ["Authorization": "Bearer \(token)"], attributes: ["site": "12"])
    }

    @Test func roundTripAcrossTwoCaches() async throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let directory = temporary.path("state/credentials")
        let clock = ManualClock()
        let refresh = ControlledRefresh(clock: clock)

        let first = try CredentialCache(
            configuration: .init(now: { clock.now }), file: EncryptedCredentialFile(directory: directory, purpose: "worker:filemaker"))
        let fromRefresh = try await first.credential(for: fileMaker, refresh: refresh.closure)
        let stored = credential("eto-secret-8d2f", clock: clock, lifetime: nil)
        first.store(stored, for: eto)
        try await first.save()

        let file = try EncryptedCredentialFile(directory: directory, purpose: "worker:filemaker")
        let second = try CredentialCache(configuration: .init(now: { clock.now }), file: file)
        #expect(try await second.credential(for: fileMaker, refresh: refresh.closure) == fromRefresh)
        #expect(try await second.credential(for: eto, refresh: refresh.closure) == stored)
        #expect(refresh.calls == 1)

        let sealed = try bytes(file.path)
        #expect(sealed.prefix(6) == Data("SBCRED".utf8))
        for secret in ["secret-token-filemaker-1", "eto-secret-8d2f", "Bearer", "switchboard-worker", "site"] {
            #expect(sealed.range(of: Data(secret.utf8)) == nil, "\(secret) in the sealed file")
        }
        #expect(try mode(directory) == 0o700)
        #expect(try mode(file.keyPath) == 0o600)
        #expect(try mode(file.path) == 0o600)
        #expect(try String(contentsOfFile: file.keyPath, encoding: .utf8).count == 45)  // 44 base64 + newline
        // No temporary files left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["credentials.key", "credentials.sealed"])
    }

    @Test func changesAreWrittenWithoutBeingAskedAndRemovalsToo() async throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let clock = ManualClock()
        let file = try EncryptedCredentialFile(directory: temporary.path("c"))
        let cache = try CredentialCache(configuration: .init(now: { clock.now }), file: file)
        let stored = credential("auto-secret", clock: clock)
        cache.store(stored, for: eto)
        try await waitUntil("the store is written") { (try? file.load(now: clock.now))?[eto] == stored }
        cache.invalidate(eto, rejected: stored)
        try await waitUntil("the invalidation is written") { (try? file.load(now: clock.now))?.isEmpty == true }
    }

    @Test func everyWriteHasAFreshNonce() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let clock = ManualClock()
        let file = try EncryptedCredentialFile(directory: temporary.path("c"))
        let entries = [eto: credential("same", clock: clock)]
        try file.save(entries, now: clock.now)
        let once = try bytes(file.path)
        try file.save(entries, now: clock.now)
        let twice = try bytes(file.path)
        #expect(once.count == twice.count)
        #expect(once[16..<28] != twice[16..<28])
        #expect(try file.load(now: clock.now) == entries)
    }

    @Test func expiredCredentialsAreNotReloaded() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let clock = ManualClock()
        let file = try EncryptedCredentialFile(directory: temporary.path("c"))
        try file.save([eto: credential("short", clock: clock, lifetime: 60), fileMaker: credential("long", clock: clock, lifetime: 900)])
        clock.advance(by: 60)
        #expect(try file.load(now: clock.now).keys.sorted { $0.backend < $1.backend } == [fileMaker])
        let cache = try CredentialCache(configuration: .init(now: { clock.now }), file: file)
        #expect(cache.snapshot().map(\.key) == [fileMaker])
    }

    @Test func missingFileLoadsEmpty() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let file = try EncryptedCredentialFile(directory: temporary.path("c"))
        #expect(try file.load().isEmpty)
    }

    @Test func groupReadableKeyFileIsRefused() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let directory = temporary.path("c")
        let file = try EncryptedCredentialFile(directory: directory)
        chmod(file.keyPath, 0o640)
        let error = #expect(throws: CredentialFileError.self) { try EncryptedCredentialFile(directory: directory) }
        #expect(error?.code == .insecurePermissions)
        #expect(error?.path == file.keyPath)
        #expect(error?.description.contains("chmod 600 \(file.keyPath)") == true)
        // And a key kept elsewhere, in a file someone else may write.
        let elsewhere = temporary.path("key")
        _ = FileManager.default.createFile(atPath: elsewhere, contents: Data(), attributes: [.posixPermissions: 0o602])
        chmod(elsewhere, 0o602)
        #expect(throws: CredentialFileError.self) { try EncryptedCredentialFile(directory: directory, keyFile: elsewhere) }
    }

    @Test func openDirectoryIsRefusedNotTightened() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let directory = temporary.path("open")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        chmod(directory, 0o755)
        let error = #expect(throws: CredentialFileError.self) { try EncryptedCredentialFile(directory: directory) }
        #expect(error?.code == .insecurePermissions)
        #expect(error?.description.contains("chmod 700 \(directory)") == true)
        #expect(try mode(directory) == 0o755)
        #expect(!FileManager.default.fileExists(atPath: directory + "/credentials.key"))
    }

    @Test func groupReadableDataFileIsRefused() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let clock = ManualClock()
        let file = try EncryptedCredentialFile(directory: temporary.path("c"))
        try file.save([eto: credential("x", clock: clock)])
        chmod(file.path, 0o644)
        let error = #expect(throws: CredentialFileError.self) { try file.load(now: clock.now) }
        #expect(error?.code == .insecurePermissions)
    }

    @Test func tamperedFileIsATypedError() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let clock = ManualClock()
        let file = try EncryptedCredentialFile(directory: temporary.path("c"))
        try file.save([eto: credential("tamper-secret", clock: clock)])
        let original = try bytes(file.path)
        for offset in [0, 6, 20, 40, original.count - 1] {
            var tampered = original
            tampered[offset] ^= 0x01
            try tampered.write(to: URL(fileURLWithPath: file.path))
            let error = #expect(throws: CredentialFileError.self) { try file.load(now: clock.now) }
            #expect(error?.path == file.path)
            #expect(!"\(error!)".contains("tamper-secret"))
            switch offset {
            case 0: #expect(error?.code == .malformed)
            case 6: #expect(error?.code == .unsupportedVersion)  // version 257
            default: #expect(error?.code == .authenticationFailed)
            }
        }
        try original.prefix(20).write(to: URL(fileURLWithPath: file.path))
        #expect(throws: CredentialFileError.self) { try file.load(now: clock.now) }
        try original.write(to: URL(fileURLWithPath: file.path))
        #expect(try file.load(now: clock.now)[eto]?.token == "tamper-secret")
    }

    @Test func wrongKeyAndWrongPurposeAreTypedErrors() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let clock = ManualClock()
        let directory = temporary.path("c")
        let file = try EncryptedCredentialFile(directory: directory, purpose: "worker:eto")
        try file.save([eto: credential("x", clock: clock)])

        let otherKey = temporary.path("other.key")
        let wrongKey = try EncryptedCredentialFile(directory: directory, keyFile: otherKey, purpose: "worker:eto")
        #expect(wrongKey.keyID != file.keyID)
        let error = #expect(throws: CredentialFileError.self) { try wrongKey.load(now: clock.now) }
        #expect(error?.code == .wrongKey)
        #expect(error?.description.contains(otherKey) == true)

        let wrongPurpose = try EncryptedCredentialFile(directory: directory, purpose: "worker:sap")
        #expect(wrongPurpose.keyID == file.keyID)
        let purposeError = #expect(throws: CredentialFileError.self) { try wrongPurpose.load(now: clock.now) }
        #expect(purposeError?.code == .authenticationFailed)
    }

    @Test func unreadableFileFailsTheCacheUnlessTheCallerChoosesEmpty() async throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let clock = ManualClock()
        let file = try EncryptedCredentialFile(directory: temporary.path("c"))
        try Data("not a credential file at all, just some text".utf8).write(to: URL(fileURLWithPath: file.path))
        chmod(file.path, 0o600)
        let error = #expect(throws: CredentialFileError.self) { try CredentialCache(configuration: .init(now: { clock.now }), file: file) }
        #expect(error?.code == .malformed)
        let cache = try CredentialCache(configuration: .init(now: { clock.now }), file: file, ifUnreadable: .startEmpty)
        #expect(cache.snapshot().isEmpty)
        cache.store(credential("fresh", clock: clock), for: eto)
        try await cache.save()
        #expect(try file.load(now: clock.now)[eto]?.token == "fresh")
    }

    @Test func invalidKeyFileIsRefused() throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let directory = temporary.path("c")
        let file = try EncryptedCredentialFile(directory: directory)
        try Data("c2hvcnQ=\n".utf8).write(to: URL(fileURLWithPath: file.keyPath))
        let error = #expect(throws: CredentialFileError.self) { try EncryptedCredentialFile(directory: directory) }
        #expect(error?.code == .invalidKeyFile)
        #expect(error?.path == file.keyPath)
    }

    @Test func concurrentCreatorsAgreeOnOneKey() async throws {
        let temporary = try TemporaryDirectory("cred")
        defer { temporary.remove() }
        let directory = temporary.path("c")
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try EncryptedCredentialFile(directory: directory).keyID } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(ids.count == 1)
    }
}
