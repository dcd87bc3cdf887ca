/// Why a message was refused. The code is what goes on the wire (`protocol/README.md`,
/// "Error codes"); the message is for people and names what was wrong.
public struct ProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The error codes of protocol v1. Raw values are the wire strings.
    public enum Code: String, Sendable, Hashable, CaseIterable, Codable {
        /// Frame 0 is not the `SWB` signature: not our protocol.
        case badSignature = "bad-signature"
        /// The major version is not one this receiver speaks.
        case unsupportedVersion = "unsupported-version"
        /// The version is below the receiver's configured minimum (downgrade refused).
        case versionBelowMinimum = "version-below-minimum"
        /// Wrong number of frames, or a frame that must not be empty is empty.
        case malformed = "malformed"
        /// A frame or the whole message exceeds the size limits.
        case tooLarge = "too-large"
        /// The command frame names no command of this version, or one not valid on this endpoint.
        case unknownCommand = "unknown-command"
        /// A JSON frame does not parse, or is not an object where an object is required.
        case invalidJSON = "invalid-json"
        /// A header field is missing, of the wrong type or out of range.
        case invalidHeader = "invalid-header"
        /// The event type is not a valid topic name, or uses a reserved prefix.
        case invalidTopic = "invalid-topic"
        /// The content does not satisfy the JSON Schema its `schema` field names.
        case schemaViolation = "schema-violation"
        /// `producer_seq` was already used by a different `event_id` (NACK, not retryable).
        case conflict = "conflict"
        /// The broker cannot make events durable right now (NACK, retryable).
        case unavailable = "unavailable"
        /// The broker is shutting down (NACK, retryable).
        case shuttingDown = "shutting-down"
        /// The sender's principal may not do this.
        case forbidden = "forbidden"
        /// A bug or unexpected failure in the receiver.
        case internalError = "internal"
        /// Consumer groups (section 15): the JOIN's topics differ from the existing group's.
        case groupConflict = "group-conflict"
        /// A settle or LEAVE from a connection that has not joined that group (or was expired).
        case notMember = "not-member"
        /// A settle naming a delivery this member does not hold under that attempt.
        case notHeld = "not-held"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
