// The desk's staff accounts: a JSON file of mode 0600 beside the kiosk's outbox, written by
// `switchboard-kiosk desk-user` and read by the desk at sign-in. A password is kept only as a
// PBKDF2-HMAC-SHA256 hash (210,000 rounds, OWASP's floor for it, and a 16-byte random salt).
// Each account has a staff id (`staff-` and 8 random hex digits) that events carry as
// `recorded_by`: a name never leaves this file.

import Crypto
import Foundation
import SwitchboardRuntime
import _CryptoExtras

/// One staff member's account.
public struct DeskAccount: Codable, Sendable, Hashable {
    public var name: String
    /// What events and logs name: `staff-` and 8 hex digits.
    public var staffID: String
    /// `pbkdf2-sha256`.
    public var algorithm: String
    public var iterations: Int
    /// Base64.
    public var salt: String
    /// Base64 of the 32-byte derived key.
    public var hash: String

    enum CodingKeys: String, CodingKey {
        case name, staffID = "staff_id", algorithm, iterations, salt, hash
    }

    public static let algorithm = "pbkdf2-sha256"
    public static let iterations = 210_000

    /// A new account for `name` with `password`, a fresh salt and staff id.
    public static func make(name: String, password: String, iterations: Int = DeskAccount.iterations) throws -> DeskAccount {
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let staff = "staff-" + (0..<4).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        return DeskAccount(
            name: name, staffID: staff, algorithm: Self.algorithm, iterations: iterations, salt: Data(salt).base64EncodedString(),
            hash: try derive(password, salt: salt, iterations: iterations).base64EncodedString())
    }

    static func derive(_ password: String, salt: [UInt8], iterations: Int) throws -> Data {
        let key = try KDF.Insecure.PBKDF2.deriveKey(
            from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: 32, rounds: iterations)
        return key.withUnsafeBytes { Data($0) }
    }

    /// Whether `password` is this account's (in constant time once derived). Slow on purpose:
    /// call it off the cooperative pool (`DeskAccounts.verify`).
    public func matches(_ password: String) -> Bool {
        guard algorithm == Self.algorithm, let salt = Data(base64Encoded: salt), let stored = Data(base64Encoded: hash),
            let derived = try? Self.derive(password, salt: Array(salt), iterations: iterations)
        else { return false }
        return ConstantTime.equal(Array(derived), Array(stored))
    }

    /// A name staff can type: 1–64 characters, no control characters, not blank.
    public static func checkName(_ name: String) throws(DeskAccounts.Failure) {
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty, name.unicodeScalars.count <= 64,
            !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { throw DeskAccounts.Failure("an account name must be 1–64 characters without control characters") }
    }
}

/// The accounts file.
public struct DeskAccounts: Sendable {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    public let path: String
    public private(set) var accounts: [DeskAccount]

    /// The shortest password `add` takes.
    public static let minimumPasswordLength = 8

    /// Reads `path`; a missing file is no accounts. A file others may read is refused.
    public init(path: String) throws(Failure) {
        self.path = path
        guard FileManager.default.fileExists(atPath: path) else {
            accounts = []
            return
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let mode = (attributes?[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
        guard mode & 0o077 == 0 else {
            throw Failure("the desk accounts file \(path) can be read by others (mode \(String(mode, radix: 8))): chmod 600 \(path)")
        }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            accounts = try JSONDecoder().decode(File.self, from: data).accounts
        } catch {
            throw Failure("the desk accounts file \(path) cannot be read: \(error.localizedDescription)")
        }
    }

    struct File: Codable {
        var accounts: [DeskAccount]
    }

    public func account(named name: String) -> DeskAccount? { accounts.first { $0.name == name } }

    /// Adds an account (refused when the name is taken) and saves the file.
    public mutating func add(name: String, password: String) throws -> DeskAccount {
        try DeskAccount.checkName(name)
        guard account(named: name) == nil else { throw Failure("an account named '\(name)' exists already") }
        guard password.count >= Self.minimumPasswordLength else {
            throw Failure("a password must be at least \(Self.minimumPasswordLength) characters")
        }
        let account = try DeskAccount.make(name: name, password: password)
        accounts.append(account)
        try save()
        return account
    }

    /// Removes the account; false when there was none.
    public mutating func remove(name: String) throws -> Bool {
        guard let index = accounts.firstIndex(where: { $0.name == name }) else { return false }
        accounts.remove(at: index)
        try save()
        return true
    }

    /// Writes the file whole (a temporary file of mode 0600 renamed over it).
    public func save() throws {
        let directory = PrivateFiles.parentDirectory(of: path)
        if !directory.isEmpty {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(File(accounts: accounts))
        let temporary = path + ".tmp"
        _ = FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
        guard rename(temporary, path) == 0 else { throw Failure("cannot write \(path): \(String(cString: strerror(errno)))") }
    }

    /// The account whose name and password these are, or nil; derived on a thread of its own
    /// (a PBKDF2 of 210,000 rounds takes a tenth of a second: too long for the cooperative pool).
    /// An unknown name costs the same derivation, so the time does not tell whether it exists.
    public func verify(name: String, password: String) async -> DeskAccount? {
        let candidate = account(named: name)
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                if let candidate {
                    continuation.resume(returning: candidate.matches(password) ? candidate : nil)
                } else {
                    _ = try? DeskAccount.derive(password, salt: Array(repeating: 0, count: 16), iterations: DeskAccount.iterations)
                    continuation.resume(returning: nil)
                }
            }
        }
    }
}
