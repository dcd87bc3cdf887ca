// A slow-loris attack for tests: connections to an HTTP server that each send part of a request
// head and then nothing. Made, watched and closed on a thread of their own: poll(2) blocks, and
// nothing that blocks may run on the cooperative pool.

import Foundation
import Synchronization

/// `count` connections to `127.0.0.1:port`, each sending an incomplete request head, watched
/// until `stop()` for the moment the server closes each.
public final class HalfSentRequests: Sendable {
    public struct Connection: Sendable {
        /// When its part of a head was sent; nil while it is still connecting (or if it never
        /// connected).
        public var sent: ContinuousClock.Instant?
        /// When the server closed it (or refused it); nil while it is open.
        public var closed: ContinuousClock.Instant?
        /// How long the server held it after the head was sent.
        public var held: Duration? { sent.flatMap { sent in closed.map { sent.duration(to: $0) } } }
    }

    private struct State {
        var connections: [Connection]
        var stopping = false
        var stopped = false
        var onStopped: CheckedContinuation<Void, Never>?
    }

    private let state: Mutex<State>
    public let count: Int

    /// Starts connecting at once; every connection is made before this returns or fails.
    /// - Parameter head: what each sends: a request line and a header, no blank line after it.
    public init(port: Int, count: Int, head: String = "GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n") throws {
        self.count = count
        state = Mutex(State(connections: Array(repeating: Connection(), count: count)))
        var descriptors: [Int32] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else {
                for fd in descriptors { close(fd) }
                throw WaitTimedOut(description: "socket() failed: errno \(errno) after \(descriptors.count) connections")
            }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            // Non-blocking: a server that has stopped accepting must not stall the flood.
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            descriptors.append(fd)
        }
        let opened = descriptors
        let thread = Thread { [self] in watch(opened, head: Array(head.utf8)) }
        thread.name = "half-sent-requests"
        thread.start()
    }

    /// What each connection has seen so far.
    public var connections: [Connection] { state.withLock { $0.connections } }

    /// How many the server has closed (or refused).
    public var closedCount: Int { state.withLock { $0.connections.count { $0.closed != nil } } }

    /// How many have sent their part of a head and are still open.
    public var heldCount: Int { state.withLock { $0.connections.count { $0.sent != nil && $0.closed == nil } } }

    /// Closes every connection still open and waits for the watching thread to end.
    public func stop() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state in
                state.stopping = true
                if state.stopped { return true }
                state.onStopped = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func watch(_ descriptors: [Int32], head: [UInt8]) {
        var open = Array(descriptors.indices)
        var sent = Array(repeating: false, count: descriptors.count)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !state.withLock({ $0.stopping }) && !open.isEmpty {
            var polled = open.map { index in
                pollfd(
                    fd: descriptors[index], events: Int16(sent[index] ? POLLIN : POLLOUT), revents: 0)
            }
            // 50 ms: how soon a stop() is noticed.
            guard poll(&polled, nfds_t(polled.count), 50) > 0 else { continue }
            var stillOpen: [Int] = []
            for (slot, index) in open.enumerated() {
                let events = Int32(polled[slot].revents)
                let fd = descriptors[index]
                var closed = false
                if events == 0 {
                    // Nothing new.
                } else if !sent[index] {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    if error != 0 || events & (POLLERR | POLLHUP) != 0 {
                        closed = true
                    } else {
                        _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        sent[index] = true
                        let now = ContinuousClock.now
                        state.withLock { $0.connections[index].sent = now }
                    }
                } else {
                    // Readable (POLLIN includes the end of the stream): an answer (read and
                    // dropped), the end of the stream or a reset.
                    let got = recv(fd, &buffer, buffer.count, 0)
                    closed = got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)
                }
                if closed {
                    let now = ContinuousClock.now
                    state.withLock { $0.connections[index].closed = now }
                    close(fd)
                } else {
                    stillOpen.append(index)
                }
            }
            open = stillOpen
        }
        for index in open { close(descriptors[index]) }
        let continuation = state.withLock { state in
            state.stopped = true
            defer { state.onStopped = nil }
            return state.onStopped
        }
        continuation?.resume()
    }
}
