import Crypto
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A credential cache at rest: every key's credential in one file sealed with AES-256-GCM,
/// in a directory only its owner can enter, beside a key file only its owner can read
/// (ARCHITECTURE.md, Security: secrets at rest are encrypted and 0600).
///
/// File format, version 1 (all integers big-endian):
///
/// | offset | size | field                                                           |
/// |--------|------|-----------------------------------------------------------------|
/// | 0      | 6    | magic `SBCRED`                                                  |
/// | 6      | 2    | format version, 1                                               |
/// | 8      | 8    | key id: HMAC-SHA256(key, "switchboard.credentials.key-id")[0..<8] |
/// | 16     | 12   | nonce, fresh and random for every write                         |
/// | 28     | n    | ciphertext of the JSON body                                     |
/// | 28 + n | 16   | GCM tag                                                         |
///
/// The authenticated data is the 16-byte header followed by `switchboard.credentials:` and the
/// file's purpose, so neither the header nor a file written for another purpose with the same
/// key passes as this one. The key id lets a wrong key be told apart from tampering without
/// revealing the key. The JSON body is
/// `{"written_at": <seconds since 1970>, "credentials": [{"backend", "account", "scope"?, "credential"}]}`
/// with credentials as `Credential`'s `Codable` form.
///
/// The key file holds the 256-bit key in base64 on one line. It is created if missing, mode
/// 0600 from the start (written to a temporary file opened with `O_CREAT | O_EXCL` and mode
/// 0600, then linked into place, so a reader never sees it half written and two processes
/// starting at once agree on one key). It is refused if group or others may read or write it.
/// The directory is created with mode 0700 and refused, not tightened, when group or others
/// may use it. Writes go to a temporary 0600 file that is synced and renamed over the old one.
///
/// Methods do blocking file I/O: call them from a thread of your own or at start-up, not from
/// a task on the cooperative pool (`CredentialCache` writes on a dispatch queue of its own).
public struct EncryptedCredentialFile: Sendable {
    /// The directory that holds the data file (and the key file, unless it was given elsewhere).
    public let directory: String
    /// The sealed data file.
    public let path: String
    /// The key file.
    public let keyPath: String
    /// What the file is for; bound into every seal as authenticated data.
    public let purpose: String
    /// The key id in hex: which key sealed a file, without revealing the key.
    public let keyID: String

    private let key: SymmetricKey
    private let keyIDBytes: Data

    static let magic = Data("SBCRED".utf8)
    static let version: UInt16 = 1
    static let headerSize = 16
    static let nonceSize = 12
    static let tagSize = 16

    /// Opens (creating as needed) `<directory>/<name>.sealed` with its key in `keyFile`,
    /// `<directory>/<name>.key` by default. Only checks permissions and reads the key; the
    /// data file is read by `load`.
    /// - Parameter purpose: a label bound into the file (`worker:filemaker`), so that one
    ///   process's file cannot stand in for another's that shares the key.
    /// - Throws: `CredentialFileError` for a directory or key file that group or others may
    ///   use, a key file that does not hold a 256-bit key, or a failed system call.
    public init(directory: String, name: String = "credentials", keyFile: String? = nil, purpose: String = "credential-cache") throws {
        self.directory = directory
        self.path = (directory as NSString).appendingPathComponent("\(name).sealed")
        self.keyPath = keyFile ?? (directory as NSString).appendingPathComponent("\(name).key")
        self.purpose = purpose
        try SecureFiles.ensurePrivateDirectory(directory)
        key = try Self.loadOrCreateKey(keyPath)
        keyIDBytes = Data(HMAC<SHA256>.authenticationCode(for: Data("switchboard.credentials.key-id".utf8), using: key).prefix(8))
        keyID = Self.hex(keyIDBytes)
    }

    /// The credentials in the file that have not expired at `now`; none if there is no file.
    /// - Throws: `CredentialFileError`: `insecurePermissions`, `malformed`,
    ///   `unsupportedVersion`, `wrongKey`, `authenticationFailed` or `io`.
    public func load(now: Date = Date()) throws -> [CredentialKey: Credential] {
        guard let descriptor = try SecureFiles.openPrivate(path, what: "credential file") else { return [:] }
        let data: Data
        do {
            defer { close(descriptor) }
            data = try SecureFiles.readAll(descriptor, path: path)
        }
        let body = try open(data)
        let contents: Contents
        do {
            contents = try Self.decoder.decode(Contents.self, from: body)
        } catch {
            // Authenticated, so we wrote it: a format bug, not an attack. Say so without the body.
            throw CredentialFileError(
                code: .malformed, message: "credential file \(path) decrypts but its contents cannot be read: \(error)", path: path)
        }
        var entries: [CredentialKey: Credential] = [:]
        for entry in contents.credentials where entry.credential.isUsable(at: now) {
            entries[CredentialKey(backend: entry.backend, account: entry.account, scope: entry.scope)] = entry.credential
        }
        return entries
    }

    /// Replaces the file with `entries`, sealed with a fresh nonce.
    public func save(_ entries: [CredentialKey: Credential], now: Date = Date()) throws {
        let contents = Contents(
            writtenAt: now,
            credentials: entries.sorted { $0.key.description < $1.key.description }.map {
                Contents.Entry(backend: $0.key.backend, account: $0.key.account, scope: $0.key.scope, credential: $0.value)
            })
        let body: Data
        do {
            body = try Self.encoder.encode(contents)
        } catch {
            throw CredentialFileError(code: .malformed, message: "cannot encode credentials for \(path): \(error)", path: path)
        }
        try SecureFiles.writeAtomically(try seal(body), to: path, replace: true)
    }

    /// Removes the data file (the key stays).
    public func delete() throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw SecureFiles.failure("remove", path) }
    }

    // MARK: Sealing

    var header: Data {
        var header = Self.magic
        header.append(UInt8(Self.version >> 8))
        header.append(UInt8(Self.version & 0xff))
        header.append(keyIDBytes)
        return header
    }

    func authenticatedData(header: Data) -> Data {
        header + Data("switchboard.credentials:\(purpose)".utf8)
    }

    func seal(_ body: Data) throws -> Data {
        let header = header
        do {
            let box = try AES.GCM.seal(body, using: key, nonce: AES.GCM.Nonce(), authenticating: authenticatedData(header: header))
            return header + box.nonce.withUnsafeBytes { Data($0) } + box.ciphertext + box.tag
        } catch {
            throw CredentialFileError(code: .io, message: "cannot seal credentials for \(path): \(error)", path: path)
        }
    }

    func open(_ data: Data) throws -> Data {
        let data = Data(data)  // indices from 0
        guard data.count >= Self.headerSize + Self.nonceSize + Self.tagSize, data.prefix(Self.magic.count) == Self.magic else {
            throw CredentialFileError(
                code: .malformed,
                message: "\(path) is not a Switchboard credential file, or is truncated; remove it to start with an empty cache",
                path: path)
        }
        let version = UInt16(data[6]) << 8 | UInt16(data[7])
        guard version == Self.version else {
            throw CredentialFileError(
                code: version > Self.version ? .unsupportedVersion : .malformed,
                message: "credential file \(path) has format version \(version); this program reads version \(Self.version)", path: path)
        }
        let fileKeyID = data[8..<16]
        guard fileKeyID == keyIDBytes else {
            throw CredentialFileError(
                code: .wrongKey,
                message:
                    "credential file \(path) was sealed with key \(Self.hex(fileKeyID)), but \(keyPath) holds key \(keyID); restore that key file or remove \(path)",
                path: path)
        }
        let header = data.prefix(Self.headerSize)
        let nonceEnd = Self.headerSize + Self.nonceSize
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: data[Self.headerSize..<nonceEnd]), ciphertext: data[nonceEnd..<(data.count - Self.tagSize)],
                tag: data.suffix(Self.tagSize))
            return try AES.GCM.open(box, using: key, authenticating: authenticatedData(header: header))
        } catch {
            throw CredentialFileError(
                code: .authenticationFailed,
                message:
                    "credential file \(path) failed authentication: it was changed after it was written, or written for another purpose than '\(purpose)'; remove it to start with an empty cache",
                path: path)
        }
    }

    // MARK: Key

    static func loadOrCreateKey(_ path: String) throws -> SymmetricKey {
        if let key = try readKey(path) { return key }
        let key = SymmetricKey(size: .bits256)
        let text = key.withUnsafeBytes { Data($0).base64EncodedString() } + "\n"
        // Loses the race to a process that created the key at the same moment: use theirs.
        try SecureFiles.writeAtomically(Data(text.utf8), to: path, replace: false)
        guard let stored = try readKey(path) else { throw SecureFiles.failure("read key file", path, errno: ENOENT) }
        return stored
    }

    static func readKey(_ path: String) throws -> SymmetricKey? {
        guard let descriptor = try SecureFiles.openPrivate(path, what: "key file") else { return nil }
        defer { close(descriptor) }
        let data = try SecureFiles.readAll(descriptor, path: path)
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bytes = Data(base64Encoded: text), bytes.count == 32 else {
            throw CredentialFileError(
                code: .invalidKeyFile,
                message: "key file \(path) must hold one line: a 256-bit key in base64 (44 characters); remove it to make a new key",
                path: path)
        }
        return SymmetricKey(data: bytes)
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 0x10 ? "0" + hex : hex
        }.joined()
    }

    // MARK: Body

    struct Contents: Codable {
        struct Entry: Codable {
            var backend: String
            var account: String
            /// Absent in files written before scopes existed.
            var scope: String?
            var credential: Credential
        }
        var writtenAt: Date
        var credentials: [Entry]

        enum CodingKeys: String, CodingKey {
            case writtenAt = "written_at"
            case credentials
        }
    }

    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return encoder
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }
}
