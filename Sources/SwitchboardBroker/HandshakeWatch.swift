// Connection refusals that never reach the ZAP handler.
//
// libzmq settles some CURVE refusals inside the ZMTP handshake, before it asks ZAP anything: a
// client offering NULL or PLAIN to a CURVE server (a mechanism mismatch), and a client that
// encrypted its HELLO for another server key (the server cannot open it). The ZAP handler
// never hears of these, so without this watch they leave no log line and no `security.refused`
// event (protocol/README.md, 13.4). A socket monitor on each server socket reports them as
// HANDSHAKE_FAILED_PROTOCOL with libzmq's protocol error code; that is all libzmq tells: the
// peer's address and key are not in the event, so such refusals name the endpoint only.

import CZeroMQ
import Foundation
import Logging
import SwitchboardSecurity
import ZeroMQ

/// Socket monitors on a broker thread's server sockets, reporting handshake failures as
/// refusals. Threading contract: made, drained and closed on the thread that owns the sockets.
final class HandshakeWatch {
    private let pairs: [(pair: Socket, endpoint: Endpoint)]
    private let security: BrokerSecurity

    /// Starts a monitor on each socket (before it binds or after: both work) and connects a PAIR
    /// to read it.
    init(context: Context, sockets: [(Socket, Endpoint)], security: BrokerSecurity) throws {
        self.security = security
        var pairs: [(Socket, Endpoint)] = []
        for (socket, endpoint) in sockets {
            // A fresh address per broker: two brokers in one process (tests) never collide.
            let address = "inproc://switchboard.handshake.\(endpoint.rawValue).\(UUID().uuidString)"
            // Not HANDSHAKE_FAILED_NO_DETAIL: a peer that merely closes during the handshake (a
            // port probe, a health check) is no refusal.
            try socket.startMonitor(endpoint: address, events: .handshakeFailedProtocol)
            let pair = try context.socket(.pair, linger: 0)
            try pair.connect(address)
            pairs.append((pair, endpoint))
        }
        self.pairs = pairs
    }

    /// Adds every monitor PAIR to `poller`; returns their indices.
    func add(to poller: Poller) -> [Int] { pairs.map { poller.add($0.pair) } }

    /// Reads every waiting monitor event of the PAIR at `position` (an index into `add`'s
    /// result) and records each handshake failure as a refusal.
    func drain(_ position: Int) {
        let (pair, endpoint) = pairs[position]
        while let message = try? pair.receive(dontWait: true) {
            guard let event = try? SocketEvent(frames: message.frames) else { continue }
            let (kind, reason) = Self.describe(event)
            security.refused(kind, principal: nil, endpoint: endpoint, reason: reason, connection: true)
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

    /// Closes the PAIRs. The monitored sockets stop their monitors when they close.
    func close() {
        for (pair, _) in pairs { pair.close() }
    }
}
