public import Foundation
import SwitchboardProtocol

/// The protocol test vectors in `protocol/vectors/`, as files the tests load.
public enum Vectors {
    /// The package's root directory, found from this source file's path.
    public static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }()

    public static var directory: URL { packageRoot.appendingPathComponent("protocol/vectors") }

    /// One envelope vector: frames as sent after the routing frame, and the expected reply.
    public struct Envelope: Sendable {
        public var name: String
        public var description: String
        public var frames: [Data]
        /// `ACK`, `HEAD` or `ERROR`.
        public var reply: String
        public var code: String?
        /// A word the error message must contain (usually the field name).
        public var mentions: String?
        /// The receiver's minimum version for this vector, if not the default.
        public var minimum: String?
        /// The `command` field the ERROR must carry, when the vector says.
        public var command: String?
    }

    /// One date-time of `protocol/vectors/timestamp`: accepted ones carry their instant.
    public struct TimestampCase: Sendable, CustomStringConvertible {
        public var text: String
        public var why: String
        /// Milliseconds since the epoch (fraction past the third digit dropped); nil when refused.
        public var unixMilliseconds: Int64?
        public var description: String { "\(why): '\(text)'" }
    }

    /// The accepted (`accepted.json`) or refused (`refused.json`) date-times.
    public static func timestamps(accepted: Bool) throws -> [TimestampCase] {
        let url = directory.appendingPathComponent("timestamp/\(accepted ? "accepted" : "refused").json")
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
        return (object["cases"] as? [[String: Any]] ?? []).map { item in
            TimestampCase(
                text: item["text"] as? String ?? "", why: item["why"] as? String ?? "",
                unixMilliseconds: (item["unix_ms"] as? NSNumber)?.int64Value)
        }
    }

    /// One content vector for a payload schema.
    public struct Content: Sendable {
        public var name: String
        public var description: String
        public var content: Data
        public var valid: Bool
        public var field: String?
    }

    public static func envelopes() throws -> [Envelope] {
        try files(in: "envelope").map { url in
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
            let frames = try (object["frames"] as? [[String: Any]] ?? []).map(frame)
            let expect = object["expect"] as? [String: Any] ?? [:]
            return Envelope(
                name: url.deletingPathExtension().lastPathComponent,
                description: object["description"] as? String ?? "",
                frames: frames,
                reply: expect["reply"] as? String ?? "",
                code: expect["code"] as? String,
                mentions: expect["mentions"] as? String,
                minimum: expect["minimum"] as? String,
                command: expect["command"] as? String)
        }
    }

    public static func contents(schema: String) throws -> [Content] {
        try files(in: schema).map { url in
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
            let expect = object["expect"] as? [String: Any] ?? [:]
            return Content(
                name: url.deletingPathExtension().lastPathComponent,
                description: object["description"] as? String ?? "",
                content: try JSONSerialization.data(withJSONObject: object["content"] ?? [:], options: [.sortedKeys]),
                valid: expect["valid"] as? Bool ?? false,
                field: expect["field"] as? String)
        }
    }

    /// A Majordomo message and the broker's documented reaction (`protocol/vectors/majordomo`).
    public struct MajordomoCase: Sendable, CustomStringConvertible {
        public var name: String
        public var description: String
        /// `ready`: the sender registers as a worker of `echo` first; `other-worker`: another
        /// socket does.
        public var setup: String?
        public var frames: [Data]
        /// `dropped`, `disconnect` or `reply`.
        public var reaction: String
        public var answer: [Data]
    }

    public static func majordomo() throws -> [MajordomoCase] {
        try files(in: "majordomo").map { url in
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
            let expect = object["expect"] as? [String: Any] ?? [:]
            return MajordomoCase(
                name: url.deletingPathExtension().lastPathComponent,
                description: object["description"] as? String ?? "",
                setup: object["setup"] as? String,
                frames: try (object["frames"] as? [[String: Any]] ?? []).map(frame),
                reaction: expect["reaction"] as? String ?? "",
                answer: try (expect["frames"] as? [[String: Any]] ?? []).map(frame))
        }
    }

    /// A REQUEST or REPLY header and whether it is valid (`protocol/vectors/service`).
    public struct ServiceHeader: Sendable, CustomStringConvertible {
        public var name: String
        public var description: String
        public var kind: String
        public var header: Data
        public var valid: Bool
        public var field: String?
    }

    public static func serviceHeaders() throws -> [ServiceHeader] {
        try files(in: "service").map { url in
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
            let expect = object["expect"] as? [String: Any] ?? [:]
            return ServiceHeader(
                name: url.deletingPathExtension().lastPathComponent,
                description: object["description"] as? String ?? "",
                kind: object["kind"] as? String ?? "",
                header: try JSONSerialization.data(withJSONObject: object["header"] ?? [:], options: [.sortedKeys]),
                valid: expect["valid"] as? Bool ?? false,
                field: expect["field"] as? String)
        }
    }

    /// A `token.get` reply or an `auth.*` event content (`protocol/vectors/auth`).
    public struct AuthContent: Sendable, CustomStringConvertible {
        public var name: String
        public var description: String
        /// `auth.token.v1.json` or `auth.event.v1.json`.
        public var schema: String
        public var content: Data
        public var token: String?
        public var fingerprint: String?
        public var valid: Bool
        public var field: String?
        /// `schema` when JSON Schema itself refuses it, `semantic` for the rules beyond it.
        public var rule: String?
    }

    public static func auth() throws -> [AuthContent] {
        try files(in: "auth").map { url in
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
            let content = object["content"] as? [String: Any] ?? [:]
            let expect = object["expect"] as? [String: Any] ?? [:]
            return AuthContent(
                name: url.deletingPathExtension().lastPathComponent,
                description: object["description"] as? String ?? "",
                schema: object["schema"] as? String ?? "",
                content: try JSONSerialization.data(withJSONObject: content, options: [.sortedKeys]),
                token: content["token"] as? String,
                fingerprint: content["fingerprint"] as? String,
                valid: expect["valid"] as? Bool ?? false,
                field: expect["field"] as? String,
                rule: expect["rule"] as? String)
        }
    }

    /// A consumer-group header (`protocol/vectors/groups`, section 15): the command it belongs
    /// to, the header, and whether a receiver accepts it (for refused ones, the field the error
    /// names).
    public struct GroupHeader: Sendable, CustomStringConvertible {
        public var name: String
        public var description: String
        /// `JOIN`, `JOINED`, `DELIVER`, `ACK`, `NACK`, `TERM`, `PROGRESS` or `LEAVE`.
        public var command: String
        public var header: Data
        public var valid: Bool
        public var field: String?
    }

    /// The header vectors of `protocol/vectors/groups` (the files with a `command`; the
    /// `dlq-*` and `groups-changed-*` content vectors are for `check_vectors.py`).
    /// The header vectors of `vectors/groups` and `vectors/heartbeat` (HEARTBEAT, section 6).
    public static func groupHeaders() throws -> [GroupHeader] {
        try (files(in: "groups") + files(in: "heartbeat")).compactMap { url in
            // Read with the protocol's own JSON reader, so a header's `2.0` stays a float on
            // the way to the codec (JSONSerialization would write it back as `2`).
            guard case .object(let object)? = JSONValue.parse(try Data(contentsOf: url)) else {
                throw BadVector(description: "\(url.lastPathComponent) is not a JSON object")
            }
            guard case .string(let command)? = object["command"] else { return nil }
            guard case .object(let expect)? = object["expect"], case .bool(let valid)? = expect["valid"], let header = object["header"]
            else { throw BadVector(description: "\(url.lastPathComponent) needs a header and expect.valid") }
            var description = ""
            if case .string(let text)? = object["description"] { description = text }
            var field: String?
            if case .string(let text)? = expect["field"] { field = text }
            return GroupHeader(
                name: url.deletingPathExtension().lastPathComponent, description: description, command: command,
                header: header.compactData, valid: valid, field: field)
        }
    }

    private static func files(in folder: String) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(
            at: directory.appendingPathComponent(folder), includingPropertiesForKeys: nil
        ).filter { $0.pathExtension == "json" }.sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    struct BadVector: Error, CustomStringConvertible {
        var description: String
    }

    /// A frame is `{"text": …}` (UTF-8 bytes), `{"hex": …}`, or
    /// `{"repeat": c, "count": n, "prefix": p, "suffix": s}` for large frames.
    static func frame(_ spec: [String: Any]) throws -> Data {
        if let text = spec["text"] as? String { return Data(text.utf8) }
        if let hex = spec["hex"] as? String {
            var bytes: [UInt8] = []
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                guard let byte = UInt8(hex[index..<next], radix: 16) else { throw BadVector(description: "bad hex \(hex)") }
                bytes.append(byte)
                index = next
            }
            return Data(bytes)
        }
        if let unit = spec["repeat"] as? String, let count = spec["count"] as? Int {
            let prefix = spec["prefix"] as? String ?? ""
            let suffix = spec["suffix"] as? String ?? ""
            return Data((prefix + String(repeating: unit, count: count) + suffix).utf8)
        }
        throw BadVector(description: "a frame needs text, hex or repeat: \(spec)")
    }
}
