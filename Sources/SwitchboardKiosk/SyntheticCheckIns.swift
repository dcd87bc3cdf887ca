import Foundation
public import SwitchboardProtocol

/// Plausible, clearly fictional check-ins for load and demos: people who match no back end.
public enum SyntheticCheckIns {
    static let firstNames = ["Ana", "Marcus", "Li", "Fatima", "Joe", "Priya", "Dmitri", "Grace", "Tomás", "Aisha", "Sam", "Rosa"]
    static let lastNames = ["Diaz", "Johnson", "Chen", "Okafor", "Smith", "Patel", "Ivanov", "Nguyen", "García", "Hassan", "Lee", "Moreno"]

    /// The check-in numbered `index`, now: the same index gives the same person, site and
    /// program (144 names, born 1950–2004); every tenth is a street-outreach contact with a
    /// location and a note.
    public static func make(index: Int, kioskID: String) -> CheckIn {
        let first = firstNames[index % firstNames.count]
        let last = lastNames[(index / firstNames.count) % lastNames.count]
        let year = 1950 + (index * 7) % 55
        let month = 1 + (index * 5) % 12
        let day = 1 + (index * 3) % 28
        let dob = String(format: "%04d-%02d-%02d", year, month, day)
        let outreach = index % 10 == 9
        return CheckIn(
            participant: .init(firstName: first, lastName: last, dateOfBirth: dob),
            siteID: Int64(12 + index % 3), programID: Int64(3 + index % 2), kioskID: kioskID,
            checkedInAt: Timestamp.now(),
            location: outreach ? .init(latitude: 47.6 + Double(index % 100) / 1000, longitude: -122.33, accuracyMeters: 15) : nil,
            notes: outreach ? "Street outreach contact." : nil)
    }
}
