// The credential cache every worker and `switchboard-auth` keeps (ARCHITECTURE.md,
// Credentials). A worker must never log in per request: it reuses a token until it expires or
// the back end rejects it, and however many requests find the token missing at once, only one
// of them asks for a new one (FileMaker's "what good clients do": one refresh at a time,
// callers that arrive during a refresh wait for it). When the back end keeps rejecting fresh
// tokens, the storm guard stops the cache from logging in again and again and says so.

public import CoreMetrics
import Dispatch
public import Foundation
public import Logging
import Synchronization

/// Tokens for back ends, kept until they expire or are rejected, refreshed one at a time.
///
/// Thread safety: every method may be called from any task or thread at any time. State sits
/// behind one `Mutex`; nothing blocks or awaits while holding it.
public final class CredentialCache: Sendable {
    public struct Configuration: Sendable {
        /// A credential that expires within this many seconds counts as expired, so that a
        /// request started with it does not meet its expiry on the way. 30 s by default.
        public var safetyMargin: TimeInterval
        /// The refresh-storm guard. Five per key per minute by default.
        public var refreshLimit: RefreshLimit
        /// The clock for expiries and the storm guard; tests pass one they can move.
        public var now: @Sendable () -> Date
        public var logger: Logger
        /// Where `switchboard_backend_logins_total` and `…_refreshes_total` go: a log-in is
        /// each refresh this cache runs (by its outcome); a refresh reason is `expired` (the
        /// cached credential was past its lifetime) or `rejected` (the back end refused it).
        public var metrics: any MetricsFactory

        public init(
            safetyMargin: TimeInterval = 30, refreshLimit: RefreshLimit = .default, now: @escaping @Sendable () -> Date = { Date() },
            logger: Logger = Logger(label: "switchboard.credentials"), metrics: any MetricsFactory = MetricsSystem.factory
        ) {
            self.safetyMargin = safetyMargin
            self.refreshLimit = refreshLimit
            self.now = now
            self.logger = logger
            self.metrics = metrics
        }
    }

    /// What to do when the cache file exists but cannot be read (tampered, wrong key, bad
    /// permissions, newer format).
    public enum UnreadableFilePolicy: Sendable {
        /// Throw the `CredentialFileError` from `init`. The default: an operator should see it.
        case fail
        /// Log the error and start empty; the next write replaces the file.
        case startEmpty
    }

    /// A credential's state without its secrets, for status pages and the monitor.
    public struct Status: Sendable, Hashable, CustomStringConvertible {
        public var key: CredentialKey
        /// `nil` while the first refresh is under way.
        public var fingerprint: String?
        public var issuedAt: Date?
        public var expiresAt: Date?
        /// A refresh for this key is under way.
        public var refreshing: Bool
        /// Callers waiting for that refresh.
        public var waiting: Int
        /// Refreshes started within the storm guard's interval.
        public var recentRefreshes: Int

        public var description: String {
            var text = "\(key):"
            if let fingerprint { text += " \(fingerprint)" } else { text += " none" }
            if let expiresAt { text += " expires \(expiresAt.ISO8601Format())" }
            if refreshing { text += " (refreshing, \(waiting) waiting)" }
            return text + " \(recentRefreshes) recent refresh(es)"
        }
    }

    public let configuration: Configuration
    private let state: Mutex<State>
    private let file: EncryptedCredentialFile?
    /// Writes of `file` run here, one at a time and in order, off the cooperative pool (they
    /// fsync).
    private let writer = DispatchQueue(label: "switchboard.credentials.writer")

    /// A cache in memory only.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.file = nil
        self.state = Mutex(State(limit: configuration.refreshLimit, entries: [:]))
    }

    /// A cache kept in `file` as well: loads what it holds now (dropping expired credentials)
    /// and writes it again after every change. Reads the file synchronously, so call it at
    /// start-up rather than on a busy task.
    /// - Throws: `CredentialFileError` when the file cannot be read and `ifUnreadable` is `.fail`.
    public init(
        configuration: Configuration = Configuration(), file: EncryptedCredentialFile, ifUnreadable: UnreadableFilePolicy = .fail
    )
        throws
    {
        self.configuration = configuration
        self.file = file
        var entries: [CredentialKey: Credential] = [:]
        do {
            entries = try file.load(now: configuration.now())
            configuration.logger.debug("loaded credentials", metadata: ["path": "\(file.path)", "count": "\(entries.count)"])
        } catch let error as CredentialFileError {
            guard case .startEmpty = ifUnreadable else { throw error }
            configuration.logger.warning("starting with no credentials", metadata: ["error": "\(error)"])
        }
        self.state = Mutex(State(limit: configuration.refreshLimit, entries: entries))
    }

    /// A usable credential for `key`: the cached one, or a new one from `refresh`.
    ///
    /// The cached credential is returned while it is more than `safetyMargin` from expiring.
    /// Otherwise one refresh runs for the key, however many callers ask at once: they all wait
    /// for it and all get its credential, or all get its error unchanged. `refresh` is the
    /// closure of the caller that started the refresh; the others' closures are not called.
    /// A failed refresh is not retried here; the next call starts a new one. Its error is
    /// logged with the key, so `refresh` must throw errors whose descriptions hold no secret.
    ///
    /// Cancelling a caller's task ends its wait at once with `CancellationError`; the refresh
    /// goes on for the other callers, and its credential is cached even if no one waits for it.
    ///
    /// - Throws: `CredentialError` with code `refreshLimitExceeded` when the key has had
    ///   `refreshLimit.maximum` refreshes within `refreshLimit.interval` (failed ones count);
    ///   the error of `refresh`; `CancellationError`.
    public func credential(
        for key: CredentialKey, refresh: @escaping @Sendable (CredentialKey) async throws -> Credential
    ) async throws -> Credential {
        let margin = configuration.safetyMargin
        let now = configuration.now()
        if let cached = state.withLock({ $0.usable(key, at: now, margin: margin) }) { return cached }
        let waiter = state.withLock { $0.makeID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: State.Waiter) in
                let now = configuration.now()
                // `Task.isCancelled` is read under the lock: a cancellation handler that ran
                // before this point found no waiter to resume, and the flag it follows is
                // then already set; one that runs after will find this waiter registered.
                let action = state.withLock {
                    $0.join(key, waiter: waiter, continuation: continuation, at: now, margin: margin, isCancelled: Task.isCancelled)
                }
                switch action {
                case .resume(let credential):
                    continuation.resume(returning: credential)
                case .fail(let error):
                    if let error = error as? CredentialError {
                        configuration.logger.warning("refresh refused", metadata: ["key": "\(key)", "error": "\(error)"])
                    }
                    continuation.resume(throwing: error)
                case .wait:
                    break
                case .startRefresh(let flight):
                    if state.withLock({ $0.entries[key] != nil }) {
                        count("switchboard_backend_refreshes_total", key, ("reason", "expired"))
                    }
                    startRefresh(key, flight: flight, refresh: refresh)
                }
            }
        } onCancel: {
            state.withLock { $0.leave(key, waiter: waiter) }?.resume(throwing: CancellationError())
        }
    }

    private func startRefresh(_ key: CredentialKey, flight: UInt64, refresh: @escaping @Sendable (CredentialKey) async throws -> Credential)
    {
        configuration.logger.debug("refreshing credential", metadata: ["key": "\(key)"])
        // An unstructured task on purpose, the one place this library makes one: the refresh
        // belongs to every caller waiting for it and to none of them. Run in the first
        // caller's task, it would be cancelled with that caller (a half-done log-in, then a
        // second one for the others) and that caller could not stop waiting. It inherits the
        // caller's priority and task-locals; it ends when `refresh` returns, and
        // `complete` resumes every waiter still registered, so no continuation is left behind.
        Task {
            let result: Result<Credential, any Error>
            do {
                result = .success(try await refresh(key))
            } catch {
                result = .failure(error)
            }
            complete(key, flight: flight, result: result)
        }
    }

    private func count(_ name: String, _ key: CredentialKey, _ label: (String, String)) {
        Counter(label: name, dimensions: [("backend", key.backend), label], factory: configuration.metrics).increment()
    }

    private func complete(_ key: CredentialKey, flight: UInt64, result: Result<Credential, any Error>) {
        let waiters = state.withLock { $0.complete(key, flight: flight, result: result) }
        // Both outcomes' series exist from the first log-in on, so a first failure is an increase.
        let outcome = (try? result.get()) == nil ? "failure" : "success"
        _ = Counter(
            label: "switchboard_backend_logins_total",
            dimensions: [("backend", key.backend), ("outcome", outcome == "success" ? "failure" : "success")],
            factory: configuration.metrics)
        count("switchboard_backend_logins_total", key, ("outcome", outcome))
        switch result {
        case .success(let credential):
            if !credential.isUsable(at: configuration.now(), margin: configuration.safetyMargin) {
                // Handed out all the same (it is the newest there is), but the next call will
                // refresh again: the issuer's clock or the margin is wrong.
                configuration.logger.warning(
                    "refreshed credential expires within the safety margin",
                    metadata: ["key": "\(key)", "credential": "\(credential)", "safety_margin": "\(configuration.safetyMargin)"])
            } else {
                configuration.logger.debug("refreshed credential", metadata: ["key": "\(key)", "credential": "\(credential)"])
            }
            for waiter in waiters { waiter.resume(returning: credential) }
            scheduleWrite()
        case .failure(let error):
            configuration.logger.warning("refresh failed", metadata: ["key": "\(key)", "error": "\(error)"])
            for waiter in waiters { waiter.resume(throwing: error) }
        }
    }

    /// The back end refused `rejected` (HTTP 401, FileMaker 952): drops it if it is still the
    /// cached credential for `key`, so that the next `credential(for:refresh:)` refreshes.
    /// A rejection of an older credential, already replaced, changes nothing: a hundred
    /// requests that fail with the same token cause one refresh, not a hundred.
    /// - Returns: whether the credential was dropped.
    ///
    /// A credential that had worked (`accepted(_:for:)` was called with it, or `hadWorked` says
    /// so) makes the refresh that follows count against the storm guard's `afterUse` budget.
    @discardableResult
    public func invalidate(_ key: CredentialKey, rejected: Credential, hadWorked: Bool = false) -> Bool {
        let dropped = state.withLock { $0.invalidate(key, rejected: rejected, hadWorked: hadWorked) }
        if dropped {
            count("switchboard_backend_refreshes_total", key, ("reason", "rejected"))
            configuration.logger.info("credential rejected; dropped", metadata: ["key": "\(key)", "credential": "\(rejected)"])
            scheduleWrite()
        }
        return dropped
    }

    /// A caller reports that a credential which had worked was rejected, and this cache holds
    /// no credential for `key` (it has restarted since): the refresh that follows counts against
    /// the after-use budget, as if it had dropped that credential itself. Returns whether it
    /// applied (with a credential cached, there is nothing to refresh).
    @discardableResult
    public func sessionEnded(_ key: CredentialKey) -> Bool {
        state.withLock { $0.ended(key) }
    }

    /// A back end answered a request made with `credential` (it did not reject it). Cheap: call
    /// it after every such response.
    public func accepted(_ credential: Credential, for key: CredentialKey) {
        state.withLock { $0.accepted(key, credential) }
    }

    /// Whether `credential` is the cached one for `key` and a back end has accepted it.
    public func hasWorked(_ credential: Credential, for key: CredentialKey) -> Bool {
        state.withLock { $0.worked[key] != nil && $0.entries[key]?.token == credential.token }
    }

    /// Puts a credential obtained elsewhere in the cache (replacing any cached one).
    public func store(_ credential: Credential, for key: CredentialKey) {
        state.withLock {
            if $0.entries[key]?.token != credential.token { $0.worked[key] = nil }
            $0.entries[key] = credential
        }
        scheduleWrite()
    }

    /// Forgets the credential for `key` (at log-out). A refresh under way still stores its result.
    /// - Returns: the credential that was cached, if any.
    @discardableResult
    public func remove(_ key: CredentialKey) -> Credential? {
        let removed = state.withLock {
            $0.worked[key] = nil
            return $0.entries.removeValue(forKey: key)
        }
        if removed != nil { scheduleWrite() }
        return removed
    }

    /// The cached credential for `key` if it is usable now, without refreshing.
    public func cached(_ key: CredentialKey) -> Credential? {
        let now = configuration.now()
        return state.withLock { $0.usable(key, at: now, margin: configuration.safetyMargin) }
    }

    /// Every key the cache holds or is refreshing, with expiries and no secrets, sorted by key.
    public func snapshot() -> [Status] {
        let now = configuration.now()
        return state.withLock { state in
            Set(state.entries.keys).union(state.flights.keys).map { key in
                let credential = state.entries[key]
                return Status(
                    key: key, fingerprint: credential?.fingerprint, issuedAt: credential?.issuedAt, expiresAt: credential?.expiresAt,
                    refreshing: state.flights[key] != nil, waiting: state.flights[key]?.waiters.count ?? 0,
                    recentRefreshes: state.limiter.recentCount(key, at: now))
            }
        }.sorted { ($0.key.backend, $0.key.account) < ($1.key.backend, $1.key.account) }
    }

    // MARK: The file

    /// Writes the file now with what the cache holds, after any write already queued.
    /// Changes are written on their own; call this at shutdown, or to see a write's error.
    /// Does nothing for a cache in memory only.
    public func save() async throws {
        guard let file else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            writer.async {
                do {
                    try self.write(to: file)
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Queues a write of the file unless one is queued already that has not yet read the
    /// entries: bursts of changes cost one write, and the last change is always written.
    private func scheduleWrite() {
        guard let file else { return }
        let queue = state.withLock { state in
            defer { state.writeQueued = true }
            return !state.writeQueued
        }
        guard queue else { return }
        writer.async {
            do {
                try self.write(to: file)
            } catch {
                self.configuration.logger.error("cannot write credential file", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Runs on `writer` only.
    private func write(to file: EncryptedCredentialFile) throws {
        let entries = state.withLock { state in
            state.writeQueued = false
            return state.entries
        }
        try file.save(entries, now: configuration.now())
    }
}
