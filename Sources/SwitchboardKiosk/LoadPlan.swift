// Whom and where a load run's check-ins name. A load that invents sites and programs measures
// nothing but dead letters: every check-in fails at ETO (`unknown-site`). So a plan takes its
// people from a roster (the check-ins then match real participants and go all the way to a
// TouchPoint response), and its sites and programs from the roster, the command line or what
// the `eto` service answers; `unmatchedRate` makes deliberate dead letters, and only those.

public import SwitchboardProtocol

/// The check-ins of a load run, by index: the same index always gives the same check-in.
public struct LoadPlan: Sendable {
    /// A site and one of its programs, as ETO knows them.
    public struct Target: Sendable, Hashable {
        public var site: Int64
        public var program: Int64

        public init(site: Int64, program: Int64) {
            self.site = site
            self.program = program
        }
    }

    /// Where check-ins of made-up people go (those not taken from the roster).
    public let targets: [Target]
    /// Real people to check in (nil: every check-in names a made-up person).
    public let roster: CheckInRoster?
    /// The share of check-ins (0–1) that name a made-up person on purpose: ETO matches none
    /// of them, so each becomes a `participant-unmatched` dead letter.
    public let unmatchedRate: Double

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// - Throws: `Failure` when there is nowhere to check in, or the rate is not from 0 to 1.
    public init(targets: [Target], roster: CheckInRoster?, unmatchedRate: Double) throws(Failure) {
        guard (0...1).contains(unmatchedRate) else {
            throw Failure(description: "the unmatched rate must be from 0 to 1, got \(unmatchedRate)")
        }
        var targets = targets
        if targets.isEmpty, let roster {
            targets = Self.targets(of: roster)
        }
        guard !targets.isEmpty else { throw Failure(description: "no site and program to check in at") }
        self.targets = targets
        self.roster = roster
        self.unmatchedRate = unmatchedRate
    }

    /// The sites and programs a roster's people are enrolled at, in the order they first appear.
    static func targets(of roster: CheckInRoster) -> [Target] {
        var seen: Set<Target> = []
        var targets: [Target] = []
        for row in roster.rows {
            guard let site = row["site_id"].flatMap({ Int64($0) }), let program = row["program_id"].flatMap({ Int64($0) }) else {
                continue
            }
            let target = Target(site: site, program: program)
            if seen.insert(target).inserted { targets.append(target) }
        }
        return targets
    }

    /// Whether check-in `index` names a made-up person on purpose: spread evenly, so that any
    /// run of `n` check-ins holds `n × rate` of them, give or take one.
    public func isUnmatched(_ index: Int) -> Bool {
        guard unmatchedRate > 0 else { return roster == nil }
        let before = (Double(index) * unmatchedRate).rounded(.down)
        let through = (Double(index + 1) * unmatchedRate).rounded(.down)
        return through > before || roster == nil
    }

    /// Check-in number `index` of the run, now.
    public func checkIn(_ index: Int, kioskID: String) throws -> CheckIn {
        if let roster, !isUnmatched(index) {
            return try roster.checkIn(index, kioskID: kioskID)
        }
        var checkIn = SyntheticCheckIns.make(index: index, kioskID: kioskID)
        let target = targets[index % targets.count]
        checkIn.siteID = target.site
        checkIn.programID = target.program
        return checkIn
    }
}
