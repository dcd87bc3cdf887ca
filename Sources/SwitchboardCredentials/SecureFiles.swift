import Foundation
import SwitchboardRuntime

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The few POSIX calls the encrypted file needs, each turning `errno` into a
/// `CredentialFileError` that names the path. Plain system calls rather than `FileManager`
/// because the modes must be right from the first byte (`open` with `O_EXCL` and 0600, not a
/// `chmod` afterwards) and permissions must be checked on the descriptor that is read. The
/// directory and read checks are `SwitchboardRuntime.PrivateFiles`, which the broker's journal
/// uses too.
enum SecureFiles {
    static func failure(_ what: String, _ path: String, errno code: Int32 = errno) -> CredentialFileError {
        CredentialFileError(code: .io, message: "cannot \(what) \(path): \(String(cString: strerror(code)))", path: path, errno: code)
    }

    /// Creates `path` as a directory of mode 0700 if it is missing; refuses a directory that
    /// group or others can enter, read or write (`PrivateFiles`, shared with the broker).
    static func ensurePrivateDirectory(_ path: String) throws(CredentialFileError) {
        do {
            try PrivateFiles.ensureDirectory(path, what: "credential directory")
        } catch {
            throw CredentialFileError(error)
        }
    }

    /// Opens `path` for reading and checks, on the open descriptor, that only its owner can
    /// read or write it. `nil` if it does not exist.
    static func openPrivate(_ path: String, what: String) throws(CredentialFileError) -> Int32? {
        do {
            return try PrivateFiles.openForReading(path, what: what)
        } catch {
            throw CredentialFileError(error)
        }
    }

    static func readAll(_ descriptor: Int32, path: String) throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("read", path)
            }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    /// Writes `data` to a new file of mode 0600 beside `path` and then moves it to `path`
    /// (`link` when `replace` is false, so an existing file is kept; `rename` otherwise),
    /// syncing the file and the directory: a reader sees the old file or the whole new one.
    /// - Returns: false when `replace` is false and `path` exists already.
    @discardableResult
    static func writeAtomically(_ data: Data, to path: String, replace: Bool) throws -> Bool {
        let directory = PrivateFiles.parentDirectory(of: path)
        let temporary = "\(path).\(UUID().uuidString.prefix(8)).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw failure("create", temporary) }
        var moved = false
        defer { if !moved { unlink(temporary) } }
        do {
            defer { close(descriptor) }
            // The umask can only take bits away from 0600; this puts back the owner's, never
            // adding any for group or others.
            guard fchmod(descriptor, 0o600) == 0 else { throw failure("set the mode of", temporary) }
            try data.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if count < 0 {
                        if errno == EINTR { continue }
                        throw failure("write", temporary)
                    }
                    offset += count
                }
            }
            guard fsync(descriptor) == 0 else { throw failure("sync", temporary) }
        }
        if replace {
            guard rename(temporary, path) == 0 else { throw failure("replace", path) }
            moved = true
        } else {
            if link(temporary, path) != 0 {
                if errno == EEXIST { return false }
                throw failure("create", path)
            }
            // `moved` stays false: the defer removes the temporary name, the link keeps the file.
        }
        syncDirectory(directory.isEmpty ? "." : directory)
        return true
    }

    /// Makes a rename or link durable. Best effort: some file systems refuse to sync a
    /// directory, and the data itself was synced already.
    static func syncDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_DIRECTORY)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}

extension CredentialFileError {
    init(_ failure: PrivateFiles.Failure) {
        self.init(
            code: failure.code == .insecurePermissions ? .insecurePermissions : .io, message: failure.message, path: failure.path,
            errno: failure.errno)
    }
}
