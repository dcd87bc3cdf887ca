// What `switchboard-eto` publishes through its outbox (protocol/README.md section 16.2, schemas
// `eto.participant.created.v1.json`, `eto.response.recorded.v1.json`, `eto.response.voided.v1.json`),
// each under the ordering key of the check-in it is about.

public import Foundation
public import SwitchboardBus
public import SwitchboardProtocol

/// `eto.participant.created/1`: a walk-in's participant exists in ETO (made or found). Personal
/// data is allowed here: it is an event, read by whoever may read check-ins.
public struct ETOParticipantCreated: Codable, Sendable, Hashable {
    public static let type = "eto.participant.created"
    public static let schema = "eto.participant.created/1"

    /// The check-in's event id.
    public var eventID: String
    public var participantID: Int
    public var siteID: Int
    public var programID: Int
    public var firstName: String
    public var lastName: String
    public var dateOfBirth: String
    public var gender: String?
    /// Whether this delivery added the participant (false: it was found, made by an earlier
    /// delivery, another walk-in of the same person, or someone in ETO).
    public var created: Bool

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", participantID = "participant_id", siteID = "site_id", programID = "program_id",
            firstName = "first_name", lastName = "last_name", dateOfBirth = "date_of_birth", gender, created
    }

    public init(
        eventID: String, participantID: Int, siteID: Int, programID: Int, firstName: String, lastName: String, dateOfBirth: String,
        gender: String?, created: Bool
    ) {
        self.eventID = eventID
        self.participantID = participantID
        self.siteID = siteID
        self.programID = programID
        self.firstName = firstName
        self.lastName = lastName
        self.dateOfBirth = dateOfBirth
        self.gender = gender
        self.created = created
    }
}

/// `eto.response.recorded/1`: a check-in's TouchPoint response exists. Ids only.
public struct ETOResponseRecorded: Codable, Sendable, Hashable {
    public static let type = "eto.response.recorded"
    public static let schema = "eto.response.recorded/1"

    /// The check-in's event id.
    public var eventID: String
    public var busSeq: Int64?
    public var siteID: Int
    public var programID: Int
    public var participantID: Int
    public var touchPointID: Int
    public var responseID: Int64
    /// Whether this delivery added the response (false: an earlier delivery had).
    public var created: Bool

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", busSeq = "bus_seq", siteID = "site_id", programID = "program_id", participantID = "participant_id",
            touchPointID = "touchpoint_id", responseID = "response_id", created
    }

    public init(
        eventID: String, busSeq: Int64?, siteID: Int, programID: Int, participantID: Int, touchPointID: Int, responseID: Int64,
        created: Bool
    ) {
        self.eventID = eventID
        self.busSeq = busSeq
        self.siteID = siteID
        self.programID = programID
        self.participantID = participantID
        self.touchPointID = touchPointID
        self.responseID = responseID
        self.created = created
    }
}

/// `eto.response.voided/1`: a void is applied. Ids only (the reason stays in the void).
public struct ETOResponseVoided: Codable, Sendable, Hashable {
    public static let type = "eto.response.voided"
    public static let schema = "eto.response.voided/1"

    public enum Action: String, Codable, Sendable {
        /// The response was deleted from ETO.
        case deleted
        /// The response was marked void in ETO (not done by this worker; kept for other writers).
        case marked
        /// No response existed: the check-in will not be recorded when it comes.
        case neverRecorded = "never-recorded"
    }

    /// The void's event id.
    public var eventID: String
    public var checkInEventID: String
    public var busSeq: Int64?
    public var responseID: Int64?
    public var action: Action

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", checkInEventID = "checkin_event_id", busSeq = "bus_seq", responseID = "response_id", action
    }

    public init(eventID: String, checkInEventID: String, busSeq: Int64?, responseID: Int64?, action: Action) {
        self.eventID = eventID
        self.checkInEventID = checkInEventID
        self.busSeq = busSeq
        self.responseID = responseID
        self.action = action
    }
}

extension ETOResponseRecorded: WireJSONWritable {
    /// What `WireJSON.encode` writes, keys sorted, without a JSONEncoder: one is published for
    /// every check-in recorded.
    public func wireJSON() -> Data {
        var writer = JSONWriter(capacity: 192)
        writer.raw("{")
        if let busSeq {
            writer.key("bus_seq")
            writer.integer(busSeq)
        }
        writer.key("created")
        writer.bool(created)
        writer.key("event_id")
        writer.string(eventID)
        writer.key("participant_id")
        writer.integer(Int64(participantID))
        writer.key("program_id")
        writer.integer(Int64(programID))
        writer.key("response_id")
        writer.integer(responseID)
        writer.key("site_id")
        writer.integer(Int64(siteID))
        writer.key("touchpoint_id")
        writer.integer(Int64(touchPointID))
        writer.raw("}")
        return writer.data
    }
}

/// An event `switchboard-eto` hands its outbox.
public struct ETOPublication: Sendable {
    public var type: String
    public var schema: String
    public var content: Data
    public var key: String?

    public init(_ content: ETOParticipantCreated, key: String?) throws {
        self.init(type: ETOParticipantCreated.type, schema: ETOParticipantCreated.schema, content: try WireJSON.encode(content), key: key)
    }

    public init(_ content: ETOResponseRecorded, key: String?) throws {
        self.init(type: ETOResponseRecorded.type, schema: ETOResponseRecorded.schema, content: content.wireJSON(), key: key)
    }

    public init(_ content: ETOResponseVoided, key: String?) throws {
        self.init(type: ETOResponseVoided.type, schema: ETOResponseVoided.schema, content: try WireJSON.encode(content), key: key)
    }

    public init(type: String, schema: String, content: Data, key: String?) {
        self.type = type
        self.schema = schema
        self.content = content
        self.key = key
    }

    /// As the outbox takes it.
    public var outboxEvent: Outbox.NewEvent { Outbox.NewEvent(type: type, schema: schema, content: content, key: key) }
}
