// The keys of a Switchboard run on one machine (`switchboard up`): a certificate for each
// principal, made once and kept, and the broker's allow-list holding every client's public one.

public import Foundation
import ZeroMQ

/// A key directory: `secrets/` (0700) with each principal's `.cert` (0644) and `.secret` (0600),
/// and `allowed/` (0755), the broker's allow-list, with a copy (0644) of each client's `.cert`.
public struct LocalKeys: Sendable {
    public let directory: URL
    public var secrets: URL { directory.appendingPathComponent("secrets") }
    public var allowed: URL { directory.appendingPathComponent("allowed") }

    public init(directory: URL) {
        self.directory = directory
    }

    /// Makes what is missing: a certificate for each principal without one, and an allow-list
    /// copy of each client's (every role but the broker's, which is not a client). Keys already
    /// there are kept, so clients started earlier keep working.
    /// - Throws: when a directory or file cannot be made, or `secrets/` exists open to others.
    public static func ensure(in directory: URL, principals: [(name: String, role: Role)]) throws -> LocalKeys {
        let keys = LocalKeys(directory: directory)
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: keys.secrets, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // 0755 whatever the umask: the broker refuses an allow-list that group or others can
        // write (protocol/README.md, 13.6), and a umask of 002 would make this 0775.
        try fileManager.createDirectory(at: keys.allowed, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        for (name, role) in principals {
            let secret = keys.secrets.appendingPathComponent("\(name).secret").path
            if !fileManager.fileExists(atPath: secret) {
                try Certificate(name: name, role: role, keys: try CurveKeyPair.generate()).write(to: keys.secrets.path)
            }
            let allowedCopy = keys.allowed.appendingPathComponent("\(name).cert").path
            if role != .broker && !fileManager.fileExists(atPath: allowedCopy) {
                try fileManager.copyItem(atPath: keys.secrets.appendingPathComponent("\(name).cert").path, toPath: allowedCopy)
                try fileManager.setAttributes([.posixPermissions: 0o644], ofItemAtPath: allowedCopy)
            }
        }
        return keys
    }

    /// The broker's flags: its secret key and the allow-list.
    public var brokerArguments: [String] {
        ["--security-key", secrets.appendingPathComponent("broker.secret").path, "--security-certificates", allowed.path]
    }

    /// A client's flags: its own secret certificate and the broker's public one.
    public func clientArguments(_ name: String) -> [String] {
        [
            "--certificate", secrets.appendingPathComponent("\(name).secret").path, "--broker-key",
            secrets.appendingPathComponent("broker.cert").path,
        ]
    }
}
