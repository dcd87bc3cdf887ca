public import Foundation

/// How many refreshes one key may start within a sliding interval.
///
/// Two budgets. A refresh that follows the rejection of a credential that had **worked** (the
/// back end answered at least one request with it before it refused it: a session that ended,
/// not a token the back end will not take) counts against `afterUse`. Every other refresh (the
/// first, an expiry, the rejection of a credential that never worked, and any that failed)
/// counts against `maximum`. A back end that refuses fresh tokens can only ever cause the
/// second kind, so the storm guard stays at `maximum`; sessions that a busy back end ends every
/// few hundred calls no longer run into it.
public struct RefreshLimit: Sendable, Hashable {
    /// Refreshes allowed per key within `interval`, failed ones included, but for those after use.
    public var maximum: Int
    /// Refreshes allowed per key within `interval` after the rejection of a credential that had
    /// worked.
    public var afterUse: Int
    /// The sliding window, in seconds.
    public var interval: TimeInterval

    public init(maximum: Int, per interval: TimeInterval, afterUse: Int = 60) {
        precondition(maximum > 0 && afterUse > 0 && interval > 0, "a refresh limit needs positive maximums and interval")
        self.maximum = maximum
        self.afterUse = afterUse
        self.interval = interval
    }

    /// Five refreshes a minute: a worker that needs more is being refused by the back end,
    /// and logging in again would not help. Sixty a minute after sessions that worked.
    public static let `default` = RefreshLimit(maximum: 5, per: 60)
}

/// An error a refresh can throw that says whether the back end refused the account's own
/// credentials (a wrong or changed password). After that, logging in again soon cannot help and
/// may lock the account, so the next refresh counts against `RefreshLimit.maximum` even if it
/// follows a session that worked. Any other failure (the back end or `auth` unavailable) leaves
/// a session loss a session loss.
public protocol RefusedCredentialsError: Error {
    var refusedCredentials: Bool { get }
}

/// The refresh-storm guard: remembers when each key's recent refreshes started. A value type
/// with no clock of its own, so tests drive it with plain dates.
struct RefreshLimiter: Sendable {
    var limit: RefreshLimit
    private var starts: [CredentialKey: [Date]] = [:]
    private var startsAfterUse: [CredentialKey: [Date]] = [:]

    init(limit: RefreshLimit) {
        self.limit = limit
    }

    enum Decision: Equatable {
        case allowed
        /// Refused; a refresh will be allowed again at this time.
        case refused(until: Date)
    }

    /// Records a refresh started at `now` if the limit allows one, else says when it will.
    /// `afterUse`: it follows the rejection of a credential that had worked (its own budget).
    mutating func admit(_ key: CredentialKey, at now: Date, afterUse: Bool = false) -> Decision {
        let maximum = afterUse ? limit.afterUse : limit.maximum
        var recent = (afterUse ? startsAfterUse : starts)[key, default: []].filter { now.timeIntervalSince($0) < limit.interval }
        defer {
            if afterUse { startsAfterUse[key] = recent } else { starts[key] = recent }
        }
        if recent.count >= maximum {
            // `recent` is in start order, so the oldest leaves the window first.
            return .refused(until: recent[recent.count - maximum].addingTimeInterval(limit.interval))
        }
        recent.append(now)
        return .allowed
    }

    /// Refreshes started for `key` within the interval before `now`, of both kinds.
    func recentCount(_ key: CredentialKey, at now: Date) -> Int {
        starts[key, default: []].count { now.timeIntervalSince($0) < limit.interval }
            + startsAfterUse[key, default: []].count { now.timeIntervalSince($0) < limit.interval }
    }
}
