public import Foundation

// The bodies of the service plane (protocol/README.md, section 12): a Majordomo request or reply
// body is one protocol envelope, REQUEST or REPLY, six frames like every other message.

/// The header of a REQUEST.
public struct RequestHeader: Codable, Sendable, Hashable {
    /// UUIDv7 chosen by the client; kept across retries of the same request.
    public var requestID: String
    /// What to do, a dotted lower-case name (`programs.list`, `token.get`).
    public var operation: String
    /// How long the client waits for the final reply, from when it sent the request.
    public var timeoutMilliseconds: Int64
    /// The client may send it again (on a fresh socket) if no reply comes: the operation must
    /// be safe to run twice. Absent means false.
    public var idempotent: Bool?

    enum CodingKeys: String, CodingKey {
        case requestID = "request_id", operation, timeoutMilliseconds = "timeout_ms", idempotent
    }

    public static let timeoutRange: ClosedRange<Int64> = 1...3_600_000

    public init(requestID: String = UUIDv7.string(), operation: String, timeoutMilliseconds: Int64, idempotent: Bool? = nil) {
        self.requestID = requestID
        self.operation = operation
        self.timeoutMilliseconds = timeoutMilliseconds
        self.idempotent = idempotent
    }

    /// Checks every field; the error names the field.
    public func validate() throws(ProtocolError) {
        guard UUIDv7.isValid(requestID) else {
            throw ProtocolError(.invalidHeader, "header: field 'request_id' must be a UUIDv7, got '\(requestID.prefix(40))'")
        }
        guard Operation.isValid(operation) else {
            throw ProtocolError(
                .invalidHeader,
                "header: field 'operation' must be 1–8 dot-separated lower-case segments (a-z 0-9 _ -), at most 128 bytes, got '\(operation.prefix(40))'"
            )
        }
        guard Self.timeoutRange.contains(timeoutMilliseconds) else {
            throw ProtocolError(
                .invalidHeader, "header: field 'timeout_ms' must be 1–3600000, got \(timeoutMilliseconds)")
        }
    }
}

extension RequestHeader {
    /// The header as every client writes it, read from its parsed fields: a valid `request_id`
    /// and `operation` (so plain ASCII, spelled as `JSONDecoder` would read them), an integer
    /// `timeout_ms`, and `idempotent` a boolean or absent. Anything else is nil, and the frame
    /// is read by `JSONDecoder` as before, with the same errors.
    init?(plain fields: [String: JSONValue]) {
        guard case .string(let requestID)? = fields["request_id"], UUIDv7.isValid(requestID),
            case .string(let operation)? = fields["operation"], Operation.isValid(operation),
            case .integer(let timeout)? = fields["timeout_ms"]
        else { return nil }
        var idempotent: Bool?
        switch fields["idempotent"] {
        case nil: idempotent = nil
        case .bool(let value)?: idempotent = value
        default: return nil
        }
        self.init(requestID: requestID, operation: operation, timeoutMilliseconds: timeout, idempotent: idempotent)
    }
}

extension JSONWriter {
    /// Whether `text` is written the same by `string` and by `JSONEncoder`: printable ASCII with
    /// nothing to escape (no quote, no backslash).
    static func isPlain(_ text: String) -> Bool {
        text.utf8.allSatisfy { (0x20...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
}

extension RequestHeader {
    /// The bytes `WireJSON.encode` gives (sorted keys, nil left out), written without
    /// `JSONEncoder` when every string is plain; nil otherwise (then `JSONEncoder` writes it).
    func plainJSON() -> Data? {
        guard JSONWriter.isPlain(requestID), JSONWriter.isPlain(operation) else { return nil }
        var writer = JSONWriter(capacity: 128)
        writer.raw("{")
        if let idempotent {
            writer.key("idempotent")
            writer.bool(idempotent)
        }
        writer.key("operation")
        writer.string(operation)
        writer.key("request_id")
        writer.string(requestID)
        writer.key("timeout_ms")
        writer.integer(timeoutMilliseconds)
        writer.raw("}")
        return writer.data
    }
}

extension ReplyHeader {
    /// As `RequestHeader.plainJSON()`.
    func plainJSON() -> Data? {
        var writer = JSONWriter(capacity: 128)
        writer.raw("{")
        if let error {
            guard JSONWriter.isPlain(error.code), JSONWriter.isPlain(error.message) else { return nil }
            writer.key("error")
            writer.raw("{")
            writer.key("code")
            writer.string(error.code)
            writer.key("message")
            writer.string(error.message)
            if let retryable = error.retryable {
                writer.key("retryable")
                writer.bool(retryable)
            }
            writer.raw("}")
        }
        if let requestID {
            guard JSONWriter.isPlain(requestID) else { return nil }
            writer.key("request_id")
            writer.string(requestID)
        }
        writer.key("status")
        writer.integer(Int64(status))
        writer.raw("}")
        return writer.data
    }
}

extension ReplyHeader {
    /// A successful reply's header read from its parsed fields: a valid `request_id` (or none),
    /// an integer `status`, no `error`. Anything else is nil, for `JSONDecoder` as before.
    init?(plain fields: [String: JSONValue]) {
        guard case .integer(let status)? = fields["status"], let status = Int(exactly: status), fields["error"] == nil else {
            return nil
        }
        switch fields["request_id"] {
        case nil: self.init(requestID: nil, status: status)
        case .string(let requestID)? where UUIDv7.isValid(requestID): self.init(requestID: requestID, status: status)
        default: return nil
        }
    }
}

/// Operation names: like event types, but one segment is enough (`ping`).
public enum Operation {
    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 128 else { return false }
        var segments = 0
        var start = true
        for byte in bytes {
            if start {
                guard (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) else { return false }
                start = false
                segments += 1
            } else if byte == UInt8(ascii: ".") {
                start = true
            } else {
                let ok =
                    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
                guard ok else { return false }
            }
        }
        return !start && segments <= 8
    }
}

/// The header of a REPLY (PARTIAL or FINAL at the Majordomo level).
public struct ReplyHeader: Codable, Sendable, Hashable {
    /// The REQUEST's `request_id` (absent only when the request could not be read at all).
    public var requestID: String?
    /// 200 for success; 4xx for a request the service refuses; 5xx for a failure of the service
    /// or the broker (section 12, "Status codes").
    public var status: Int
    /// Present exactly when `status` is not 2xx.
    public var error: ServiceFailure?

    enum CodingKeys: String, CodingKey {
        case requestID = "request_id", status, error
    }

    public init(requestID: String?, status: Int = 200, error: ServiceFailure? = nil) {
        self.requestID = requestID
        self.status = status
        self.error = error
    }

    public func validate() throws(ProtocolError) {
        if let requestID, !UUIDv7.isValid(requestID) {
            throw ProtocolError(.invalidHeader, "header: field 'request_id' must be a UUIDv7, got '\(requestID.prefix(40))'")
        }
        guard (100...599).contains(status) else {
            throw ProtocolError(.invalidHeader, "header: field 'status' must be 100–599, got \(status)")
        }
        let success = (200...299).contains(status)
        if success && error != nil {
            throw ProtocolError(.invalidHeader, "header: field 'error' must be absent when 'status' is \(status)")
        }
        if !success && error == nil {
            throw ProtocolError(.invalidHeader, "header: field 'error' is required when 'status' is \(status)")
        }
    }
}

/// What went wrong, in a REPLY whose status is not 2xx.
public struct ServiceFailure: Codable, Sendable, Hashable, CustomStringConvertible {
    /// A code from section 12's table (services may add their own, lower-case with `-`).
    public var code: String
    /// For people: names what was wrong; never carries secrets.
    public var message: String
    /// The client may send the same request again later.
    public var retryable: Bool?

    public init(code: String, message: String, retryable: Bool? = nil) {
        self.code = code
        self.message = message
        self.retryable = retryable
    }

    public var description: String { "\(code): \(message)" }
}

/// The status codes and error codes of the service plane.
public enum ServiceStatus {
    public static let ok = 200
    /// The body is not a valid REQUEST (`bad-request`).
    public static let badRequest = 400
    /// The caller may not do this (`forbidden`).
    public static let forbidden = 403
    /// The service does not know the operation (`unknown-operation`) or the thing asked for (`not-found`).
    public static let notFound = 404
    /// The request conflicts with the current state (`conflict`).
    public static let conflict = 409
    /// The content is not what the operation takes (`invalid-content`).
    public static let unprocessable = 422
    /// The service failed (`internal`).
    public static let internalError = 500
    /// A back end the service depends on failed (`upstream-failed`); the broker lost the worker (`worker-lost`).
    public static let badGateway = 502
    /// No worker for the service (`no-worker`), its queue is full (`queue-full`), or the service is
    /// shutting down (`unavailable`).
    public static let unavailable = 503
    /// The request's time ran out before it was done (`deadline-exceeded`).
    public static let gatewayTimeout = 504
}

/// Reading and writing the REQUEST and REPLY envelopes that make up Majordomo bodies.
public enum ServiceBody {
    /// Reads a REQUEST body; the error says what is wrong.
    ///
    /// A plain header (what every client writes) is read from the fields the envelope's check
    /// parsed already; any other goes to `JSONDecoder`, whose errors name the field.
    public static func request(_ body: [Data]) throws(ProtocolError) -> (RequestHeader, Envelope) {
        // The content is checked, not built: the reader takes it as bytes.
        let envelope = try Envelope.check(body)
        var reference: String?
        let fields = try envelope.headerFields(reference: &reference)
        guard envelope.command == .request else {
            throw ProtocolError(.unknownCommand, "a service request body must be a REQUEST, got \(envelope.command.rawValue)")
        }
        let header: RequestHeader
        if let plain = RequestHeader(plain: fields) {
            header = plain
        } else {
            header = try envelope.decodeHeader(RequestHeader.self)
        }
        try header.validate()
        return (header, envelope)
    }

    /// Reads a REPLY body.
    public static func reply(_ body: [Data]) throws(ProtocolError) -> (ReplyHeader, Envelope) {
        // The content is checked, not built: the reader takes it as bytes.
        let envelope = try Envelope.check(body)
        var reference: String?
        let fields = try envelope.headerFields(reference: &reference)
        guard envelope.command == .reply else {
            throw ProtocolError(.unknownCommand, "a service reply body must be a REPLY, got \(envelope.command.rawValue)")
        }
        let header: ReplyHeader
        if let plain = ReplyHeader(plain: fields) {
            header = plain
        } else {
            header = try envelope.decodeHeader(ReplyHeader.self)
        }
        try header.validate()
        return (header, envelope)
    }

    /// Builds a REQUEST body.
    public static func requestBody(_ header: RequestHeader, content: Data, metadata: Data = Data("{}".utf8)) throws -> [Data] {
        let json = try header.plainJSON() ?? WireJSON.encode(header)
        return Envelope(command: .request, header: json, metadata: metadata, content: content).frames()
    }

    /// Builds a REPLY body; `parent` is the REQUEST's header frame.
    public static func replyBody(_ header: ReplyHeader, content: Data = Data("{}".utf8), parent: Data = Data("{}".utf8)) -> [Data] {
        // Encoding these two plain structs cannot fail.
        guard let json = header.plainJSON() ?? (try? WireJSON.encode(header)) else { return [] }
        return Envelope(command: .reply, header: json, parent: parent, content: content).frames()
    }

    /// The operation of a body, if it is a readable REQUEST (for the broker's role checks).
    public static func peekOperation(_ body: [Data]) -> String? {
        guard body.count >= 6, let envelope = try? Envelope.decode(body), envelope.command == .request,
            let header = try? envelope.decodeHeader(RequestHeader.self), Operation.isValid(header.operation)
        else { return nil }
        return header.operation
    }

    /// A string field at the top of a REQUEST body's content (the broker's check of which back
    /// end a `token.get` names); nil when the body is no readable REQUEST or the field is absent
    /// or not a string. The parser is the one every receiver uses (`JSONValue`), so what the
    /// broker checks is what `auth` reads.
    public static func peekContentString(_ body: [Data], field: String) -> String? {
        guard body.count >= 6, let envelope = try? Envelope.decode(body), envelope.command == .request,
            case .string(let value)? = JSONValue.parse(envelope.content)?.object?[field]
        else { return nil }
        return value
    }

    /// The status of a REPLY body, read from its header frame alone (for the broker's metrics);
    /// nil when the body is no readable REPLY.
    public static func peekStatus(_ body: [Data]) -> Int? {
        guard body.count >= 6, body[1] == Data("REPLY".utf8), case .integer(let status)? = JSONValue.parse(body[2])?.object?["status"]
        else { return nil }
        return Int(status)
    }

    /// The request id of a body that may not be a valid REQUEST (for error replies), and its
    /// header frame as parent.
    public static func peekRequest(_ body: [Data]) -> (requestID: String?, parent: Data) {
        guard body.count >= 6, let envelope = try? Envelope.decode(body), envelope.command == .request else {
            return (nil, Data("{}".utf8))
        }
        let header = try? envelope.decodeHeader(RequestHeader.self)
        let id = header.flatMap { UUIDv7.isValid($0.requestID) ? $0.requestID : nil }
        return (id, envelope.header)
    }
}
