import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Directories and files that hold secrets or personal data (keys, tokens, the broker's
/// journal): directories of mode 0700 and files of mode 0600, created with that mode from the
/// first byte rather than `chmod`ed afterwards, and refused, naming the `chmod` that fixes them,
/// when group or others can reach them.
///
/// We refuse rather than tighten: a directory an operator made with a wider mode may be shared
/// on purpose, and changing it behind their back would hide the mistake that put secrets there.
///
/// Plain system calls rather than `FileManager`, so modes are set at creation and checked on
/// the descriptor that is read.
public enum PrivateFiles {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            let rawValue: String
            /// Group or others may read, write or enter it.
            public static let insecurePermissions = Code(rawValue: "insecure permissions")
            /// A system call failed (`errno` says which way).
            public static let io = Code(rawValue: "I/O error")
            public var description: String { rawValue }
        }

        public var code: Code
        /// Names the file or directory and, for `insecurePermissions`, the `chmod` that fixes it.
        public var message: String
        public var path: String
        public var errno: Int32?

        public var description: String { message }
    }

    /// `cannot <what> <path>: <strerror>`.
    static func failure(_ what: String, _ path: String, errno code: Int32 = errno) -> Failure {
        Failure(code: .io, message: "cannot \(what) \(path): \(String(cString: strerror(code)))", path: path, errno: code)
    }

    /// The directory part of `path`: `.` for a bare name, `/` for a name at the root. Not
    /// `NSString.deletingLastPathComponent`, which traps on a bare relative name with Swift
    /// 6.3.1's Foundation on Linux (`--data-dir state` crashed the broker).
    public static func parentDirectory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        let parent = trimmed[..<slash]
        return parent.isEmpty ? "/" : String(parent)
    }

    /// Creates `path` as a directory of mode 0700 if it is missing (its parents with the
    /// default mode); refuses a directory that group or others can enter, read or write.
    /// - Parameter what: what the directory is, for messages (`broker data directory`).
    public static func ensureDirectory(_ path: String, what: String) throws(Failure) {
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else { throw failure("inspect \(what)", path) }
            let parent = parentDirectory(of: path)
            if !parent.isEmpty, !FileManager.default.fileExists(atPath: parent) {
                do {
                    try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
                } catch {
                    throw Failure(code: .io, message: "cannot create directory \(parent): \(error)", path: parent)
                }
            }
            // Another process may create it between the stat and here; that is fine as long
            // as the mode check below passes.
            guard mkdir(path, 0o700) == 0 || errno == EEXIST else { throw failure("create \(what)", path) }
            guard stat(path, &info) == 0 else { throw failure("inspect \(what)", path) }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw Failure(code: .io, message: "\(what) \(path) is not a directory", path: path, errno: ENOTDIR)
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw Failure(
                code: .insecurePermissions,
                message: "\(what) \(path) is open to group or others (mode \(String(mode, radix: 8))); run chmod 700 \(path)",
                path: path)
        }
    }

    /// Opens `path` for reading and checks, on the open descriptor, that only its owner can
    /// read or write it. `nil` if it does not exist.
    public static func openForReading(_ path: String, what: String) throws(Failure) -> Int32? {
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
        do throws(Failure) {
            try refuseOpen([(path, info.st_mode & 0o777)], what: what)
        } catch {
            close(descriptor)
            throw error
        }
        return descriptor
    }

    /// Refuses, in one message naming each file and the `chmod` for all of them, any of `paths`
    /// that exists and that group or others can read or write. Missing files pass.
    public static func checkExisting(_ paths: [String], what: String) throws(Failure) {
        var modes: [(String, mode_t)] = []
        for path in paths {
            var info = stat()
            if stat(path, &info) != 0 {
                guard errno == ENOENT else { throw failure("inspect \(what)", path) }
                continue
            }
            modes.append((path, info.st_mode & 0o777))
        }
        try refuseOpen(modes, what: what)
    }

    /// Creates `path` empty with mode 0600 if it does not exist; an existing file is left as
    /// it is (check it with `checkExisting` first).
    public static func createFile(_ path: String, what: String) throws(Failure) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { return }
            throw failure("create \(what)", path)
        }
        defer { close(descriptor) }
        // The umask can only take bits away from 0600; this puts back the owner's, never
        // adding any for group or others.
        guard fchmod(descriptor, 0o600) == 0 else { throw failure("set the mode of", path) }
    }

    private static func refuseOpen(_ modes: [(path: String, mode: mode_t)], what: String) throws(Failure) {
        let exposed = modes.filter { $0.mode & 0o077 != 0 }
        guard let first = exposed.first else { return }
        let paths = exposed.map(\.path).joined(separator: " ")
        let message: String
        if exposed.count == 1 {
            message =
                "\(what) \(first.path) is readable or writable by group or others (mode \(String(first.mode, radix: 8))); run chmod 600 \(first.path)"
        } else {
            let listed = exposed.map { "\($0.path) (mode \(String($0.mode, radix: 8)))" }.joined(separator: ", ")
            message = "\(what)s \(listed) are readable or writable by group or others; run chmod 600 \(paths)"
        }
        throw Failure(code: .insecurePermissions, message: message, path: first.path)
    }
}
