/// An input the group machine refused. A refusal changes nothing but the member's last sign of
/// life; the broker answers the member with an ERROR carrying `code` and `message`.
struct GroupRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    /// Wire codes, kebab-case like the protocol's other error codes. A struct, not an enum, so
    /// codes can be added without breaking callers that switch on them.
    struct Code: Hashable, Sendable, CustomStringConvertible {
        let rawValue: String

        /// The member has not joined (or was expired, or left).
        static let notMember = Code(rawValue: "not-member")
        /// The event is not in flight to this member under that attempt: unknown, settled, in
        /// flight to another member, or redelivered since (a stale attempt).
        static let notHeld = Code(rawValue: "not-held")
        /// A join asked for a credit outside 1…maxCredit.
        static let invalidCredit = Code(rawValue: "invalid-credit")

        var description: String { rawValue }
    }

    let code: Code
    /// Names the bus_seq, member and attempt concerned.
    let message: String

    var description: String { "\(code): \(message)" }
}
