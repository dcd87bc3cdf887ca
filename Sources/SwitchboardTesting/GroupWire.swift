public import Foundation
public import SwitchboardProtocol
public import ZeroMQ

/// A consumer-group member spoken by hand on a raw DEALER (`BrokerFixture.groupPeer()`), for
/// tests that check the groups endpoint's wire behaviour without a member library in between.
public enum GroupWire {
    /// A JOIN as a member sends it (`JoinHeader.envelope()`: 1.3 when it asks for a batch), or
    /// written as `version`.
    public static func join(_ header: JoinHeader, version: ProtocolVersion? = nil) -> [Data] {
        guard let version else { return header.envelope().frames() }
        return Envelope(command: .join, header: header.wireJSON(), version: version).frames()
    }

    public static func settle(_ header: SettleHeader) -> [Data] {
        Envelope(command: header.command, header: header.wireJSON()).frames()
    }

    /// The next message of `command` on `socket`, skipping HEAD and anything else; an ERROR
    /// (when not what is awaited) fails with its code and message.
    public static func next(_ command: Command, on socket: AsyncSocket, timeout: Duration = .seconds(10)) async throws -> Envelope {
        let deadline = ContinuousClock.now + timeout
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero, let message = try await socket.receive(timeout: remaining) else {
                throw WaitTimedOut(description: "no \(command.rawValue) within \(timeout)")
            }
            let envelope = try Envelope.decode(message.frames, limits: .groups)
            if envelope.command == command { return envelope }
            if envelope.command == .error {
                let error = try envelope.decodeHeader(ErrorHeader.self)
                throw WaitTimedOut(description: "ERROR \(error.code.rawValue) instead of \(command.rawValue): \(error.message)")
            }
        }
    }

    /// Joins `group` and waits for JOINED.
    public static func joined(_ header: JoinHeader, version: ProtocolVersion? = nil, on socket: AsyncSocket) async throws -> JoinedHeader {
        try await socket.send(join(header, version: version))
        return try await next(.joined, on: socket).decodeHeader(JoinedHeader.self)
    }

    /// The next DELIVER, with its header.
    public static func delivery(on socket: AsyncSocket, timeout: Duration = .seconds(10)) async throws -> (DeliverHeader, Envelope) {
        let envelope = try await next(.deliver, on: socket, timeout: timeout)
        return (try envelope.decodeHeader(DeliverHeader.self), envelope)
    }
}
