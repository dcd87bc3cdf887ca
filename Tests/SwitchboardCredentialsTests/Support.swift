import Foundation
import SwitchboardCredentials
import Synchronization

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let date: Mutex<Date>

    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        date = Mutex(start)
    }

    var now: Date { date.withLock { $0 } }

    func advance(by seconds: TimeInterval) {
        date.withLock { $0 += seconds }
    }
}

struct RefreshFailed: Error, Equatable {
    var attempt: Int
}

/// A refresh the test controls: it counts its calls, reports each start on `started`, and
/// (when gated) waits until the test releases it with a result. Never sleeps.
final class ControlledRefresh: Sendable {
    private struct State {
        var calls = 0
        var gated: Bool
        var pending: CheckedContinuation<Void, Never>?
        var released = false
        var sawCancellation = false
    }

    private let state: Mutex<State>
    private let clock: ManualClock
    private let lifetime: TimeInterval?
    private let failing: Bool
    let started: AsyncStream<Int>
    private let startedContinuation: AsyncStream<Int>.Continuation

    init(clock: ManualClock, lifetime: TimeInterval? = 600, gated: Bool = false, failing: Bool = false) {
        self.state = Mutex(State(gated: gated))
        self.clock = clock
        self.lifetime = lifetime
        self.failing = failing
        (started, startedContinuation) = AsyncStream.makeStream()
    }

    var calls: Int { state.withLock { $0.calls } }
    var sawCancellation: Bool { state.withLock { $0.sawCancellation } }

    /// Lets the gated refresh under way (or the next one) finish.
    func release() {
        let pending = state.withLock { state in
            state.released = true
            defer { state.pending = nil }
            return state.pending
        }
        pending?.resume()
    }

    func callAsFunction(_ key: CredentialKey) async throws -> Credential {
        let attempt = state.withLock { state in
            state.calls += 1
            return state.calls
        }
        startedContinuation.yield(attempt)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if !state.gated || state.released { return true }
                state.pending = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        if Task.isCancelled { state.withLock { $0.sawCancellation = true } }
        if failing { throw RefreshFailed(attempt: attempt) }
        let now = clock.now
        return Credential(
            token: "secret-token-\(key.backend)-\(attempt)", issuedAt: now, expiresAt: lifetime.map { now.addingTimeInterval($0) },
            headers: ["Authorization": "Bearer secret-token-\(key.backend)-\(attempt)"], attributes: ["attempt": "\(attempt)"])
    }

    /// The closure to hand to `credential(for:refresh:)`.
    var closure: @Sendable (CredentialKey) async throws -> Credential {
        { [self] key in try await self(key) }
    }
}

extension CredentialCache {
    convenience init(clock: ManualClock, margin: TimeInterval = 30, limit: RefreshLimit = .default) {
        self.init(configuration: Configuration(safetyMargin: margin, refreshLimit: limit, now: { clock.now }))
    }

    func status(_ key: CredentialKey) -> Status? {
        snapshot().first { $0.key == key }
    }
}

let fileMaker = CredentialKey(backend: "filemaker", account: "switchboard-worker")
let eto = CredentialKey(backend: "eto", account: "site-12")
