/// The request and reply contents of the `eto` service (protocol/README.md section 16.2,
/// `schemas/eto.service.v1.json`), shared by the worker that serves it and the programs that
/// call it (the kiosk's lookup).
public enum ETOServiceContent {
    public static let service = "eto"

    public struct Site: Codable, Sendable, Hashable {
        public var siteID: Int
        public var name: String
        enum CodingKeys: String, CodingKey { case siteID = "site_id", name }
        public init(siteID: Int, name: String) {
            self.siteID = siteID
            self.name = name
        }
    }

    public struct Program: Codable, Sendable, Hashable {
        public var programID: Int
        public var name: String
        enum CodingKeys: String, CodingKey { case programID = "program_id", name }
        public init(programID: Int, name: String) {
            self.programID = programID
            self.name = name
        }
    }

    public struct Participant: Codable, Sendable, Hashable {
        public var participantID: Int
        public var firstName: String
        public var lastName: String
        /// `YYYY-MM-DD`, when ETO has it.
        public var dateOfBirth: String?
        enum CodingKeys: String, CodingKey {
            case participantID = "participant_id", firstName = "first_name", lastName = "last_name", dateOfBirth = "date_of_birth"
        }
        public init(participantID: Int, firstName: String, lastName: String, dateOfBirth: String?) {
            self.participantID = participantID
            self.firstName = firstName
            self.lastName = lastName
            self.dateOfBirth = dateOfBirth
        }
    }

    /// `programs.list`.
    public struct SiteQuery: Codable, Sendable, Hashable {
        public var siteID: Int
        enum CodingKeys: String, CodingKey { case siteID = "site_id" }
        public init(siteID: Int) { self.siteID = siteID }
    }

    /// `participants.search`.
    public struct SearchQuery: Codable, Sendable, Hashable {
        public var siteID: Int
        public var programID: Int
        public var firstName: String
        public var lastName: String
        public var dateOfBirth: String?
        enum CodingKeys: String, CodingKey {
            case siteID = "site_id", programID = "program_id", firstName = "first_name", lastName = "last_name", dateOfBirth =
                "date_of_birth"
        }
        public init(siteID: Int, programID: Int, firstName: String, lastName: String, dateOfBirth: String? = nil) {
            self.siteID = siteID
            self.programID = programID
            self.firstName = firstName
            self.lastName = lastName
            self.dateOfBirth = dateOfBirth
        }
    }

    /// `participant.get`.
    public struct ParticipantQuery: Codable, Sendable, Hashable {
        public var siteID: Int
        public var participantID: Int
        enum CodingKeys: String, CodingKey { case siteID = "site_id", participantID = "participant_id" }
        public init(siteID: Int, participantID: Int) {
            self.siteID = siteID
            self.participantID = participantID
        }
    }

    /// `participants.list`: a page of a site's roster.
    public struct RosterQuery: Codable, Sendable, Hashable {
        public var siteID: Int
        public var programID: Int?
        /// A previous complete listing's `mark`: only participants added or changed since.
        public var since: String?
        /// The previous page's `next`.
        public var after: String?
        /// 1–500, default 200.
        public var limit: Int?
        enum CodingKeys: String, CodingKey { case siteID = "site_id", programID = "program_id", since, after, limit }
        public init(siteID: Int, programID: Int? = nil, since: String? = nil, after: String? = nil, limit: Int? = nil) {
            self.siteID = siteID
            self.programID = programID
            self.since = since
            self.after = after
            self.limit = limit
        }
    }

    /// One participant of a roster page.
    public struct RosterEntry: Codable, Sendable, Hashable {
        public var participantID: Int
        public var firstName: String
        public var lastName: String
        public var dateOfBirth: String?
        /// `female`, `male` or `unknown`.
        public var gender: String?
        enum CodingKeys: String, CodingKey {
            case participantID = "participant_id", firstName = "first_name", lastName = "last_name", dateOfBirth = "date_of_birth",
                gender
        }
        public init(participantID: Int, firstName: String, lastName: String, dateOfBirth: String?, gender: String?) {
            self.participantID = participantID
            self.firstName = firstName
            self.lastName = lastName
            self.dateOfBirth = dateOfBirth
            self.gender = gender
        }
    }

    /// The reply of `participants.list`.
    public struct Roster: Codable, Sendable, Hashable {
        public var participants: [RosterEntry]
        /// Absent on the last page.
        public var next: String?
        /// Pass as `since` after a complete listing.
        public var mark: String
        public init(participants: [RosterEntry], next: String?, mark: String) {
            self.participants = participants
            self.next = next
            self.mark = mark
        }
    }

    public struct Sites: Codable, Sendable, Hashable {
        public var sites: [Site]
        public init(sites: [Site]) { self.sites = sites }
    }

    public struct Programs: Codable, Sendable, Hashable {
        public var programs: [Program]
        public init(programs: [Program]) { self.programs = programs }
    }

    public struct Participants: Codable, Sendable, Hashable {
        public var participants: [Participant]
        public init(participants: [Participant]) { self.participants = participants }
    }
}
