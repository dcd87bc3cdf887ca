import CZeroMQ
public import Foundation

/// One event from a socket monitor (`zmq_socket_monitor`).
public struct SocketEvent: Sendable, Hashable, CustomStringConvertible {
    /// Sets of event kinds, for choosing what a monitor reports.
    public struct Kinds: OptionSet, Sendable, Hashable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let connected = Kinds(rawValue: ZMQ_EVENT_CONNECTED)
        public static let connectDelayed = Kinds(rawValue: ZMQ_EVENT_CONNECT_DELAYED)
        public static let connectRetried = Kinds(rawValue: ZMQ_EVENT_CONNECT_RETRIED)
        public static let listening = Kinds(rawValue: ZMQ_EVENT_LISTENING)
        public static let bindFailed = Kinds(rawValue: ZMQ_EVENT_BIND_FAILED)
        public static let accepted = Kinds(rawValue: ZMQ_EVENT_ACCEPTED)
        public static let acceptFailed = Kinds(rawValue: ZMQ_EVENT_ACCEPT_FAILED)
        public static let closed = Kinds(rawValue: ZMQ_EVENT_CLOSED)
        public static let closeFailed = Kinds(rawValue: ZMQ_EVENT_CLOSE_FAILED)
        public static let disconnected = Kinds(rawValue: ZMQ_EVENT_DISCONNECTED)
        public static let monitorStopped = Kinds(rawValue: ZMQ_EVENT_MONITOR_STOPPED)
        public static let handshakeFailedNoDetail = Kinds(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        public static let handshakeSucceeded = Kinds(rawValue: ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        public static let handshakeFailedProtocol = Kinds(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        public static let handshakeFailedAuth = Kinds(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        public static let all = Kinds(rawValue: ZMQ_EVENT_ALL)
    }

    /// The event kind (a single bit of `Kinds`).
    public let kind: Kinds
    /// The event's value: a file descriptor, a reconnect interval, an errno, or for
    /// `handshakeFailedAuth` the ZAP status code (e.g. 400).
    public let value: UInt32
    /// The endpoint the event concerns.
    public let endpoint: String

    /// Decodes the two frames a monitor sends: a u16 event and u32 value (native byte order,
    /// as libzmq writes them), then the endpoint.
    public init(frames: [Data]) throws(ZMQError) {
        guard frames.count == 2, frames[0].count == 6 else {
            throw ZMQError.invalid("a monitor event is two frames, the first of 6 bytes", operation: "monitor event")
        }
        let head = [UInt8](frames[0])
        let event = UInt16(head[0]) | UInt16(head[1]) << 8
        let value = UInt32(head[2]) | UInt32(head[3]) << 8 | UInt32(head[4]) << 16 | UInt32(head[5]) << 24
        self.kind = Kinds(rawValue: Int32(event))
        self.value = value
        self.endpoint = String(decoding: frames[1], as: UTF8.self)
    }

    public var name: String {
        switch kind {
        case .connected: "connected"
        case .connectDelayed: "connect-delayed"
        case .connectRetried: "connect-retried"
        case .listening: "listening"
        case .bindFailed: "bind-failed"
        case .accepted: "accepted"
        case .acceptFailed: "accept-failed"
        case .closed: "closed"
        case .closeFailed: "close-failed"
        case .disconnected: "disconnected"
        case .monitorStopped: "monitor-stopped"
        case .handshakeFailedNoDetail: "handshake-failed"
        case .handshakeSucceeded: "handshake-succeeded"
        case .handshakeFailedProtocol: "handshake-failed-protocol"
        case .handshakeFailedAuth: "handshake-failed-auth"
        default: "event(\(kind.rawValue))"
        }
    }

    public var description: String { "\(name) \(endpoint) value=\(value)" }
}
