import Foundation
import SwitchboardSecurity
import Testing
import ZeroMQ

/// The allow-list decides every key's role, so nobody but its owner may change it (protocol
/// 13.6). These make real directories and files with the modes an operator could leave behind.
@Suite("Allow-list file modes")
struct AllowListModesTests {
    /// `secrets/` (where keygen writes) and `allowed/` (0755) in a fresh temporary directory.
    struct Directory {
        let root: String
        var secrets: String { root + "/secrets" }
        var allowed: String { root + "/allowed" }

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("allow-list-modes-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: allowed, withIntermediateDirectories: true)
            try chmod(allowed, 0o755)
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }

        /// Makes a certificate in `secrets/` and copies its public part into `allowed/` (as
        /// the README's `cp` does); returns the copy's path and the key.
        @discardableResult
        func allow(_ name: String, role: Role) throws -> (path: String, key: CurveKey) {
            let certificate = Certificate(name: name, role: role, keys: try CurveKeyPair.generate())
            let (publicPath, _) = try certificate.write(to: secrets)
            let copy = allowed + "/\(name).cert"
            try FileManager.default.copyItem(atPath: publicPath, toPath: copy)
            return (copy, certificate.publicKey)
        }
    }

    static func chmod(_ path: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    static func mode(_ path: String) throws -> Int {
        try #require((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue)
    }

    /// The failure `load` throws, or nil when it loads.
    static func refusal(_ load: () throws -> Void) -> String? {
        do {
            try load()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("a certificate directory of mode 0777 is refused at load, naming it and the chmod")
    func worldWritableDirectory() throws {
        let directory = try Directory()
        defer { directory.remove() }
        try directory.allow("ops-admin", role: .admin)
        try Self.chmod(directory.allowed, 0o777)
        let message = try #require(Self.refusal { _ = try AllowList(directory: directory.allowed) })
        #expect(message.contains("certificate directory \(directory.allowed) (mode 777)"), "\(message)")
        #expect(message.contains("chmod go-w \(directory.allowed)"), "\(message)")
    }

    @Test(
        "a certificate that group or others can write is refused at load, naming the file",
        arguments: [0o666, 0o664, 0o646, 0o622])
    func writableCertificate(mode: Int) throws {
        let directory = try Directory()
        defer { directory.remove() }
        try directory.allow("kiosk-1", role: .kiosk)
        let (path, _) = try directory.allow("ops-admin", role: .admin)
        try Self.chmod(path, mode)
        let message = try #require(Self.refusal { _ = try AllowList(directory: directory.allowed) })
        #expect(message.contains("certificate \(path) (mode \(String(mode, radix: 8)))"), "\(message)")
        #expect(message.contains("chmod go-w \(path)"), "\(message)")
        #expect(!message.contains("kiosk-1.cert"), "only the exposed file is named: \(message)")
    }

    @Test("every exposed path is named in one message with one chmod for all")
    func everyPathNamed() throws {
        let directory = try Directory()
        defer { directory.remove() }
        let (first, _) = try directory.allow("a-1", role: .kiosk)
        let (second, _) = try directory.allow("b-1", role: .admin)
        try Self.chmod(first, 0o664)
        try Self.chmod(second, 0o666)
        try Self.chmod(directory.allowed, 0o775)
        let message = try #require(Self.refusal { _ = try AllowList(directory: directory.allowed) })
        #expect(message.contains("chmod go-w \(directory.allowed) \(first) \(second)"), "\(message)")
    }

    @Test("a symbolic link to a writable file, or into a writable directory, is refused; to a safe one it loads")
    func symbolicLinks() throws {
        let directory = try Directory()
        defer { directory.remove() }
        let elsewhere = directory.root + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try Self.chmod(elsewhere, 0o755)
        let (copy, key) = try directory.allow("ops-admin", role: .admin)
        let target = elsewhere + "/ops-admin.cert"
        try FileManager.default.moveItem(atPath: copy, toPath: target)
        try FileManager.default.createSymbolicLink(atPath: copy, withDestinationPath: target)
        #expect(try AllowList(directory: directory.allowed).certificate(for: key)?.role == .admin)

        try Self.chmod(target, 0o666)
        let file = try #require(Self.refusal { _ = try AllowList(directory: directory.allowed) })
        #expect(file.contains("certificate \(copy) (-> \(target)) (mode 666)") && file.contains("chmod go-w \(target)"), "\(file)")

        try Self.chmod(target, 0o644)
        try Self.chmod(elsewhere, 0o777)
        let holder = try #require(Self.refusal { _ = try AllowList(directory: directory.allowed) })
        #expect(holder.contains("directory \(elsewhere), which holds the target of \(copy) (mode 777)"), "\(holder)")

        // The certificate directory itself through a link: the directory read is the one checked.
        try Self.chmod(elsewhere, 0o755)
        let linked = directory.root + "/linked"
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: directory.allowed)
        #expect(try AllowList(directory: linked).count == 1)
        try Self.chmod(directory.allowed, 0o777)
        let through = try #require(Self.refusal { _ = try AllowList(directory: linked) })
        #expect(through.contains("certificate directory \(linked) (-> \(directory.allowed)) (mode 777)"), "\(through)")
    }

    @Test("a failed reload keeps the previous list: a world-writable admin certificate added later is not loaded")
    func reloadKeepsPreviousList() throws {
        let directory = try Directory()
        defer { directory.remove() }
        let (_, kiosk) = try directory.allow("kiosk-1", role: .kiosk)
        let list = try AllowList(directory: directory.allowed)
        #expect(list.count == 1)

        let (path, admin) = try directory.allow("intruder", role: .admin)
        try Self.chmod(path, 0o666)
        let message = try #require(Self.refusal { try list.reload() })
        #expect(message.contains(path), "\(message)")
        #expect(list.certificate(for: admin) == nil)
        #expect(list.certificate(for: kiosk)?.role == .kiosk)

        try Self.chmod(path, 0o644)
        try Self.chmod(directory.allowed, 0o757)
        #expect(Self.refusal { try list.reload() }?.contains(directory.allowed) == true)
        #expect(list.certificate(for: admin) == nil)

        try Self.chmod(directory.allowed, 0o755)
        try list.reload()
        #expect(list.certificate(for: admin)?.role == .admin)
    }

    @Test("the fingerprint the broker watches changes with a chmod, so the fix a refusal names is noticed without a SIGHUP")
    func fingerprintSeesModes() throws {
        let directory = try Directory()
        defer { directory.remove() }
        let (path, _) = try directory.allow("kiosk-1", role: .kiosk)
        let list = try AllowList(directory: directory.allowed)
        let before = list.fingerprint()
        try Self.chmod(path, 0o666)
        let file = list.fingerprint()
        #expect(file != before)
        try Self.chmod(path, 0o644)
        #expect(list.fingerprint() == before)
        try Self.chmod(directory.allowed, 0o777)
        #expect(list.fingerprint() != before)
    }

    @Test("keygen's certificate and the README's cp pass under umasks 022 and 002 (a real cp)")
    func keygenAndCopyPass() throws {
        for umask in ["022", "002"] {
            let directory = try Directory()
            defer { directory.remove() }
            let certificate = Certificate(name: "riverside-1", role: .kiosk, keys: try CurveKeyPair.generate())
            let (publicPath, _) = try certificate.write(to: directory.secrets)
            #expect(try Self.mode(publicPath) == 0o644)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "umask \(umask) && cp \"$0\" \"$1\"/", publicPath, directory.allowed]
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            #expect(try AllowList(directory: directory.allowed).certificate(for: certificate.publicKey) != nil, "umask \(umask)")
        }
    }

    @Test("switchboard up's keys (LocalKeys) make an allow-list the broker accepts")
    func localKeysPass() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("local-keys-modes-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let keys = try LocalKeys.ensure(in: root, principals: [("broker", .broker), ("kiosk-1", .kiosk), ("ops", .admin)])
        #expect(try Self.mode(keys.allowed.path) == 0o755)
        #expect(try Self.mode(keys.allowed.appendingPathComponent("ops.cert").path) == 0o644)
        #expect(try AllowList(directory: keys.allowed.path).count == 2)
    }
}
