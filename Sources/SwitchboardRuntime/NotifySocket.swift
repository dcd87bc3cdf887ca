// The supervisor's end of the notify protocol (ServiceReadiness is the program's end): a Unix
// datagram socket bound to a path, read on a thread of its own so no task waits on a socket.

import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A bound notify socket that hands each datagram's assignments to `onMessage`.
///
/// It reads on a dedicated thread, which blocks in poll(2) on the socket and on one end of a
/// socket pair whose other end `stop()` closes; `onMessage` is called on that thread, one datagram at a time, and
/// must not block. The socket file is removed when the reader stops.
public final class NotifySocket: Sendable {
    /// The socket's path: the NOTIFY_SOCKET value for whoever should report to it.
    public let path: String
    /// The wake-up pair's other end, until `stop()` closes it (which wakes the reader: end of file).
    private let wake: Mutex<Int32?>

    /// Why the socket could not be made.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Binds a datagram socket at `path` (which must not exist) and starts reading it.
    /// - Parameter onMessage: each datagram's `KEY=VALUE` lines as a dictionary (a later
    ///   assignment of the same key wins; lines without '=' are ignored).
    public init(path: String, onMessage: @escaping @Sendable ([String: String]) -> Void) throws(Failure) {
        func failure(_ what: String) -> Failure {
            Failure(description: "\(what) \(path): \(String(cString: strerror(errno)))")
        }
        let address: (address: sockaddr_un, length: socklen_t)
        do {
            address = try ServiceReadiness.socketAddress(path)
        } catch {
            throw Failure(description: error.description)
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw failure("cannot make a socket for") }
        var bound = address.address
        let result = withUnsafePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, address.length) }
        }
        guard result == 0 else {
            let error = failure("cannot bind")
            close(descriptor)
            throw error
        }
        // A socket pair rather than pipe2(2), which Swift's Glibc does not show; closing one end
        // is end of file at the other, as with a pipe.
        var ends: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            let error = failure("cannot make a wake-up pair for")
            close(descriptor)
            unlink(path)
            throw error
        }
        let (readEnd, writeEnd) = (ends[0], ends[1])
        self.path = path
        self.wake = Mutex(writeEnd)
        let reader = Thread { [path] in
            Self.read(descriptor, until: readEnd, onMessage: onMessage)
            close(descriptor)
            close(readEnd)
            if !path.hasPrefix("@") { unlink(path) }
        }
        reader.name = "notify-socket"
        reader.start()
    }

    deinit { stop() }

    /// Stops the reader, which removes the socket file; messages not yet read are dropped.
    /// Returns at once; a second call does nothing.
    public func stop() {
        let descriptor = wake.withLock { end in
            defer { end = nil }
            return end
        }
        if let descriptor { close(descriptor) }
    }

    private static func read(_ descriptor: Int32, until wake: Int32, onMessage: @Sendable ([String: String]) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var watched = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        while true {
            watched[0].revents = 0
            watched[1].revents = 0
            guard poll(&watched, 2, -1) >= 0 || errno == EINTR else { return }
            if watched[1].revents != 0 { return }
            guard watched[0].revents != 0 else { continue }
            // Every datagram queued now; the socket is nonblocking, so EAGAIN ends the batch.
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                guard count > 0 else { break }
                onMessage(parse(buffer[..<count]))
            }
        }
    }

    /// A datagram's assignments.
    static func parse(_ datagram: ArraySlice<UInt8>) -> [String: String] {
        var assignments: [String: String] = [:]
        for line in String(decoding: datagram, as: UTF8.self).split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            assignments[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return assignments
    }
}
