public import Foundation

/// The Majordomo frames of the service plane: MDP/0.1 (ZeroMQ RFC 7) and MDP/0.2 (RFC 18).
///
/// The two versions are told apart by the protocol header frame (`MDPC01`, `MDPW01`,
/// `MDPC02`, `MDPW02`). MDP/0.1 peers emulate REQ and send an empty delimiter first; MDP/0.2
/// peers send none, but one is accepted and mirrored back (protocol/README.md, section 12).
public enum Majordomo {
    public enum Version: Int, Sendable, Hashable, CustomStringConvertible {
        case v01 = 1
        case v02 = 2

        public var description: String { self == .v01 ? "MDP/0.1" : "MDP/0.2" }
        public var clientHeader: Data { self == .v01 ? Self.headers.client01 : Self.headers.client02 }
        public var workerHeader: Data { self == .v01 ? Self.headers.worker01 : Self.headers.worker02 }

        /// Made once: every message the broker parses is compared with them, and every one it
        /// sends starts with one.
        private static let headers = (
            client01: Data("MDPC01".utf8), client02: Data("MDPC02".utf8), worker01: Data("MDPW01".utf8), worker02: Data("MDPW02".utf8)
        )
    }

    /// Worker commands, by meaning; the byte differs between versions.
    public enum WorkerCommand: Sendable, Hashable, CustomStringConvertible {
        case ready, request, partial, final, heartbeat, disconnect

        /// The command byte; nil for PARTIAL in MDP/0.1, which has only one REPLY (0x03, the final answer).
        public func byte(_ version: Version) -> UInt8? {
            switch (self, version) {
            case (.ready, _): 0x01
            case (.request, _): 0x02
            case (.partial, .v01): nil
            case (.final, .v01): 0x03
            case (.heartbeat, .v01): 0x04
            case (.disconnect, .v01): 0x05
            case (.partial, .v02): 0x03
            case (.final, .v02): 0x04
            case (.heartbeat, .v02): 0x05
            case (.disconnect, .v02): 0x06
            }
        }

        public init?(byte: UInt8, version: Version) {
            let all: [WorkerCommand] = [.ready, .request, .partial, .final, .heartbeat, .disconnect]
            guard let found = all.first(where: { $0.byte(version) == byte }) else { return nil }
            self = found
        }

        public var description: String {
            switch self {
            case .ready: "READY"
            case .request: "REQUEST"
            case .partial: "PARTIAL"
            case .final: "FINAL"
            case .heartbeat: "HEARTBEAT"
            case .disconnect: "DISCONNECT"
            }
        }
    }

    /// Client commands of MDP/0.2 (MDP/0.1 has none: a request and its reply have the same shape).
    public enum ClientCommand: UInt8, Sendable, Hashable {
        case request = 0x01
        case partial = 0x02
        case final = 0x03
    }

    /// A message as a broker receives it, after the routing frame.
    public enum Inbound: Sendable, Hashable {
        case client(ClientMessage)
        case worker(WorkerMessage)
    }

    public struct ClientMessage: Sendable, Hashable {
        public var version: Version
        /// The peer sent an empty frame before the header (always so for MDP/0.1).
        public var delimited: Bool
        /// Only `.request` is valid from a client; the others are reported as unexpected.
        public var command: ClientCommand
        public var service: String
        public var body: [Data]
    }

    public struct WorkerMessage: Sendable, Hashable {
        public var version: Version
        public var delimited: Bool
        public var command: WorkerCommand
        /// READY: the service name.
        public var service: String?
        /// REQUEST, PARTIAL, FINAL: the client address frame.
        public var client: Data?
        public var body: [Data]
    }

    /// Why a message is malformed; such messages are dropped (never answered).
    public struct Malformed: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// The longest service name accepted (RFC 7 sets none; ours keeps names printable and short).
    public static let maximumServiceBytes = 255

    /// Parses frames as a broker receives them (routing frame already removed).
    public static func parse(_ frames: ArraySlice<Data>) throws(Malformed) -> Inbound {
        var rest = frames
        var delimited = false
        if let first = rest.first, first.isEmpty {
            delimited = true
            rest = rest.dropFirst()
        }
        guard let header = rest.popFirst() else { throw Malformed("no protocol header frame") }
        switch header {
        case Version.v01.clientHeader:
            guard delimited else { throw Malformed("MDPC01 without the empty delimiter frame") }
            let service = try serviceName(rest.popFirst())
            return .client(ClientMessage(version: .v01, delimited: true, command: .request, service: service, body: Array(rest)))
        case Version.v02.clientHeader:
            guard let byte = rest.popFirst(), byte.count == 1, let command = ClientCommand(rawValue: byte[byte.startIndex])
            else { throw Malformed("MDPC02 needs a one-byte command 0x01-0x03") }
            let service = try serviceName(rest.popFirst())
            return .client(ClientMessage(version: .v02, delimited: delimited, command: command, service: service, body: Array(rest)))
        case Version.v01.workerHeader, Version.v02.workerHeader:
            let version: Version = header == Version.v01.workerHeader ? .v01 : .v02
            if version == .v01 && !delimited { throw Malformed("MDPW01 without the empty delimiter frame") }
            guard let byte = rest.popFirst(), byte.count == 1,
                let command = WorkerCommand(byte: byte[byte.startIndex], version: version)
            else { throw Malformed("\(version) worker command byte missing or unknown") }
            var message = WorkerMessage(version: version, delimited: delimited, command: command, body: [])
            switch command {
            case .ready:
                message.service = try serviceName(rest.popFirst())
                guard rest.isEmpty else { throw Malformed("READY carries only a service name") }
            case .request, .partial, .final:
                guard let client = rest.popFirst(), !client.isEmpty else { throw Malformed("\(command) without a client address") }
                guard let empty = rest.popFirst(), empty.isEmpty else {
                    throw Malformed("\(command) needs an empty frame after the client address")
                }
                message.client = client
                message.body = Array(rest)
            case .heartbeat, .disconnect:
                guard rest.isEmpty else { throw Malformed("\(command) carries no frames") }
            }
            return .worker(message)
        default:
            let shown = String(decoding: header.prefix(16), as: UTF8.self)
            throw Malformed("unknown protocol header '\(shown)'")
        }
    }

    static func serviceName(_ frame: Data?) throws(Malformed) -> String {
        guard let frame, !frame.isEmpty else { throw Malformed("no service name") }
        guard frame.count <= maximumServiceBytes else { throw Malformed("service name longer than \(maximumServiceBytes) bytes") }
        guard let name = String(data: frame, encoding: .utf8), !name.contains(where: { $0.isNewline || $0 == "\0" }) else {
            throw Malformed("service name is not printable UTF-8")
        }
        return name
    }

    // MARK: Building

    /// A client's request: `[""]["MDPC01"][service][body…]` or `["MDPC02"][0x01][service][body…]`.
    public static func clientRequest(_ version: Version, service: String, body: [Data] = [], delimited: Bool? = nil) -> [Data] {
        var frames: [Data] = []
        if delimited ?? (version == .v01) { frames.append(Data()) }
        frames.append(version.clientHeader)
        if version == .v02 { frames.append(Data([ClientCommand.request.rawValue])) }
        frames.append(Data(service.utf8))
        return frames + body
    }

    /// What the broker sends a client: a reply (MDP/0.1) or PARTIAL/FINAL (MDP/0.2).
    public static func clientReply(
        _ version: Version, delimited: Bool, final: Bool, service: String, body: [Data]
    ) -> [Data] {
        var frames: [Data] = []
        if delimited { frames.append(Data()) }
        frames.append(version.clientHeader)
        if version == .v02 { frames.append(Data([final ? ClientCommand.final.rawValue : ClientCommand.partial.rawValue])) }
        frames.append(Data(service.utf8))
        return frames + body
    }

    /// A worker command without a client (READY, HEARTBEAT, DISCONNECT).
    public static func worker(_ version: Version, _ command: WorkerCommand, service: String? = nil, delimited: Bool? = nil) -> [Data] {
        var frames: [Data] = []
        if delimited ?? (version == .v01) { frames.append(Data()) }
        frames.append(version.workerHeader)
        // Callers never ask for PARTIAL in MDP/0.1 (it does not exist); FINAL stands in for it.
        frames.append(Data([command.byte(version) ?? WorkerCommand.final.byte(version)!]))
        if let service { frames.append(Data(service.utf8)) }
        return frames
    }

    /// A worker command addressed to a client (REQUEST from the broker, PARTIAL/FINAL from a worker).
    public static func worker(
        _ version: Version, _ command: WorkerCommand, client: Data, body: [Data], delimited: Bool? = nil
    ) -> [Data] {
        var frames = worker(version, command, delimited: delimited)
        frames.append(client)
        frames.append(Data())
        return frames + body
    }
}
