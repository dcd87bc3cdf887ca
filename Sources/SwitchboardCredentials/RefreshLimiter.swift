public import Foundation

/// How many refreshes one key may start within a sliding interval.
public struct RefreshLimit: Sendable, Hashable {
    /// Refreshes allowed per key within `interval`, failed ones included.
    public var maximum: Int
    /// The sliding window, in seconds.
    public var interval: TimeInterval

    public init(maximum: Int, per interval: TimeInterval) {
        precondition(maximum > 0 && interval > 0, "a refresh limit needs a positive maximum and interval")
        self.maximum = maximum
        self.interval = interval
    }

    /// Five refreshes a minute: a worker that needs more is being refused by the back end,
    /// and logging in again would not help.
    public static let `default` = RefreshLimit(maximum: 5, per: 60)
}

/// The refresh-storm guard: remembers when each key's recent refreshes started. A value type
/// with no clock of its own, so tests drive it with plain dates.
struct RefreshLimiter: Sendable {
    var limit: RefreshLimit
    private var starts: [CredentialKey: [Date]] = [:]

    init(limit: RefreshLimit) {
        self.limit = limit
    }

    enum Decision: Equatable {
        case allowed
        /// Refused; a refresh will be allowed again at this time.
        case refused(until: Date)
    }

    /// Records a refresh started at `now` if the limit allows one, else says when it will.
    mutating func admit(_ key: CredentialKey, at now: Date) -> Decision {
        var recent = starts[key, default: []].filter { now.timeIntervalSince($0) < limit.interval }
        if recent.count >= limit.maximum {
            starts[key] = recent
            // `recent` is in start order, so the oldest leaves the window first.
            return .refused(until: recent[recent.count - limit.maximum].addingTimeInterval(limit.interval))
        }
        recent.append(now)
        starts[key] = recent
        return .allowed
    }

    /// Refreshes started for `key` within the interval before `now`.
    func recentCount(_ key: CredentialKey, at now: Date) -> Int {
        starts[key, default: []].count { now.timeIntervalSince($0) < limit.interval }
    }
}
