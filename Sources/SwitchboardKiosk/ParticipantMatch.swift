// `checkin` by name asks ETO (through the `eto` service) for the participant id first, so the
// check-in is keyed and matched by id downstream; when ETO does not answer in time, or finds no
// single match, the kiosk records by name rather than refusing the person at the door.

import SwitchboardBus
public import SwitchboardProtocol

/// Fills in a check-in's ETO participant id from a search, when the search finds exactly one.
public enum ParticipantMatch {
    /// The search to ask ETO, or nil when there is nothing to ask: the check-in names its
    /// participant already, or lacks a first or last name.
    public static func query(for checkIn: CheckIn) -> ETOServiceContent.SearchQuery? {
        guard checkIn.participant.etoParticipantID == nil, let first = checkIn.participant.firstName,
            let last = checkIn.participant.lastName, let site = Int(exactly: checkIn.siteID), let program = Int(exactly: checkIn.programID)
        else { return nil }
        return ETOServiceContent.SearchQuery(
            siteID: site, programID: program, firstName: first, lastName: last, dateOfBirth: checkIn.participant.dateOfBirth)
    }

    /// Takes the participant id from `found` when it holds exactly one match.
    /// - Returns: what to tell the person: the id found, or why the check-in is recorded by name.
    public static func apply(_ found: Result<[ETOServiceContent.Participant], ETOLookup.Failure>, to checkIn: inout CheckIn) -> String {
        switch found {
        case .success(let matches) where matches.count == 1:
            checkIn.participant.etoParticipantID = Int64(matches[0].participantID)
            return "ETO knows this person: participant \(matches[0].participantID)."
        case .success(let matches):
            return "ETO has \(matches.isEmpty ? "no" : "\(matches.count)") matching participants; recording by name."
        case .failure(let failure):
            return "No answer from ETO (\(failure)); recording by name."
        }
    }
}
