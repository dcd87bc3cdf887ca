// What staff do at the desk, as events in the kiosk's outbox: a check-in of a known person, a
// walk-in (a new person, checked in at once), a void. Each is saved in the outbox (kept through
// any outage; the delivery sends it when the broker answers) and noted in the desk's journey
// table. Problems name the form's field and never repeat what was typed.

public import Foundation
public import SwitchboardBus
import SwitchboardKiosk
import SwitchboardProtocol

/// A desk request that cannot be done, said for staff: the field and what is wrong with it.
public struct DeskProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// The form field at fault, or nil.
    public var field: String?
    public var message: String
    public var description: String { field.map { "\($0): \(message)" } ?? message }

    public init(field: String?, _ message: String) {
        self.field = field
        self.message = message
    }
}

public struct DeskActions: Sendable {
    public let outbox: Outbox
    public let store: DeskStore
    public let kioskID: String
    public let siteID: Int64
    public let programID: Int64

    public init(outbox: Outbox, store: DeskStore, kioskID: String, siteID: Int64, programID: Int64) {
        self.outbox = outbox
        self.store = store
        self.kioskID = kioskID
        self.siteID = siteID
        self.programID = programID
    }

    /// The local calendar day of `date`, `YYYY-MM-DD`: what "today" means at a shelter's door.
    public static func day(_ date: Date = Date()) -> String {
        let parts = Calendar.current.dateComponents(in: TimeZone.current, from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }

    static func optional(_ text: String?) -> String? {
        guard let text = text?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty else { return nil }
        return text
    }

    /// The form's field names for the event's: problems name what staff see.
    static let fieldNames = [
        "participant.first_name": "first name", "participant.last_name": "last name", "participant.date_of_birth": "date of birth",
        "participant.gender": "gender", "bed": "bed", "notes": "notes", "participant.eto_participant_id": "participant",
        "participant": "participant", "reason": "reason",
    ]

    static func problem(_ error: ProtocolError) -> DeskProblem {
        // "content: field 'bed' must be …": the field, in staff's words, and the rule.
        let text = error.message
        if let start = text.range(of: "field '"), let end = text[start.upperBound...].firstIndex(of: "'") {
            let field = String(text[start.upperBound..<end])
            let rule = text[text.index(after: end)...].trimmingCharacters(in: .whitespaces)
            return DeskProblem(field: fieldNames[field] ?? field, rule)
        }
        return DeskProblem(field: nil, text)
    }

    /// Checks a known person in: `participant` from the roster or the live search.
    public func checkIn(_ participant: RosterPerson, bed: String?, notes: String?, staffID: String) async throws -> JourneyRow {
        let person = CheckIn.Participant(
            etoParticipantID: participant.participantID, firstName: Self.optional(participant.firstName),
            lastName: Self.optional(participant.lastName), dateOfBirth: Self.optional(participant.dateOfBirth))
        return try await record(person, bed: bed, notes: notes, staffID: staffID)
    }

    /// A walk-in: a new person (first, last and date of birth required), checked in at once.
    public func walkIn(
        firstName: String?, lastName: String?, dateOfBirth: String?, gender: String?, bed: String?, notes: String?, staffID: String
    ) async throws -> JourneyRow {
        guard let first = Self.optional(firstName) else { throw DeskProblem(field: "first name", "is required") }
        guard let last = Self.optional(lastName) else { throw DeskProblem(field: "last name", "is required") }
        guard let dob = Self.optional(dateOfBirth) else { throw DeskProblem(field: "date of birth", "is required") }
        let person = CheckIn.Participant(
            firstName: first, lastName: last, dateOfBirth: dob, isNew: true, gender: Self.optional(gender))
        return try await record(person, bed: bed, notes: notes, staffID: staffID)
    }

    func record(_ person: CheckIn.Participant, bed: String?, notes: String?, staffID: String) async throws -> JourneyRow {
        let checkIn = CheckIn(
            participant: person, siteID: siteID, programID: programID, kioskID: kioskID, checkedInAt: Timestamp.now(),
            notes: Self.optional(notes), bed: Self.optional(bed), recordedBy: staffID)
        do {
            try checkIn.validate()
        } catch {
            throw Self.problem(error)
        }
        let entry = try await outbox.enqueue([.checkIn(checkIn)])[0]
        let who = [person.firstName, person.lastName].compactMap { $0 }.joined(separator: " ")
        let row = JourneyRow(
            eventID: entry.eventID, day: Self.day(), recordedAt: checkIn.checkedInAt,
            who: who.isEmpty ? "participant \(person.etoParticipantID ?? 0)" : who, isWalkIn: person.isWalkIn, bed: checkIn.bed,
            key: CheckInForm.orderingKey(checkIn), siteID: siteID, programID: programID)
        try await store.record(row)
        return row
    }

    /// Voids today's check-in `eventID` made at this desk: `checkin.voided` under its key.
    public func void(_ eventID: String, reason: String?, staffID: String) async throws -> JourneyRow {
        guard let row = try await store.checkIn(eventID) else {
            throw DeskProblem(field: nil, "that check-in was not made at this desk")
        }
        guard row.day == Self.day() else { throw DeskProblem(field: nil, "only today's check-ins can be voided") }
        guard row.voidEventID == nil else { throw DeskProblem(field: nil, "that check-in is voided already") }
        guard let reason = Self.optional(reason) else { throw DeskProblem(field: "reason", "is required") }
        let void = CheckInVoid(
            checkInEventID: eventID, siteID: row.siteID, programID: row.programID, kioskID: kioskID, voidedAt: Timestamp.now(),
            reason: reason, recordedBy: staffID)
        do {
            try void.validate()
        } catch {
            throw Self.problem(error)
        }
        let event = Outbox.NewEvent(type: CheckInVoid.type, schema: CheckInVoid.schema, content: try WireJSON.encode(void), key: row.key)
        // The outbox first: a void noted but not saved would show as voided and never be sent.
        // Two voids at once are both saved only if both pass the check above before either is
        // noted; the second is then refused here, after its event is saved, which the workers
        // treat as a repeat (a void of a voided check-in changes nothing).
        let entry = try await outbox.enqueue([event])[0]
        guard try await store.markVoid(checkIn: eventID, voidEventID: entry.eventID) else {
            throw DeskProblem(field: nil, "that check-in is voided already")
        }
        var voided = row
        voided.voidEventID = entry.eventID
        return voided
    }
}
