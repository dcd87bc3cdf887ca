import Crypto
import Foundation
import SwiftASN1
import X509

/// TLS material for the emulator: a certificate chain and private key in PEM, either given or
/// generated. Generation makes a throw-away certificate authority and a server certificate it
/// signs for `localhost` and `127.0.0.1`, so clients are tested with verification on: trusting
/// the generated CA file they connect; without it they must refuse.
public struct EmulatorTLS: Sendable {
    public var certificateChainPEM: String
    public var privateKeyPEM: String
    /// The CA that signed the server certificate, when the emulator generated it.
    public var authorityPEM: String?

    public init(certificateChainPEM: String, privateKeyPEM: String, authorityPEM: String? = nil) {
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
        self.authorityPEM = authorityPEM
    }

    /// Reads a PEM certificate (chain) file and a PEM private key file.
    public static func load(certificate: String, key: String) throws -> EmulatorTLS {
        func read(_ path: String, _ what: String) throws -> String {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw EmulatorError("cannot read the TLS \(what) file \(path)")
            }
            guard text.contains("-----BEGIN ") else { throw EmulatorError("TLS \(what) file \(path) is not PEM") }
            return text
        }
        return EmulatorTLS(certificateChainPEM: try read(certificate, "certificate"), privateKeyPEM: try read(key, "private key"))
    }

    /// A new CA and a server certificate for `hosts` (DNS names or IPv4/IPv6 literals), valid
    /// from an hour ago for `days` days.
    public static func generate(hosts: [String] = ["localhost", "127.0.0.1"], days: Int = 30) throws -> EmulatorTLS {
        let now = Date()
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(TimeInterval(days) * 86_400)
        let authorityKey = P256.Signing.PrivateKey()
        let authorityName = try DistinguishedName {
            OrganizationName("Switchboard")
            CommonName("Switchboard emulator test CA \(UUID().uuidString.prefix(8))")
        }
        let authority = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(authorityKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter, issuer: authorityName, subject: authorityName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(authorityKey))
        let serverKey = P256.Signing.PrivateKey()
        let serverName = try DistinguishedName {
            OrganizationName("Switchboard")
            CommonName(hosts.first ?? "localhost")
        }
        let names: [GeneralName] = hosts.map { host in
            if let bytes = Self.ipBytes(host) { return .ipAddress(ASN1OctetString(contentBytes: ArraySlice(bytes))) }
            return .dnsName(host)
        }
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter, issuer: authorityName, subject: serverName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: .init(authorityKey))
        return EmulatorTLS(
            certificateChainPEM: try server.serializeAsPEM().pemString, privateKeyPEM: serverKey.pemRepresentation,
            authorityPEM: try authority.serializeAsPEM().pemString)
    }

    /// Writes `ca.pem` (when generated), `server.pem` and `server-key.pem` (0600) into `directory`.
    public func write(to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if let authorityPEM {
            try Data(authorityPEM.utf8).write(to: URL(fileURLWithPath: directory).appendingPathComponent("ca.pem"), options: .atomic)
        }
        try Data(certificateChainPEM.utf8).write(
            to: URL(fileURLWithPath: directory).appendingPathComponent("server.pem"), options: .atomic)
        let keyPath = URL(fileURLWithPath: directory).appendingPathComponent("server-key.pem").path
        _ = FileManager.default.createFile(atPath: keyPath, contents: nil, attributes: [.posixPermissions: 0o600])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        try Data(privateKeyPEM.utf8).write(to: URL(fileURLWithPath: keyPath))
    }

    static func ipBytes(_ host: String) -> [UInt8]? {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 4 {
            let bytes = parts.compactMap { UInt8($0) }
            return bytes.count == 4 ? bytes : nil
        }
        if host == "::1" { return Array(repeating: 0, count: 15) + [1] }
        return nil
    }
}
