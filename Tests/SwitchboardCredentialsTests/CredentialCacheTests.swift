import Foundation
import SwitchboardCredentials
import SwitchboardTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct CredentialCacheTests {
    @Test func oneRefreshForAHundredConcurrentCallers() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock, gated: true)
        var started = refresh.started.makeAsyncIterator()
        let credentials = try await withThrowingTaskGroup(of: Credential.self) { group in
            for _ in 0..<100 {
                group.addTask { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
            }
            // Everyone is waiting on the one refresh before it is allowed to finish.
            #expect(await started.next() == 1)
            try await waitUntil("100 callers waiting") { cache.status(fileMaker)?.waiting == 100 }
            #expect(refresh.calls == 1)
            refresh.release()
            return try await group.reduce(into: [Credential]()) { $0.append($1) }
        }
        #expect(credentials.count == 100)
        #expect(Set(credentials.map(\.token)) == ["secret-token-filemaker-1"])
        #expect(refresh.calls == 1)
        #expect(cache.status(fileMaker)?.refreshing == false)
    }

    @Test func reusesUntilTheSafetyMarginBeforeExpiry() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock, margin: 30)
        let refresh = ControlledRefresh(clock: clock, lifetime: 900)
        for _ in 0..<1000 {
            _ = try await cache.credential(for: fileMaker, refresh: refresh.closure)
        }
        #expect(refresh.calls == 1)
        clock.advance(by: 869)  // 31 s left: still usable
        #expect(try await cache.credential(for: fileMaker, refresh: refresh.closure).token == "secret-token-filemaker-1")
        #expect(refresh.calls == 1)
        clock.advance(by: 1)  // 30 s left: within the margin
        #expect(try await cache.credential(for: fileMaker, refresh: refresh.closure).token == "secret-token-filemaker-2")
        #expect(refresh.calls == 2)
        // Keys are independent.
        _ = try await cache.credential(for: eto, refresh: refresh.closure)
        #expect(refresh.calls == 3)
    }

    @Test func credentialWithoutExpiryLastsUntilRejected() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock, lifetime: nil)
        let first = try await cache.credential(for: eto, refresh: refresh.closure)
        clock.advance(by: 86_400 * 365)
        #expect(try await cache.credential(for: eto, refresh: refresh.closure) == first)
        #expect(cache.invalidate(eto, rejected: first))
        #expect(try await cache.credential(for: eto, refresh: refresh.closure) != first)
        #expect(refresh.calls == 2)
    }

    @Test func invalidationDropsOnlyTheCurrentCredential() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock)
        let first = try await cache.credential(for: fileMaker, refresh: refresh.closure)
        #expect(cache.invalidate(fileMaker, rejected: first))
        let second = try await cache.credential(for: fileMaker, refresh: refresh.closure)
        #expect(refresh.calls == 2)
        #expect(second.token != first.token)
        // A late rejection of the old token must not throw away the new one.
        #expect(!cache.invalidate(fileMaker, rejected: first))
        #expect(try await cache.credential(for: fileMaker, refresh: refresh.closure) == second)
        #expect(refresh.calls == 2)
    }

    @Test func aHundredRejectionsOfOneTokenCauseOneRefresh() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock)
        let rejected = try await cache.credential(for: fileMaker, refresh: refresh.closure)
        let dropped = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<100 { group.addTask { cache.invalidate(fileMaker, rejected: rejected) } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(dropped == 1)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 { group.addTask { try await cache.credential(for: fileMaker, refresh: refresh.closure).token } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens == ["secret-token-filemaker-2"])
        #expect(refresh.calls == 2)
    }

    /// The worker's case from the issue: 1,000 writes through one cache log in once; a forced
    /// rejection halfway logs in once more; 100 requests that arrive as the token expires log
    /// in once.
    @Test func aWorkersThousandWrites() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock, lifetime: 900)
        for write in 0..<1000 {
            let credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)
            if write == 500 { cache.invalidate(fileMaker, rejected: credential) }
        }
        #expect(refresh.calls == 2)
        clock.advance(by: 900)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<100 { group.addTask { _ = try await cache.credential(for: fileMaker, refresh: refresh.closure) } }
            try await group.waitForAll()
        }
        #expect(refresh.calls == 3)
    }

    @Test func aFailedRefreshReachesEveryWaiterAndTheNextCallTriesAgain() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let failing = ControlledRefresh(clock: clock, gated: true, failing: true)
        let results = await withTaskGroup(of: Result<Credential, any Error>.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    do {
                        return .success(try await cache.credential(for: fileMaker, refresh: failing.closure))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            try? await waitUntil("10 callers waiting") { cache.status(fileMaker)?.waiting == 10 }
            failing.release()
            return await group.reduce(into: [Result<Credential, any Error>]()) { $0.append($1) }
        }
        #expect(results.count == 10)
        for result in results {
            #expect(throws: RefreshFailed(attempt: 1)) { try result.get() }
        }
        #expect(failing.calls == 1)
        #expect(cache.cached(fileMaker) == nil)
        let working = ControlledRefresh(clock: clock)
        #expect(try await cache.credential(for: fileMaker, refresh: working.closure).token == "secret-token-filemaker-1")
        #expect(working.calls == 1)
    }

    @Test func stormGuardStopsRefreshingAndRecoversAfterTheInterval() async throws {
        let clock = ManualClock()
        let start = clock.now
        let cache = CredentialCache(clock: clock, limit: RefreshLimit(maximum: 3, per: 60))
        let failing = ControlledRefresh(clock: clock, failing: true)
        for attempt in 1...3 {
            clock.advance(by: 1)
            await #expect(throws: RefreshFailed(attempt: attempt)) {
                try await cache.credential(for: fileMaker, refresh: failing.closure)
            }
        }
        let error = await #expect(throws: CredentialError.self) {
            try await cache.credential(for: fileMaker, refresh: failing.closure)
        }
        #expect(failing.calls == 3)
        #expect(error?.code == .refreshLimitExceeded)
        #expect(error?.key == fileMaker)
        // The first of the three started at start + 1, so the window frees up 60 s later.
        #expect(error?.retryAfter == start.addingTimeInterval(61))
        let text = "\(error!)"
        #expect(text.contains("filemaker") && text.contains("switchboard-worker"))
        #expect(text.contains("3 refreshes within 60 s"))
        // Other keys are not affected.
        let working = ControlledRefresh(clock: clock)
        _ = try await cache.credential(for: eto, refresh: working.closure)
        // Still refused one second before the window opens, allowed at it.
        clock.advance(by: 57)
        await #expect(throws: CredentialError.self) { try await cache.credential(for: fileMaker, refresh: working.closure) }
        clock.advance(by: 1)
        #expect(try await cache.credential(for: fileMaker, refresh: working.closure).token == "secret-token-filemaker-2")
        #expect(cache.status(fileMaker)?.recentRefreshes == 3)
    }

    @Test func successfulRefreshesCountTowardsTheStormGuard() async throws {
        // A back end that rejects every token it hands out: each use invalidates, each call refreshes.
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock, limit: RefreshLimit(maximum: 5, per: 60))
        let refresh = ControlledRefresh(clock: clock)
        for _ in 0..<5 {
            let credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)
            cache.invalidate(fileMaker, rejected: credential)
        }
        await #expect(throws: CredentialError.self) { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
        #expect(refresh.calls == 5)
    }

    /// Sessions that worked and then ended (a back end that ends every session every few hundred
    /// calls) refresh against the after-use budget, not the storm guard's five; a token that is
    /// rejected before it ever worked still counts against the five, even right after one that
    /// worked (chaos run, issue 15: ETO dead letters "eto-credential-unavailable").
    @Test func sessionsThatWorkedRefreshAgainstTheirOwnBudget() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock, limit: RefreshLimit(maximum: 2, per: 60, afterUse: 4))
        let refresh = ControlledRefresh(clock: clock)
        var credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)  // ordinary 1 of 2
        for _ in 0..<4 {
            cache.accepted(credential, for: fileMaker)
            #expect(cache.hasWorked(credential, for: fileMaker))
            cache.invalidate(fileMaker, rejected: credential)
            credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)  // after use
        }
        #expect(refresh.calls == 5)
        #expect(cache.status(fileMaker)?.recentRefreshes == 5)
        // The after-use budget is spent: a fifth ended session waits for the window.
        cache.accepted(credential, for: fileMaker)
        cache.invalidate(fileMaker, rejected: credential)
        let spent = await #expect(throws: CredentialError.self) { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
        #expect("\(spent!)".contains("after sessions that worked"))
        // Tokens that never work: the ordinary budget (one left of two), whatever came before.
        clock.advance(by: 61)
        credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)  // after use (was pending)
        cache.invalidate(fileMaker, rejected: credential)  // never accepted
        credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)  // ordinary 1 of 2 in this window
        cache.invalidate(fileMaker, rejected: credential)
        credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)  // ordinary 2 of 2
        cache.invalidate(fileMaker, rejected: credential)
        let storm = await #expect(throws: CredentialError.self) { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
        #expect("\(storm!)".contains("2 refreshes within 60 s"))
        // Acceptance of a credential that is no longer the cached one changes nothing.
        cache.accepted(credential, for: fileMaker)
        #expect(!cache.hasWorked(credential, for: fileMaker))
    }

    struct Unavailable: RefusedCredentialsError { var refusedCredentials: Bool { false } }
    struct WrongPassword: RefusedCredentialsError { var refusedCredentials: Bool { true } }

    /// Log-ins that fail while recovering from a session that ended (the back end answering 503)
    /// stay in the after-use budget until one succeeds; once the back end refuses the account's
    /// credentials, the ordinary budget applies again (a changed password must not be tried
    /// sixty times a minute).
    @Test func failedLogInsAfterASessionLossStayInItsBudgetUnlessTheAccountIsRefused() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock, limit: RefreshLimit(maximum: 1, per: 60, afterUse: 10))
        let refresh = ControlledRefresh(clock: clock)
        let credential = try await cache.credential(for: fileMaker, refresh: refresh.closure)  // ordinary 1 of 1
        cache.accepted(credential, for: fileMaker)
        cache.invalidate(fileMaker, rejected: credential)
        for _ in 0..<3 {
            await #expect(throws: Unavailable.self) { try await cache.credential(for: fileMaker) { _ in throw Unavailable() } }
        }
        _ = try await cache.credential(for: fileMaker, refresh: refresh.closure)  // still after use
        let again = try #require(cache.cached(fileMaker))
        cache.accepted(again, for: fileMaker)
        cache.invalidate(fileMaker, rejected: again)
        await #expect(throws: WrongPassword.self) { try await cache.credential(for: fileMaker) { _ in throw WrongPassword() } }
        // The account was refused: the next try is an ordinary one, and the one is spent.
        await #expect(throws: CredentialError.self) { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
    }

    /// Auth is told by the worker (`token.get` … `worked`): `hadWorked` does what `accepted` does.
    @Test func aCallerCanSayTheRejectedCredentialHadWorked() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock, limit: RefreshLimit(maximum: 1, per: 60, afterUse: 3))
        let refresh = ControlledRefresh(clock: clock)
        var credential = try await cache.credential(for: eto, refresh: refresh.closure)
        for _ in 0..<3 {
            cache.invalidate(eto, rejected: credential, hadWorked: true)
            credential = try await cache.credential(for: eto, refresh: refresh.closure)
        }
        cache.invalidate(eto, rejected: credential)
        await #expect(throws: CredentialError.self) { try await cache.credential(for: eto, refresh: refresh.closure) }
        #expect(refresh.calls == 4)
        // A cache that holds nothing for the key (auth after a restart) takes the report alone.
        let fresh = CredentialCache(clock: clock, limit: RefreshLimit(maximum: 1, per: 60, afterUse: 3))
        _ = try await fresh.credential(for: eto, refresh: refresh.closure)
        #expect(!fresh.sessionEnded(eto), "it holds a credential: nothing to refresh")
        fresh.remove(eto)
        #expect(fresh.sessionEnded(eto))
        _ = try await fresh.credential(for: eto, refresh: refresh.closure)
    }

    @Test func cancellingTheCallerThatStartedTheRefreshLeavesItRunningForTheOthers() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock, gated: true)
        var started = refresh.started.makeAsyncIterator()
        let first = Task { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
        #expect(await started.next() == 1)
        let second = Task { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
        try await waitUntil("two callers waiting") { cache.status(fileMaker)?.waiting == 2 }
        first.cancel()
        // The cancelled caller stops waiting while the refresh is still held back.
        await #expect(throws: CancellationError.self) { try await first.value }
        #expect(cache.status(fileMaker)?.waiting == 1)
        refresh.release()
        #expect(try await second.value.token == "secret-token-filemaker-1")
        #expect(refresh.calls == 1)
        #expect(!refresh.sawCancellation)
    }

    @Test func aRefreshEveryoneGaveUpOnIsStillCached() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock, gated: true)
        var started = refresh.started.makeAsyncIterator()
        let only = Task { try await cache.credential(for: fileMaker, refresh: refresh.closure) }
        #expect(await started.next() == 1)
        only.cancel()
        await #expect(throws: CancellationError.self) { try await only.value }
        refresh.release()
        try await waitUntil("the refresh stored its credential") { cache.cached(fileMaker) != nil }
        #expect(try await cache.credential(for: fileMaker, refresh: refresh.closure).token == "secret-token-filemaker-1")
        #expect(refresh.calls == 1)
    }

    @Test func aCancelledCallerStartsNoRefresh() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await cache.credential(for: fileMaker, refresh: refresh.closure)
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(refresh.calls == 0)
        #expect(cache.snapshot().isEmpty)
    }

    @Test func storeRemoveAndSnapshot() async throws {
        let clock = ManualClock()
        let cache = CredentialCache(clock: clock)
        let refresh = ControlledRefresh(clock: clock)
        let stored = Credential(token: "stored-secret", issuedAt: clock.now, expiresAt: clock.now.addingTimeInterval(120))
        cache.store(stored, for: eto)
        #expect(try await cache.credential(for: eto, refresh: refresh.closure) == stored)
        #expect(refresh.calls == 0)
        _ = try await cache.credential(for: fileMaker, refresh: refresh.closure)
        let snapshot = cache.snapshot()
        #expect(snapshot.map(\.key) == [eto, fileMaker])
        #expect(snapshot[0].expiresAt == clock.now.addingTimeInterval(120))
        #expect(snapshot[0].fingerprint == stored.fingerprint)
        #expect(snapshot[1].recentRefreshes == 1)
        #expect(!"\(snapshot)".contains("secret"))
        #expect(cache.remove(eto) == stored)
        #expect(cache.cached(eto) == nil)
        #expect(cache.snapshot().map(\.key) == [fileMaker])
    }
}
