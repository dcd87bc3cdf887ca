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
        /// Per key, the fingerprint of the cached credential once a back end has accepted it.
        var worked: [CredentialKey: String] = [:]
        /// Keys whose credential was rejected after it had worked: their refreshes count against
        /// the limit's `afterUse` budget until one succeeds or the back end refuses the account.
        var lostAfterUse: Set<CredentialKey> = []
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
            let afterUse = lostAfterUse.contains(key)
            switch limiter.admit(key, at: now, afterUse: afterUse) {
            case .refused(let until):
                let limit = limiter.limit
                let message =
                    afterUse
                    ? "\(limit.afterUse) refreshes after sessions that worked within \(Int(limit.interval)) s already; the next one is allowed at \(until.ISO8601Format()). The back end ends sessions faster than it should."
                    : "\(limit.maximum) refreshes within \(Int(limit.interval)) s already; the next one is allowed at \(until.ISO8601Format()). Check the account's password and whether the back end keeps rejecting fresh tokens."
                return .fail(CredentialError(code: .refreshLimitExceeded, message: message, key: key, retryAfter: until))
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
            switch result {
            case .success(let credential):
                entries[key] = credential
                worked[key] = nil
                // Spent: if this credential never works, the next refresh is an ordinary one.
                lostAfterUse.remove(key)
            case .failure(let error as any RefusedCredentialsError) where error.refusedCredentials:
                lostAfterUse.remove(key)
            case .failure:
                // The back end or auth was unavailable: still recovering from the same loss.
                break
            }
            return Array(flight.waiters.values)
        }

        /// A back end answered a request made with `credential`: if it is still the cached one
        /// for `key`, it has worked.
        mutating func accepted(_ key: CredentialKey, _ credential: Credential) {
            guard worked[key] == nil, let current = entries[key], current.token == credential.token else { return }
            worked[key] = current.fingerprint
        }

        /// Drops `rejected` if it is still the current credential for `key`. Tokens are
        /// compared, not whole credentials: it is the token the back end refused.
        /// A session that had worked ended, reported for a credential this cache does not hold
        /// (auth restarted since it handed it out): the next refresh is after use.
        mutating func ended(_ key: CredentialKey) -> Bool {
            guard entries[key] == nil else { return false }
            lostAfterUse.insert(key)
            return true
        }

        /// `hadWorked`: the caller knows the credential had worked (auth, told by a worker);
        /// the cache also knows it from `accepted(_:_:)`.
        mutating func invalidate(_ key: CredentialKey, rejected: Credential, hadWorked: Bool) -> Bool {
            guard let current = entries[key], current.token == rejected.token else { return false }
            if hadWorked || worked[key] == current.fingerprint { lostAfterUse.insert(key) }
            entries[key] = nil
            worked[key] = nil
            return true
        }
    }
}
