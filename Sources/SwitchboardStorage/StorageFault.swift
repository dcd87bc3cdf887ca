// Why a write to one of our SQLite files failed, in the words an operator acts on.
//
// SQLite reports a full tmpfs as SQLITE_FULL, but a full disk met while growing the WAL index
// and a file system that the kernel turned read-only after an error both as a bare "disk I/O
// error" (SQLITE_IOERR_*): the cause is only in the errno of the system call that failed, which
// SQLite keeps on the connection (`sqlite3_system_errno`). A NACK, a log line or a refused
// check-in then says "the disk is full" or "the file system is read-only", not "error 10".

import Foundation
package import GRDB
import GRDBSQLite

/// A failed read or write of one of our SQLite files (or of the broker's PostgreSQL journal,
/// where `path` names the database), with its cause.
package struct StorageFault: Error, CustomStringConvertible, Sendable, Equatable {
    package enum Cause: String, Sendable {
        /// ENOSPC or EDQUOT, or SQLite's SQLITE_FULL: space returns when files are deleted.
        case diskFull = "the disk is full"
        /// EROFS or SQLITE_READONLY: nothing can be written until the file system is writable.
        case readOnly = "the file system is read-only"
        /// SQLite could open the file for reading only (its permissions, or a read-only mount).
        case notWritable = "the file cannot be opened for writing"
        /// Any other failure of a system call (EIO…).
        case ioError = "an I/O error"
        /// The database server (PostgreSQL) could not be reached, or the connection to it broke or
        /// went silent: writes resume when it answers again.
        case unreachable = "the database server cannot be reached"
        /// A broker of a pair whose lease lapsed or was taken over (its epoch is no longer the
        /// database's): it may not commit anything, and stops serving (issue 29, fencing).
        case notLeaseholder = "this broker no longer holds the lease"
        /// Anything else the database reports.
        case other = "a database error"
    }

    package var cause: Cause
    /// The file.
    package var path: String
    /// SQLite's words, and the system's when it named an errno.
    package var detail: String

    package init(cause: Cause, path: String, detail: String) {
        self.cause = cause
        self.path = path
        self.detail = detail
    }

    /// "the disk is full (SQLite error 13: database or disk is full)".
    package var summary: String { "\(cause.rawValue) (\(detail))" }

    package var description: String { "\(path): \(summary)" }

    /// Classifies `error`, thrown by a statement on `queue` just now.
    /// - Parameter queue: asked for the errno of the system call that failed (SQLite keeps it on
    ///   the connection until the next I/O failure, so it is only read for an I/O failure).
    package static func classify(_ error: any Error, path: String, queue: DatabaseQueue?) -> StorageFault {
        if let fault = error as? StorageFault { return fault }
        guard let database = error as? DatabaseError else {
            return StorageFault(cause: .other, path: path, detail: "\(error)")
        }
        let sqlite = "SQLite error \(database.extendedResultCode.rawValue): \(database.message ?? "\(database.resultCode)")"
        switch database.resultCode {
        case .SQLITE_FULL:
            return StorageFault(cause: .diskFull, path: path, detail: sqlite)
        case .SQLITE_READONLY:
            return StorageFault(cause: .readOnly, path: path, detail: sqlite)
        case .SQLITE_IOERR, .SQLITE_CANTOPEN:
            let code = queue?.inDatabase { db in sqlite3_system_errno(db.sqliteConnection) } ?? 0
            let system = code == 0 ? "" : ", \(String(cString: strerror(code)))"
            return StorageFault(cause: cause(errno: code, path: path), path: path, detail: sqlite + system)
        default:
            return StorageFault(cause: .other, path: path, detail: sqlite)
        }
    }

    /// The cause an errno names; with none, what the file system says of itself (a tmpfs that is
    /// full, a mount that is read-only).
    static func cause(errno code: Int32, path: String) -> Cause {
        switch code {
        case ENOSPC, EDQUOT: return .diskFull
        case EROFS: return .readOnly
        case 0: return probe(directory: (path as NSString).deletingLastPathComponent)
        default: return .ioError
        }
    }

    /// What the file system says when SQLite kept no errno (it reports a write refused by a file
    /// system the kernel turned read-only after an error as a bare I/O error): a read-only mount,
    /// no space left, or what making and writing a small file beside the database meets.
    static func probe(directory: String) -> Cause {
        let directory = directory.isEmpty ? "." : directory
        var stats = statvfs()
        if statvfs(directory, &stats) == 0 {
            if stats.f_flag & UInt(ST_RDONLY) != 0 { return .readOnly }
            if stats.f_bavail == 0 { return .diskFull }
        }
        let probe = "\(directory)/.write-probe-\(getpid())"
        let fd = open(probe, O_CREAT | O_EXCL | O_WRONLY, 0o600)
        guard fd >= 0 else { return cause(ofProbeFailure: errno) }
        defer {
            close(fd)
            unlink(probe)
        }
        let page = [UInt8](repeating: 0, count: 4096)
        guard page.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == page.count, fsync(fd) == 0 else {
            return cause(ofProbeFailure: errno)
        }
        return .ioError
    }

    private static func cause(ofProbeFailure code: Int32) -> Cause {
        switch code {
        case ENOSPC, EDQUOT: .diskFull
        case EROFS: .readOnly
        default: .ioError
        }
    }
}
