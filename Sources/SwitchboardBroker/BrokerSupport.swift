import Foundation
import ZeroMQ

/// Unbinds `endpoint` and binds it again. libzmq closes the listener asynchronously, so the
/// port may still be taken for a moment: the bind is retried for up to two seconds (on a
/// broker thread, never on the cooperative pool).
func rebindEndpoint(_ socket: Socket, _ endpoint: String) throws {
    try socket.unbind(endpoint)
    for _ in 0..<200 {
        let result = Result { () throws(ZMQError) in try socket.bind(endpoint) }
        guard case .failure(let error) = result else { return }
        guard error.errno == EADDRINUSE else { throw error }
        usleep(10_000)
    }
    try socket.bind(endpoint)
}

struct RateLimiter {
    let perSecond: Int
    var windowStart = ContinuousClock.now
    var used = 0

    init(perSecond: Int) { self.perSecond = perSecond }

    mutating func allow() -> Bool {
        let now = ContinuousClock.now
        if now - windowStart >= .seconds(1) {
            windowStart = now
            used = 0
        }
        used += 1
        return used <= perSecond
    }
}

extension Data {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
