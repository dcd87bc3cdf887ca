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
