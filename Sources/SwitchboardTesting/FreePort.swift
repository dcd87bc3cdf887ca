import Foundation

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
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// A TCP port on 127.0.0.1 that refuses connections for as long as this value lives: its socket
/// is bound but never listens, so a connect gets ECONNREFUSED, and no other test's server can
/// bind the port meanwhile (a port learned from a stopped server can be, and was, taken by the
/// next test that binds port 0).
public final class RefusingPort: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw WaitTimedOut(description: "no socket for a refusing port (errno \(errno))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw WaitTimedOut(description: "could not bind a refusing port (errno \(errno))")
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}
