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

extension Data {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
