public import Foundation

/// Why the cache would not hand out a credential. Never carries a secret: it names the key
/// (back end and account) and the limit, nothing that was returned by a back end.
public struct CredentialError: Error, Sendable, CustomStringConvertible {
    /// What went wrong; a struct rather than an enum so that codes can be added later.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: Hashable, Sendable {
            case refreshLimitExceeded
        }
        let base: Base

        /// More refreshes for one key were started within the interval than the limit allows:
        /// something keeps rejecting the tokens we get, and asking again would only hammer
        /// the back end (or get the account locked).
        public static let refreshLimitExceeded = Code(base: .refreshLimitExceeded)

        public var description: String {
            switch base {
            case .refreshLimitExceeded: "refresh limit exceeded"
            }
        }
    }

    public var code: Code
    public var message: String
    /// The credential the error is about.
    public var key: CredentialKey
    /// For `refreshLimitExceeded`: the earliest time at which a refresh will be allowed again.
    public var retryAfter: Date?

    public init(code: Code, message: String, key: CredentialKey, retryAfter: Date? = nil) {
        self.code = code
        self.message = message
        self.key = key
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code) for \(key): \(message)" }
}

/// Why the encrypted credential file, its key file or its directory could not be used.
/// Names the file and, where there is one, the fix; never a key or a token.
public struct CredentialFileError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: Hashable, Sendable {
            case insecurePermissions, io, invalidKeyFile, malformed, unsupportedVersion, wrongKey, authenticationFailed
        }
        let base: Base

        /// A key file, data file or data directory that group or others may read or write.
        public static let insecurePermissions = Code(base: .insecurePermissions)
        /// A system call failed (`errno` says which way).
        public static let io = Code(base: .io)
        /// The key file does not hold a base64-encoded 256-bit key.
        public static let invalidKeyFile = Code(base: .invalidKeyFile)
        /// The data file is not a Switchboard credential file, or it is truncated.
        public static let malformed = Code(base: .malformed)
        /// The data file was written by a newer format version than this code reads.
        public static let unsupportedVersion = Code(base: .unsupportedVersion)
        /// The data file was sealed with another key than the key file holds.
        public static let wrongKey = Code(base: .wrongKey)
        /// The data file failed AES-GCM authentication: it was changed after it was written,
        /// or written for another purpose.
        public static let authenticationFailed = Code(base: .authenticationFailed)

        public var description: String {
            switch base {
            case .insecurePermissions: "insecure permissions"
            case .io: "I/O error"
            case .invalidKeyFile: "invalid key file"
            case .malformed: "malformed credential file"
            case .unsupportedVersion: "unsupported credential file version"
            case .wrongKey: "wrong key"
            case .authenticationFailed: "authentication failed"
            }
        }
    }

    public var code: Code
    public var message: String
    /// The file or directory concerned.
    public var path: String
    /// The `errno` of the failed system call, for `io`.
    public var errno: Int32?

    public init(code: Code, message: String, path: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
    }

    public var description: String { "\(code): \(message)" }
}
