// A TCP link on loopback that a test can cut and restore, as a network partition looks to both
// ends: while cut, nothing passes either way and nothing is refused or reset (bytes wait in
// the kernels' buffers, new connections are accepted and held); once restored, what waited
// flows on. A test points one client (a broker of a pair) at `port` instead of the server's,
// and cuts that client off alone. It can also hold the server's answers back for a while
// (`delayAnswers`), as a slow server or a slow path looks to the client, or hold the client's
// bytes back while the server's still flow (`holdRequests`): one direction of a path stalled.

import Foundation
import Synchronization

public final class CuttableLink: Sendable {
    /// Where clients connect (127.0.0.1).
    public let port: Int
    private let target: (host: String, port: Int)
    private let listener: Int32
    private let state = Mutex(State())

    private struct State {
        var cut = false
        var requestsHeld = false
        var stopped = false
        var answerDelay: Duration = .zero
        var sockets: [Int32] = []
    }

    /// Listens on a free loopback port and forwards every connection to `host:port`.
    public init(to host: String, port targetPort: Int) throws {
        target = (host, targetPort)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LinkFailure("socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw LinkFailure("bind/listen: \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "cuttable-link-accept"
        thread.start()
    }

    deinit { stop() }

    /// Nothing passes from now on, either way.
    public func cut() { state.withLock { $0.cut = true } }

    /// What waited flows on.
    public func restore() { state.withLock { $0.cut = false } }

    /// From now on, every byte from the server reaches the client `delay` after it came (in
    /// order); `.zero` ends that for what comes next.
    public func delayAnswers(by delay: Duration) { state.withLock { $0.answerDelay = delay } }

    /// From now on nothing from the client is read (it waits in the kernels' buffers) while what
    /// the server sends still reaches the client: a path stalled one way.
    public func holdRequests() { state.withLock { $0.requestsHeld = true } }

    /// What the client sent meanwhile flows on.
    public func releaseRequests() { state.withLock { $0.requestsHeld = false } }

    /// Closes every connection and stops listening.
    public func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            // Under the lock: these descriptors are still ours (they leave the list before they
            // are closed). The pumps and the accept loop notice `stopped` within 100 ms.
            for socket in state.sockets { shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    private var isCut: Bool { state.withLock { $0.cut } }
    private var requestsHeld: Bool { state.withLock { $0.requestsHeld } }
    private var answerDelay: Duration { state.withLock { $0.answerDelay } }
    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func acceptLoop() {
        while !isStopped {
            var fds = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&fds, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            let thread = Thread { [self] in connect(client) }
            thread.name = "cuttable-link"
            thread.start()
        }
        close(listener)
    }

    /// Holds a new connection while the link is cut, then joins it to the server.
    private func connect(_ client: Int32) {
        while isCut && !isStopped { usleep(20_000) }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(target.host)
        address.sin_port = UInt16(target.port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0, !isStopped else {
            close(client)
            close(server)
            return
        }
        let registered = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.sockets += [client, server]
            return true
        }
        if registered { pump(client, server) }
        // Out of the list and closed under the lock: `stop()` must never shut down a descriptor
        // number that has since been given to another socket of this process.
        state.withLock { state in
            state.sockets.removeAll { $0 == client || $0 == server }
            close(client)
            close(server)
        }
    }

    /// Copies both ways until either end closes; while cut, reads nothing (the bytes wait). What
    /// comes from the server (`b`) while answers are delayed is held, in order, until it is due.
    private func pump(_ a: Int32, _ b: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var held: [(due: ContinuousClock.Instant, bytes: [UInt8])] = []
        func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let written = write(fd, bytes.baseAddress! + sent, bytes.count - sent)
                guard written > 0 else { return false }
                sent += written
            }
            return true
        }
        while !isStopped {
            if isCut {
                usleep(20_000)
                continue
            }
            while let first = held.first, first.due <= .now {
                guard first.bytes.withUnsafeBytes({ writeAll($0, to: a) }) else { return }
                held.removeFirst()
            }
            let wait =
                held.first.map { first -> Int32 in
                    let left = ContinuousClock.now.duration(to: first.due).components
                    return max(0, min(50, Int32(clamping: left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000) + 1))
                } ?? 50
            let fromClient = requestsHeld ? 0 : Int16(POLLIN)
            var fds = [pollfd(fd: a, events: fromClient, revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, requestsHeld ? min(wait, 20) : wait) > 0 else { continue }
            for (index, (from, to)) in [(a, b), (b, a)].enumerated() where fds[index].revents != 0 {
                let count = read(from, &buffer, buffer.count)
                guard count > 0 else { return }
                let delay = from == b ? answerDelay : .zero
                if delay > .zero || (from == b && !held.isEmpty) {
                    // Behind what is held already, whatever the delay is now: order is kept.
                    let due = max(ContinuousClock.now + delay, held.last?.due ?? .now)
                    held.append((due, Array(buffer[0..<count])))
                    continue
                }
                guard buffer.withUnsafeBytes({ writeAll(UnsafeRawBufferPointer(rebasing: $0[0..<count]), to: to) }) else { return }
            }
        }
    }

    struct LinkFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
