import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The few POSIX calls the encrypted file needs, each turning `errno` into a
/// `CredentialFileError` that names the path. Plain system calls rather than `FileManager`
/// because the modes must be right from the first byte (`open` with `O_EXCL` and 0600, not a
/// `chmod` afterwards) and permissions must be checked on the descriptor that is read.
enum SecureFiles {
    static func failure(_ what: String, _ path: String, errno code: Int32 = errno) -> CredentialFileError {
        CredentialFileError(code: .io, message: "cannot \(what) \(path): \(String(cString: strerror(code)))", path: path, errno: code)
    }

    /// Creates `path` as a directory of mode 0700 if it is missing (its parents with the
    /// default mode); refuses a directory that group or others can enter, read or write.
    ///
    /// We refuse rather than tighten: a directory an operator made with a wider mode may be
    /// shared on purpose, and changing it behind their back would hide the mistake that put
    /// secrets there.
    static func ensurePrivateDirectory(_ path: String) throws {
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else { throw failure("inspect directory", path) }
            let parent = (path as NSString).deletingLastPathComponent
            if !parent.isEmpty, !FileManager.default.fileExists(atPath: parent) {
                do {
                    try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
                } catch {
                    throw CredentialFileError(code: .io, message: "cannot create directory \(parent): \(error)", path: parent)
                }
            }
            // Another process may create it between the stat and here; that is fine as long
            // as the mode check below passes.
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else { throw failure("create directory", path) }
            guard stat(path, &info) == 0 else { throw failure("inspect directory", path) }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw CredentialFileError(code: .io, message: "\(path) is not a directory", path: path, errno: ENOTDIR)
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw CredentialFileError(
                code: .insecurePermissions,
                message:
                    "credential directory \(path) is open to group or others (mode \(String(mode, radix: 8))); run chmod 700 \(path)",
                path: path)
        }
    }

    /// Opens `path` for reading and checks, on the open descriptor, that only its owner can
    /// read or write it. `nil` if it does not exist.
    static func openPrivate(_ path: String, what: String) throws -> Int32? {
        // Symbolic links are followed (a key mounted from a secret store usually is one); the
        // mode checked is that of the file read.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw failure("open \(what)", path)
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            close(descriptor)
            throw failure("inspect \(what)", path, errno: code)
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            close(descriptor)
            throw CredentialFileError(
                code: .insecurePermissions,
                message:
                    "\(what) \(path) is readable or writable by group or others (mode \(String(mode, radix: 8))); run chmod 600 \(path)",
                path: path)
        }
        return descriptor
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
        let directory = (path as NSString).deletingLastPathComponent
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
