import Foundation
import Synchronization

/// A TCP port on 127.0.0.1 nobody listens on now (the first of `count` consecutive free ones).
/// Free ports below Linux's ephemeral range (32768–60999), so a port found free here is not
/// taken a moment later by another test's outgoing connection or `tcp://…:*` bind.
public func freePort(count: Int = 1) throws -> Int {
    for _ in 0..<50 {
        let base = Int.random(in: 20_000..<32_000)
        if (base..<(base + count)).allSatisfy(isFree) { return base }
    }
    throw WaitTimedOut(description: "no free port found")
}

private func isFree(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return bindLoopback(fd, port: port) != nil
}

/// Binds `fd` to 127.0.0.1:`port` (0: a port of the system's choosing); the port bound, or nil.
private func bindLoopback(_ fd: Int32, port: Int) -> Int? {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}

/// A TCP port on 127.0.0.1 that refuses connections for as long as this value lives: its socket
/// is bound but never listens, so a connect gets ECONNREFUSED, and no other test's server can
/// bind the port meanwhile (a port learned from a stopped server can be, and was, taken by the
/// next test that binds port 0).
public final class RefusingPort: Sendable {
    public let port: Int
    private let descriptor: Int32

    /// A port of the system's choosing.
    public convenience init() throws {
        try self.init(port: 0)
    }

    /// `port` itself, held from now on; tried again for up to `within` while it is still taken
    /// (a broker's listener that libzmq closes asynchronously). For a test that stops a broker and
    /// starts it again on the same port: held in between, nobody else's test can take it.
    public init(port wanted: Int, within: Duration = .seconds(5)) throws {
        let deadline = ContinuousClock.now + within
        while true {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw WaitTimedOut(description: "no socket for a refusing port (errno \(errno))") }
            // Closed connections of the broker that had the port may linger in TIME_WAIT.
            var on: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            if let bound = bindLoopback(fd, port: wanted) {
                descriptor = fd
                port = bound
                return
            }
            let failure = errno
            close(fd)
            guard wanted != 0, failure == EADDRINUSE, ContinuousClock.now < deadline else {
                throw WaitTimedOut(description: "could not bind a refusing port \(wanted) (errno \(failure))")
            }
            usleep(20_000)
        }
    }

    /// Lets the port go (for the broker that is to bind it next); also done when this value goes.
    public func release() {
        released.withLock { done in
            guard !done else { return }
            done = true
            close(descriptor)
        }
    }

    private let released = Mutex(false)

    deinit { release() }
}
