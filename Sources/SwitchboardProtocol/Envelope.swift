public import Foundation

/// A protocol version, `major.minor`. A receiver speaks one major version and accepts any minor
/// of it at or above its configured minimum.
public struct ProtocolVersion: Sendable, Hashable, Comparable, CustomStringConvertible, Codable {
    public var major: UInt8
    public var minor: UInt8

    public init(major: UInt8, minor: UInt8) {
        self.major = major
        self.minor = minor
    }

    /// The version this code speaks.
    public static let current = ProtocolVersion(major: 1, minor: 0)

    public static func < (lhs: ProtocolVersion, rhs: ProtocolVersion) -> Bool {
        (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
    }

    public var description: String { "\(major).\(minor)" }

    /// Parses `"1.0"`.
    public init?(_ text: String) {
        let parts = text.split(separator: ".")
        guard parts.count == 2, let major = UInt8(parts[0]), let minor = UInt8(parts[1]) else { return nil }
        self.init(major: major, minor: minor)
    }
}

/// The commands of protocol v1. Raw values are the wire words of frame 1.
/// EVENT … END travel on the event plane's endpoints; REQUEST and REPLY only inside Majordomo
/// bodies on the service endpoint.
public enum Command: String, Sendable, Hashable, CaseIterable {
    case event = "EVENT"
    case ack = "ACK"
    /// Protocol 1.1: one commit's ACKs for one producer (`Acks`).
    case acks = "ACKS"
    case nack = "NACK"
    case error = "ERROR"
    case heartbeat = "HEARTBEAT"
    case head = "HEAD"
    case fetch = "FETCH"
    case end = "END"
    /// Service plane (inside Majordomo bodies): a question to a service, and its answer.
    case request = "REQUEST"
    case reply = "REPLY"
    /// Consumer groups (section 15), on the groups endpoint: a member joins, the broker confirms
    /// and delivers, the member settles (ACK, ACKS, NACK, TERM, PROGRESS) and leaves.
    case join = "JOIN"
    case joined = "JOINED"
    case deliver = "DELIVER"
    case term = "TERM"
    case progress = "PROGRESS"
    case leave = "LEAVE"
}

/// The size limits of protocol v1, in bytes.
public struct SizeLimits: Sendable, Hashable {
    public var header = 4 * 1024
    public var parent = 4 * 1024
    public var metadata = 16 * 1024
    public var content = 256 * 1024
    public var signature = 1024
    /// The whole message, all frames after the routing frame.
    public var message = 512 * 1024

    public init() {}

    public static let v1 = SizeLimits()

    /// The groups endpoint's (section 4): a JOIN's header holds up to 32 topics of 128 bytes and
    /// 1000 `holding` items, so headers there may reach 64 KiB.
    public static let groups: SizeLimits = {
        var limits = SizeLimits()
        limits.header = 64 * 1024
        return limits
    }()
}

/// One protocol message: the frames after any routing frame a ROUTER adds (and after the topic
/// frame on the fan-out).
///
/// Frames: `[signature+version][command][header][parent][metadata][content]([signature])`.
/// JSON frames are kept as raw bytes; typed access goes through `decodeHeader`.
public struct Envelope: Sendable, Hashable {
    /// `S`,`W`,`B`: the first three bytes of frame 0; major and minor version follow.
    public static let signature: [UInt8] = [0x53, 0x57, 0x42]
    public static let emptyObject = Data("{}".utf8)

    public var version: ProtocolVersion
    public var command: Command
    public var header: Data
    public var parent: Data
    public var metadata: Data
    public var content: Data
    /// Reserved in v1: carried, never interpreted.
    public var messageSignature: Data?

    public init(
        command: Command, header: Data, parent: Data = Data("{}".utf8), metadata: Data = Data("{}".utf8),
        content: Data = Data("{}".utf8), version: ProtocolVersion = .current
    ) {
        self.version = version
        self.command = command
        self.header = header
        self.parent = parent
        self.metadata = metadata
        self.content = content
    }

    /// Builds an envelope whose header is `header` encoded as JSON.
    public init<H: Encodable>(
        command: Command, header: H, content: Data = Data("{}".utf8), parent: Data = Data("{}".utf8),
        metadata: Data = Data("{}".utf8)
    ) throws {
        self.init(command: command, header: try WireJSON.encode(header), parent: parent, metadata: metadata, content: content)
    }

    public static func versionFrame(_ version: ProtocolVersion = .current) -> Data {
        Data(signature + [version.major, version.minor])
    }

    /// The frames to send.
    public func frames() -> [Data] {
        var frames = [
            Envelope.versionFrame(version), Data(command.rawValue.utf8), header, parent, metadata, content,
        ]
        if let messageSignature { frames.append(messageSignature) }
        return frames
    }

    /// Parses and checks frames.
    ///
    /// Checks, in this order (the first failure is the one reported): frame count, signature,
    /// major version, minimum version, sizes, command word, that the four JSON frames parse as
    /// JSON objects (content may be any JSON value). Header fields are the command's business.
    public static func decode<Frames: Collection<Data>>(
        _ frames: Frames,
        minimumVersion: ProtocolVersion = .current,
        limits: SizeLimits = .v1
    ) throws(ProtocolError) -> Envelope {
        try parse(frames, minimumVersion: minimumVersion, limits: limits).envelope
    }

    /// Section 2's first checks, of frame 0: the signature, the major version, the minimum
    /// version. Returns the version.
    static func checkVersion(_ first: Data, minimumVersion: ProtocolVersion) throws(ProtocolError) -> ProtocolVersion {
        guard first.count == 5, first.starts(with: signature) else {
            throw ProtocolError(.badSignature, "frame 0 must be the 5 bytes 'SWB' + major + minor, got \(first.count) bytes")
        }
        let version = ProtocolVersion(major: first[first.startIndex + 3], minor: first[first.startIndex + 4])
        guard version.major == ProtocolVersion.current.major else {
            throw ProtocolError(
                .unsupportedVersion, "protocol version \(version) is not supported; this receiver speaks \(ProtocolVersion.current.major).x"
            )
        }
        guard version >= minimumVersion else {
            throw ProtocolError(.versionBelowMinimum, "protocol version \(version) is below the minimum \(minimumVersion)")
        }
        return version
    }

    /// Every check of `decode` up to (not including) the JSON frames.
    static func checkFrames<Frames: RandomAccessCollection<Data>>(
        _ frames: Frames, minimumVersion: ProtocolVersion, limits: SizeLimits
    ) throws(ProtocolError) -> Envelope where Frames.Index == Int {
        guard let first = frames.first else { throw ProtocolError(.malformed, "empty message: no frames") }
        let start = frames.startIndex
        func frame(_ offset: Int) -> Data { frames[start + offset] }
        let version = try checkVersion(first, minimumVersion: minimumVersion)
        guard frames.count == 6 || frames.count == 7 else {
            throw ProtocolError(.malformed, "a message has 6 frames (7 with a signature), got \(frames.count)")
        }
        var total = 0
        for data in frames { total += data.count }
        guard total <= limits.message else {
            throw ProtocolError(.tooLarge, "message is \(total) bytes; the limit is \(limits.message)")
        }
        func bound(_ offset: Int, _ name: String, _ limit: Int) throws(ProtocolError) {
            let size = frame(offset).count
            guard size <= limit else { throw ProtocolError(.tooLarge, "\(name) frame is \(size) bytes; the limit is \(limit)") }
        }
        try bound(2, "header", limits.header)
        try bound(3, "parent", limits.parent)
        try bound(4, "metadata", limits.metadata)
        try bound(5, "content", limits.content)
        if frames.count == 7 { try bound(6, "signature", limits.signature) }
        let word = String(decoding: frame(1), as: UTF8.self)
        guard frame(1).count <= 16, let command = Command(rawValue: word) else {
            throw ProtocolError(.unknownCommand, "unknown command '\(word.prefix(16))'")
        }
        var envelope = Envelope(
            command: command, header: frame(2), parent: frame(3), metadata: frame(4), content: frame(5),
            version: version)
        if frames.count == 7 { envelope.messageSignature = frame(6) }
        return envelope
    }

    /// The command word of a message that may not be valid, for ERROR's `command` field: frame
    /// 1 when frame 0 starts with `SWB` and frame 1 is 1–16 printable ASCII bytes, even if the
    /// word is no command this receiver knows (section 6: "when it could be read").
    public static func readableCommand<Frames: Collection<Data>>(_ frames: Frames) -> String? {
        guard frames.count >= 2, let first = frames.first, first.starts(with: signature) else { return nil }
        let word = frames[frames.index(after: frames.startIndex)]
        guard (1...16).contains(word.count), word.allSatisfy({ (0x21...0x7E).contains($0) }) else { return nil }
        return String(decoding: word, as: UTF8.self)
    }

    /// Decodes the header as `H`, reporting a missing or mistyped field by name.
    public func decodeHeader<H: Decodable>(_ type: H.Type) throws(ProtocolError) -> H {
        try WireJSON.decode(type, from: header, frame: "header", code: .invalidHeader)
    }
}
