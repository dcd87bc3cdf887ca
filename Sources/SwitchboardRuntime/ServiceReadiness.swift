// A program tells whoever supervises it that it is ready, what it is doing, and that it is
// stopping, by the notify protocol of systemd (sd_notify(3)): newline-separated KEY=VALUE
// assignments in one datagram to the Unix socket named by NOTIFY_SOCKET. systemd's
// `Type=notify` units and `switchboard up` both listen this way, so each program says it once,
// at the point it is ready, and neither supervisor needs to scrape a log or poll a file.

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Sends the program's state to its supervisor (systemd notify protocol).
public enum ServiceReadiness {
    /// One assignment of the protocol.
    public enum State: Sendable, Hashable {
        /// `READY=1`: start-up is over; the program serves.
        case ready
        /// `STOPPING=1`: shutdown has begun.
        case stopping
        /// `STATUS=…`: one line for a person to read (newlines become spaces).
        case status(String)

        var assignment: String {
            switch self {
            case .ready: "READY=1"
            case .stopping: "STOPPING=1"
            case .status(let text): "STATUS=" + text.map { $0.isNewline ? " " : String($0) }.joined()
            }
        }
    }

    /// Why a notification could not be sent.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The environment variable naming the supervisor's socket.
    public static let socketVariable = "NOTIFY_SOCKET"

    /// Where this process's supervisor listens, read once by the program from its own
    /// environment (a library never reads the process environment) and handed to whatever
    /// reports readiness.
    public struct Notifier: Sendable {
        /// NOTIFY_SOCKET's value; nil when unset or empty (a program run by hand).
        public let socket: String?

        /// - Parameter environment: the program's environment, where NOTIFY_SOCKET names the socket.
        public init(environment: [String: String]) {
            socket = environment[ServiceReadiness.socketVariable].flatMap { $0.isEmpty ? nil : $0 }
        }

        /// Tells the supervisor; does nothing without one (a program run by hand, or by a
        /// supervisor that does not listen). Never blocks: a supervisor that is not reading its
        /// socket loses the message rather than stopping the program. Callable from any thread or
        /// task.
        /// - Returns: whether the message was sent.
        @discardableResult
        public func notify(_ states: State...) -> Bool { notify(states) }

        @discardableResult
        func notify(_ states: [State]) -> Bool {
            guard let socket else { return false }
            do {
                try ServiceReadiness.send(states, to: socket)
                return true
            } catch {
                return false
            }
        }
    }

    /// `Notifier(environment:).notify(states)`, for a program that says it once.
    @discardableResult
    public static func notify(_ states: State..., environment: [String: String]) -> Bool {
        Notifier(environment: environment).notify(states)
    }

    /// Sends `states` as one datagram to the socket `name`: an absolute path, or a name in Linux's
    /// abstract namespace written with a leading '@' (as systemd writes it).
    /// - Throws: `Failure` when the name is not one of those, is too long, or the send fails.
    public static func send(_ states: [State], to name: String) throws(Failure) {
        let message = states.map(\.assignment).joined(separator: "\n")
        var address = try socketAddress(name)
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "cannot make a socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let sent = message.utf8CString.withUnsafeBufferPointer { bytes in
            withUnsafePointer(to: &address.address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    // Without the C string's terminating NUL; MSG_DONTWAIT: see `notify`.
                    sendto(descriptor, bytes.baseAddress, bytes.count - 1, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), $0, address.length)
                }
            }
        }
        guard sent >= 0 else { throw Failure(description: "cannot notify \(name): \(String(cString: strerror(errno)))") }
    }

    /// The `sockaddr_un` for a NOTIFY_SOCKET value, and its length.
    static func socketAddress(_ name: String) throws(Failure) -> (address: sockaddr_un, length: socklen_t) {
        var bytes = Array(name.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        guard abstract || bytes.first == UInt8(ascii: "/") else {
            throw Failure(description: "\(socketVariable) '\(name)' is neither an absolute path nor an abstract name (@…)")
        }
        // An abstract name starts with a NUL byte and has no terminating one: its length is
        // exactly what is given. A path is NUL-terminated.
        if abstract { bytes[0] = 0 } else { bytes.append(0) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard bytes.count <= MemoryLayout.size(ofValue: address.sun_path) else {
            throw Failure(description: "\(socketVariable) '\(name)' is longer than a socket address holds")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + bytes.count
        return (address, socklen_t(length))
    }
}
