import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An error reported by libzmq, or by this binding when it refuses an argument.
///
/// It carries the `errno` value libzmq set, libzmq's own text for it, and the operation that
/// failed (`"bind tcp://127.0.0.1:5555"`), so a log line says what went wrong and where.
public struct ZMQError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `errno` value (for example `EAGAIN`, `EHOSTUNREACH`, `ETERM`), or 0 for binding errors.
    public var errno: Int32
    /// libzmq's description of `errno` (`zmq_strerror`), or the binding's own message.
    public var message: String
    /// What was being done when the error happened.
    public var operation: String

    public init(errno: Int32, message: String, operation: String) {
        self.errno = errno
        self.message = message
        self.operation = operation
    }

    /// Captures the calling thread's current libzmq error.
    public static func last(_ operation: @autoclosure () -> String) -> ZMQError {
        let code = zmq_errno()
        return ZMQError(errno: code, message: String(cString: zmq_strerror(code)), operation: operation())
    }

    /// An argument the binding refused before calling libzmq.
    static func invalid(_ message: String, operation: String) -> ZMQError {
        ZMQError(errno: EINVAL, message: message, operation: operation)
    }

    public var description: String { "\(operation): \(message) (errno \(errno))" }

    /// The operation would block (`EAGAIN`): a full queue or nothing to read.
    public var isWouldBlock: Bool { errno == EAGAIN }
    /// A ROUTER with `ZMQ_ROUTER_MANDATORY` could not route to the peer (`EHOSTUNREACH`).
    public var isHostUnreachable: Bool { errno == EHOSTUNREACH }
}
