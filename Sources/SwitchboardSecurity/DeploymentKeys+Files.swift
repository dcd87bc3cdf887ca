import Foundation
import SwitchboardRuntime

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension DeploymentKeys {
    /// The file work of a key directory, with plain system calls: a file is written to a
    /// temporary name created with its final mode (0600 for secrets, from the first byte), synced,
    /// then renamed over the old one, so a reader (the broker's allow-list watcher, a copy to a
    /// host) sees the old file or the new one, never half of one. A file whose bytes and mode
    /// are already right is left alone.
    enum Files {
        typealias Failure = DeploymentKeys.Failure

        static func failure(_ what: String, _ path: String, errno code: Int32 = errno) -> Failure {
            Failure(.io, "cannot \(what) \(path): \(String(cString: strerror(code)))")
        }

        /// A directory of mode 0700, created if missing; refused when open to group or others.
        static func ensureDirectory(_ path: String, what: String) throws(Failure) {
            do {
                try PrivateFiles.ensureDirectory(path, what: what)
            } catch {
                throw Failure(.io, error.message)
            }
        }

        static func list(_ directory: String) throws(Failure) -> [String] {
            do {
                return try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
            } catch {
                throw Failure(.io, "cannot list \(directory): \(error.localizedDescription)")
            }
        }

        static func read(_ path: String) throws(Failure) -> Data {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw failure("read", path, errno: FileManager.default.fileExists(atPath: path) ? EACCES : ENOENT)
            }
            return data
        }

        /// Writes `data` to `path` with `mode` unless it holds exactly that already.
        /// - Returns: whether the file changed.
        @discardableResult
        static func write(_ data: Data, to path: String, mode: mode_t) throws(Failure) -> Bool {
            var info = stat()
            if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o777 == mode,
                FileManager.default.contents(atPath: path) == data
            {
                return false
            }
            let directory = PrivateFiles.parentDirectory(of: path)
            let name = (path as NSString).lastPathComponent
            // Not ending in `.cert` or `.secret`: nothing reads a file that is being written.
            let temporary = (directory as NSString).appendingPathComponent(".\(name).\(UUID().uuidString.prefix(8)).tmp")
            let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
            guard descriptor >= 0 else { throw failure("create", temporary) }
            var closed = false
            defer {
                if !closed {
                    close(descriptor)
                    unlink(temporary)
                }
            }
            // The umask may have taken bits away; this sets exactly `mode`.
            guard fchmod(descriptor, mode) == 0 else { throw failure("set the mode of", temporary) }
            let written = data.withUnsafeBytes { raw -> Bool in
                var offset = 0
                while offset < raw.count {
                    let count = systemWrite(descriptor, raw.baseAddress! + offset, raw.count - offset)
                    if count < 0 {
                        if errno == EINTR { continue }
                        return false
                    }
                    offset += count
                }
                return true
            }
            guard written else { throw failure("write", temporary) }
            guard fsync(descriptor) == 0 else { throw failure("sync", temporary) }
            closed = true
            guard close(descriptor) == 0 else {
                unlink(temporary)
                throw failure("close", temporary)
            }
            guard rename(temporary, path) == 0 else {
                let code = errno
                unlink(temporary)
                throw failure("rename \(temporary) to", path, errno: code)
            }
            return true
        }

        /// Whether `file` is a temporary file of a `write` that was cut short: it may hold a
        /// secret, and must not travel to a host with its bundle.
        static func isLeftOver(_ file: String) -> Bool { file.hasPrefix(".") && file.hasSuffix(".tmp") }

        /// Removes a file; a missing one is fine.
        /// - Returns: whether there was one.
        @discardableResult
        static func remove(_ path: String) throws(Failure) -> Bool {
            guard unlink(path) == 0 else {
                if errno == ENOENT { return false }
                throw failure("remove", path)
            }
            return true
        }

        /// An exclusive `flock` on a file, held until `release()`; never waits.
        struct Lock {
            let descriptor: Int32

            init(_ path: String) throws(Failure) {
                descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                guard descriptor >= 0 else { throw failure("open the lock file", path) }
                guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                    let code = errno
                    close(descriptor)
                    if code == EWOULDBLOCK {
                        throw Failure(
                            .busy,
                            "another `switchboard keys` is working on \(PrivateFiles.parentDirectory(of: path)); try again when it is done")
                    }
                    throw failure("lock", path, errno: code)
                }
            }

            /// Unlocks before closing: a process another thread is spawning at that moment holds
            /// a copy of the descriptor until its `exec` closes it, and `close` alone would leave
            /// the lock held by that copy (a `keys` command right after would be refused as busy).
            func release() {
                flock(descriptor, LOCK_UN)
                close(descriptor)
            }
        }
    }
}

private func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.write(descriptor, buffer, count)
    #else
    Darwin.write(descriptor, buffer, count)
    #endif
}
