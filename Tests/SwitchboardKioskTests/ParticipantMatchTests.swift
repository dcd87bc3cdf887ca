import SwitchboardProtocol
import Testing

@testable import SwitchboardKiosk

@Suite("Participant id from ETO before a check-in by name")
struct ParticipantMatchTests {
    static let byName = CheckIn(
        participant: .init(firstName: "Ana", lastName: "Ortiz", dateOfBirth: "1976-02-23"), siteID: 101, programID: 792, kioskID: "k",
        checkedInAt: "2026-11-22T21:04:00Z")

    @Test("ETO is asked only for a check-in by first and last name without an id")
    func query() {
        #expect(
            ParticipantMatch.query(for: Self.byName)
                == .init(siteID: 101, programID: 792, firstName: "Ana", lastName: "Ortiz", dateOfBirth: "1976-02-23"))
        var known = Self.byName
        known.participant.etoParticipantID = 7
        #expect(ParticipantMatch.query(for: known) == nil)
        var nameless = Self.byName
        nameless.participant.lastName = nil
        #expect(ParticipantMatch.query(for: nameless) == nil)
    }

    @Test("one match fills in the id; none, several or no answer leave the check-in by name, saying why")
    func apply() {
        let ana = ETOServiceContent.Participant(participantID: 1000, firstName: "Ana", lastName: "Ortiz", dateOfBirth: "1976-02-23")
        var checkIn = Self.byName
        #expect(ParticipantMatch.apply(.success([ana]), to: &checkIn) == "ETO knows this person: participant 1000.")
        #expect(checkIn.participant.etoParticipantID == 1000)
        for (found, told) in [
            (
                Result<[ETOServiceContent.Participant], ETOLookup.Failure>.success([]),
                "ETO has no matching participants; recording by name."
            ),
            (.success([ana, ana]), "ETO has 2 matching participants; recording by name."),
            (.failure(.init(status: nil, description: "timed out")), "No answer from ETO (timed out); recording by name."),
        ] {
            var unchanged = Self.byName
            #expect(ParticipantMatch.apply(found, to: &unchanged) == told)
            #expect(unchanged == Self.byName)
        }
    }
}
