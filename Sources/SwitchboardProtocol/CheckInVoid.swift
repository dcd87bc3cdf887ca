/// The content of a `checkin.voided` event (schema `checkin.voided/1`,
/// `protocol/schemas/checkin.voided.v1.json`): staff took back a check-in recorded by mistake.
/// Published by the kiosk that recorded the check-in, under the check-in's ordering key, so a
/// group sees it after the check-in; workers still handle a void that reaches them first
/// (section 16).
public struct CheckInVoid: Codable, Sendable, Hashable {
    public static let type = "checkin.voided"
    public static let schema = "checkin.voided/1"
    public static let maximumReasonLength = 500

    /// The `event_id` of the `checkin.recorded` event taken back.
    public var checkInEventID: String
    /// The check-in's site and program (so a worker needs no other look-up to find its session).
    public var siteID: Int64
    public var programID: Int64
    /// The kiosk that voids it: the one that recorded the check-in.
    public var kioskID: String
    /// When staff voided it, RFC 3339.
    public var voidedAt: String
    /// Why, in the staff member's words (personal data: never logged, like `notes`).
    public var reason: String
    /// The desk account's id of the staff member who voided it.
    public var recordedBy: String?

    enum CodingKeys: String, CodingKey {
        case checkInEventID = "checkin_event_id", siteID = "site_id", programID = "program_id", kioskID = "kiosk_id",
            voidedAt = "voided_at", reason, recordedBy = "recorded_by"
    }

    public init(
        checkInEventID: String, siteID: Int64, programID: Int64, kioskID: String, voidedAt: String, reason: String,
        recordedBy: String? = nil
    ) {
        self.checkInEventID = checkInEventID
        self.siteID = siteID
        self.programID = programID
        self.kioskID = kioskID
        self.voidedAt = voidedAt
        self.reason = reason
        self.recordedBy = recordedBy
    }

    /// Checks every rule of the JSON Schema and those beyond it; the error names the field,
    /// never the reason's words.
    public func validate() throws(ProtocolError) {
        func fail(_ field: String, _ rule: String) -> ProtocolError {
            ProtocolError(.schemaViolation, "content: field '\(field)' \(rule)")
        }
        guard UUIDv7.isValid(checkInEventID) else { throw fail("checkin_event_id", "must be an event id (UUIDv7, lower case)") }
        guard siteID >= 1 else { throw fail("site_id", "must be a positive integer") }
        guard programID >= 1 else { throw fail("program_id", "must be a positive integer") }
        guard Producer.isValid(kioskID) else { throw fail("kiosk_id", "must be 1–64 characters of A–Z a–z 0–9 . _ : -") }
        guard Timestamp.parse(voidedAt) != nil else { throw fail("voided_at", "must be an RFC 3339 date-time") }
        guard !reason.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            throw fail("reason", "must not contain control characters")
        }
        guard !reason.allSatisfy(\.isWhitespace) else { throw fail("reason", "is required and must not be blank") }
        guard reason.unicodeScalars.count <= Self.maximumReasonLength else {
            throw fail("reason", "must be at most \(Self.maximumReasonLength) characters")
        }
        if let recordedBy, !Producer.isValid(recordedBy) {
            throw fail("recorded_by", "must be 1–64 characters of A–Z a–z 0–9 . _ : -")
        }
    }
}
