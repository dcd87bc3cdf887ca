// What the broker learns of its connections from libzmq's socket monitors, one per server
// socket (libzmq allows one monitor a socket, so both concerns share it):
//
// - Refusals that never reach the ZAP handler. libzmq settles some CURVE refusals inside the
//   ZMTP handshake, before it asks ZAP anything: a client offering NULL or PLAIN to a CURVE
//   server (a mechanism mismatch), and a client that encrypted its HELLO for another server
//   key (the server cannot open it). The monitor reports these as HANDSHAKE_FAILED_PROTOCOL
//   with libzmq's protocol error code; the peer's address and key are not in the event, so such
//   refusals name the endpoint only (protocol/README.md, 13.4).
// - Connections dropped by the receive guard (`ReceiveGuard`): a peer that sent more than
//   `max_pending_bytes` the broker had not yet taken (one message of thousands of frames is
//   held by libzmq whole before the broker sees any of it; section 4). The guard counts a
//   connection by its descriptor, so every closed connection is reported to it (DISCONNECTED,
//   CLOSED): the next connection on that descriptor starts from zero.

import CZeroMQ
import Foundation
import Logging
import SwitchboardSecurity
import ZeroMQ

/// Socket monitors on a broker thread's server sockets. Threading contract: made, drained and
/// closed on the thread that owns the sockets.
final class ConnectionWatch {
    private let pairs: [(pair: Socket, endpoint: Endpoint)]
    private let security: BrokerSecurity?
    private let logger: Logger
    private let limit: Int64
    /// The TCP ports this watch put under the receive guard (freed again by `close`).
    private let guardedPorts: [UInt16]
    private var dropLog = LogLimiter(perInterval: 5)

    /// Starts a monitor on each bound socket, connects a PAIR to read it, and puts each TCP
    /// endpoint under the receive guard with `limit` bytes per connection.
    init(
        context: Context, sockets: [(socket: Socket, endpoint: Endpoint, address: String)], security: BrokerSecurity?, limit: Int64,
        logger: Logger
    ) throws {
        self.security = security
        self.logger = logger
        self.limit = limit
        var pairs: [(Socket, Endpoint)] = []
        var ports: [UInt16] = []
        // Not HANDSHAKE_FAILED_NO_DETAIL: a peer that merely closes during the handshake (a port
        // probe, a health check) is no refusal.
        let events: SocketEvent.Kinds = security == nil ? [.disconnected, .closed] : [.disconnected, .closed, .handshakeFailedProtocol]
        for (socket, endpoint, address) in sockets {
            // A fresh address per broker: two brokers in one process (tests) never collide.
            let monitor = "inproc://switchboard.connections.\(endpoint.rawValue).\(UUID().uuidString)"
            try socket.startMonitor(endpoint: monitor, events: events)
            let pair = try context.socket(.pair, linger: 0)
            try pair.connect(monitor)
            pairs.append((pair, endpoint))
            if let port = Self.tcpPort(address) {
                ReceiveGuard.guardPort(port, limit: limit)
                ports.append(port)
            }
        }
        self.pairs = pairs
        self.guardedPorts = ports
        if !ports.isEmpty && !ReceiveGuard.isInstalled {
            logger.warning(
                "the per-connection byte limit (max_pending_bytes) is not enforced: libzmq's reads do not reach the receive guard in this process"
            )
        }
    }

    /// The port of a `tcp://host:port` endpoint as libzmq reports it bound.
    static func tcpPort(_ endpoint: String) -> UInt16? {
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") else { return nil }
        return UInt16(endpoint[endpoint.index(after: colon)...])
    }

    /// Adds every monitor PAIR to `poller`; returns their indices.
    func add(to poller: Poller) -> [Int] { pairs.map { poller.add($0.pair) } }

    /// Reads every waiting monitor event of the PAIR at `position` (an index into `add`'s
    /// result): handshake failures become refusals, closed connections are reported to the
    /// receive guard (and logged when it dropped them).
    func drain(_ position: Int) {
        let (pair, endpoint) = pairs[position]
        while let message = try? pair.receive(dontWait: true) {
            guard let event = try? SocketEvent(frames: message.frames) else { continue }
            if event.kind == .handshakeFailedProtocol {
                let (kind, reason) = Self.describe(event)
                security?.refused(kind, principal: nil, endpoint: endpoint, reason: reason, connection: true)
            } else if ReceiveGuard.closed(fileDescriptor: Int32(bitPattern: event.value)) {
                dropped(endpoint: endpoint)
            }
        }
    }

    /// A connection the guard dropped: a refusal (kind `too-large`, no principal: the guard
    /// knows a descriptor, not who holds it) where there is security, a log line either way.
    private func dropped(endpoint: Endpoint) {
        let reason =
            "the connection sent more than \(limit) bytes the broker had not yet taken (max_pending_bytes): a message that large is refused, and the connection dropped"
        if let security {
            security.refused("too-large", principal: nil, endpoint: endpoint, reason: reason, connection: true)
        } else if let suppressed = dropLog.admit("too-large", at: .now) {
            logger.warning(
                "connection dropped", metadata: withSuppressed(suppressed, ["endpoint": "\(endpoint.rawValue)", "reason": "\(reason)"]))
        }
    }

    /// The `security.refused` kind and reason for a failed handshake.
    static func describe(_ event: SocketEvent) -> (kind: String, reason: String) {
        switch Int32(bitPattern: event.value) {
        case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
            return ("mechanism", "the client did not offer CURVE (NULL or PLAIN); CURVE only")
        case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
            return (
                "handshake",
                "the client's CURVE handshake could not be decrypted: it was made for another broker key"
            )
        default:
            return (
                "handshake", "the client broke the ZMTP handshake (libzmq protocol error 0x\(String(event.value, radix: 16)))"
            )
        }
    }

    /// Closes the PAIRs and takes the ports off the guard. The monitored sockets stop their
    /// monitors when they close.
    func close() {
        for (pair, _) in pairs { pair.close() }
        for port in guardedPorts { ReceiveGuard.guardPort(port, limit: 0) }
    }
}
