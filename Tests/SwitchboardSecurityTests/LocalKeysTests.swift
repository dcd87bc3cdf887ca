import Foundation
import SwitchboardSecurity
import Testing

@Suite("LocalKeys: the keys of a run on one machine")
struct LocalKeysTests {
    @Test("makes a private certificate per principal and allows every client, not the broker; a second run keeps the keys")
    func ensure() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let principals: [(name: String, role: Role)] = [("broker", .broker), ("kiosk-1", .kiosk), ("eto", .worker(service: "eto"))]
        let keys = try LocalKeys.ensure(in: directory, principals: principals)
        func mode(_ url: URL) throws -> Int? {
            (try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber)?.intValue
        }
        #expect(try mode(keys.secrets) == 0o700)
        for (name, role) in principals {
            #expect(try mode(keys.secrets.appendingPathComponent("\(name).secret")) == 0o600)
            let certificate = try Certificate.load(secretFile: keys.secrets.appendingPathComponent("\(name).secret").path)
            #expect(certificate.name == name && certificate.role == role && certificate.keyPair != nil)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: keys.allowed.path).sorted() == ["eto.cert", "kiosk-1.cert"])

        let before = try Certificate.load(publicFile: keys.secrets.appendingPathComponent("kiosk-1.cert").path).publicKey
        let again = try LocalKeys.ensure(in: directory, principals: principals + [("monitor", .monitor)])
        #expect(try Certificate.load(publicFile: again.secrets.appendingPathComponent("kiosk-1.cert").path).publicKey == before)
        #expect(FileManager.default.fileExists(atPath: again.allowed.appendingPathComponent("monitor.cert").path))

        #expect(
            keys.brokerArguments == ["--security-key", keys.secrets.path + "/broker.secret", "--security-certificates", keys.allowed.path])
        #expect(
            keys.clientArguments("eto") == [
                "--certificate", keys.secrets.path + "/eto.secret", "--broker-key", keys.secrets.path + "/broker.cert",
            ])
    }
}
