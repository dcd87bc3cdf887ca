// Which sites the account's enterprise has, so that a site id from outside (a kiosk's request, a
// check-in) opens a site session only when the site exists: each new site is a full ETO log-in
// chain in auth, and a caller looping over made-up ids must not be able to make auth log in again
// and again (or get the account locked).

import Foundation
public import SwitchboardBackends
import Synchronization

public final class ETOSites: Sendable {
    /// Lists the enterprise's sites (the `sso` scope's `GetSSOSites`).
    let list: @Sendable () async throws -> [ETO.Site]
    /// How long a list is trusted before an unknown id makes it read again.
    let freshFor: Duration
    private let known = Mutex<(ids: Set<Int>, at: ContinuousClock.Instant?)>(([], nil))

    public init(freshFor: Duration = .seconds(60), list: @escaping @Sendable () async throws -> [ETO.Site]) {
        self.freshFor = freshFor
        self.list = list
    }

    /// Whether `site` is one of the enterprise's; reads the list when it has none, or when the
    /// id is unknown and the list is older than `freshFor` (a site added in ETO shows up).
    public func contains(_ site: Int) async throws -> Bool {
        let (hit, stale) = known.withLock { state in
            (state.ids.contains(site), state.at.map { $0.duration(to: .now) > freshFor } ?? true)
        }
        if hit { return true }
        guard stale else { return false }
        let ids = Set(try await list().map(\.id))
        known.withLock { $0 = (ids, .now) }
        return ids.contains(site)
    }
}
