import Foundation

extension CredentialCache {
    /// Everything the cache knows, behind one lock. The single-flight and storm-guard rules
    /// live here as mutating methods that return what the caller must do once the lock is
    /// released (resume a continuation, start a refresh): no I/O and no awaiting under the lock.
    struct State: Sendable {
        typealias Waiter = CheckedContinuation<Credential, any Error>

        /// The refresh under way for one key and the callers waiting for it.
        struct Flight: Sendable {
            var id: UInt64
            var waiters: [UInt64: Waiter] = [:]
        }

        var entries: [CredentialKey: Credential] = [:]
        var flights: [CredentialKey: Flight] = [:]
        var limiter: RefreshLimiter
        private var lastID: UInt64 = 0
        /// A write of the file has been queued and has not yet read `entries`.
        var writeQueued = false

        init(limit: RefreshLimit, entries: [CredentialKey: Credential]) {
            self.limiter = RefreshLimiter(limit: limit)
            self.entries = entries
        }

        mutating func makeID() -> UInt64 {
            lastID += 1
            return lastID
        }

        func usable(_ key: CredentialKey, at now: Date, margin: TimeInterval) -> Credential? {
            guard let credential = entries[key], credential.isUsable(at: now, margin: margin) else { return nil }
            return credential
        }

        enum JoinAction {
            case resume(Credential)
            case fail(any Error)
            /// The waiter was added to a refresh already under way.
            case wait
            /// The waiter was added to a new flight; the caller must start its refresh.
            case startRefresh(flight: UInt64)
        }

        /// A caller that found no usable credential asks for one: it gets the one a refresh
        /// stored meanwhile, joins the refresh under way, starts one, or is refused by the
        /// storm guard.
        mutating func join(
            _ key: CredentialKey, waiter id: UInt64, continuation: Waiter, at now: Date, margin: TimeInterval, isCancelled: Bool
        ) -> JoinAction {
            // Cancelled before it could register: the cancellation handler found nothing to
            // resume, so this is the only place left to answer it.
            if isCancelled { return .fail(CancellationError()) }
            if let credential = usable(key, at: now, margin: margin) { return .resume(credential) }
            if flights[key] != nil {
                flights[key]!.waiters[id] = continuation
                return .wait
            }
            switch limiter.admit(key, at: now) {
            case .refused(let until):
                let limit = limiter.limit
                return .fail(
                    CredentialError(
                        code: .refreshLimitExceeded,
                        message:
                            "\(limit.maximum) refreshes within \(Int(limit.interval)) s already; the next one is allowed at \(until.ISO8601Format()). Check the account's password and whether the back end keeps rejecting fresh tokens.",
                        key: key, retryAfter: until))
            case .allowed:
                let flight = makeID()
                flights[key] = Flight(id: flight, waiters: [id: continuation])
                return .startRefresh(flight: flight)
            }
        }

        /// A waiter's task was cancelled: takes its continuation out, if it is still waiting,
        /// for the caller to resume with `CancellationError`. The refresh goes on.
        mutating func leave(_ key: CredentialKey, waiter id: UInt64) -> Waiter? {
            flights[key]?.waiters.removeValue(forKey: id)
        }

        /// A refresh finished: stores its credential and hands back everyone waiting for it.
        mutating func complete(_ key: CredentialKey, flight id: UInt64, result: Result<Credential, any Error>) -> [Waiter] {
            guard let flight = flights[key], flight.id == id else { return [] }
            flights[key] = nil
            if case .success(let credential) = result { entries[key] = credential }
            return Array(flight.waiters.values)
        }

        /// Drops `rejected` if it is still the current credential for `key`. Tokens are
        /// compared, not whole credentials: it is the token the back end refused.
        mutating func invalidate(_ key: CredentialKey, rejected: Credential) -> Bool {
            guard let current = entries[key], current.token == rejected.token else { return false }
            entries[key] = nil
            return true
        }
    }
}
