// A broker on PostgreSQL (issue 29): it serves only while it holds the database's lease
// (`BrokerLease`). Without the lease it is a standby: it binds nothing (clients given both
// brokers find only the active one listening, protocol section 1) and asks for the lease every
// sixth of its time. Holding it, it starts a `Broker` whose journal checks the lease's epoch in
// every commit, renews every third of the lease's time, and stops serving the moment it can no
// longer be sure it holds the lease: a renewal refused (another broker took over), or none
// succeeded before its own deadline (the database unreachable). It then waits as a standby again,
// in the same process: nothing it could not commit was acknowledged.

public import Logging
public import ServiceLifecycle
import Synchronization
import UnixSignals

/// Runs the broker of a pair: standby, active, standby again after losing the lease, until
/// graceful shutdown (which stops the broker, then ends the lease so the standby takes over at
/// once) or a failure of the broker itself (which ends the lease and is thrown).
public final class BrokerPairService: Service, Sendable {
    private let configuration: BrokerConfiguration
    private let lease: BrokerLease
    private let makeBroker: @Sendable (BrokerConfiguration) throws -> Broker
    private let onServing: @Sendable () -> Void
    private let logger: Logger
    private let current = Mutex<Broker?>(nil)
    private let stopping = Mutex(false)
    private let terms = Mutex(0)
    private let standingBy = Mutex(false)
    private let notified = Mutex(false)

    /// - Parameters:
    ///   - configuration: with `journal.store = postgres`.
    ///   - makeBroker: a new `Broker` for a term, from the configuration this service gives (the
    ///     lease's epoch set in it).
    ///   - onServing: called the first time the broker serves (a supervisor's readiness).
    public init(
        configuration: BrokerConfiguration, logger: Logger, makeBroker: @escaping @Sendable (BrokerConfiguration) throws -> Broker,
        onServing: @escaping @Sendable () -> Void = {}
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.makeBroker = makeBroker
        self.onServing = onServing
        do {
            lease = try BrokerLease(settings: configuration.lease, database: configuration.postgres, logger: logger)
        } catch {
            throw BrokerService.Failure(description: "\(error)")
        }
    }

    /// The broker of the current term, while active.
    public var broker: Broker? { current.withLock { $0 } }

    /// Whether this broker is active and serving.
    public var isServing: Bool { broker?.isServing ?? false }

    /// Whether this broker is waiting for the lease: it asked, and another broker holds it.
    public var isStandby: Bool { standingBy.withLock { $0 } }

    /// How many terms this process has held the lease for.
    public var termsHeld: Int { terms.withLock { $0 } }

    private var isStopping: Bool { stopping.withLock { $0 } || Task.isCancelled }

    public func run() async throws {
        defer { Task { [lease] in await lease.close() } }
        // SIGHUP is trapped for the process's whole life, not only while a term's broker runs:
        // its default action would end a standby. While active it reloads the allow-list; a
        // standby has none loaded (its next term reads the directory as it starts).
        let hangUps = Task { [self] in
            for await _ in await UnixSignalsSequence(trapping: .sighup) {
                guard let broker = self.broker, let security = broker.security else { continue }
                BrokerService.reload(security, broker: broker, reason: "SIGHUP")
            }
        }
        defer { hangUps.cancel() }
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await serve()
            } onGracefulShutdown: {
                self.stop()
            }
        } onCancel: {
            self.stop()
        }
    }

    private func stop() {
        stopping.withLock { $0 = true }
        current.withLock { $0 }?.requestStop()
    }

    private func serve() async throws {
        while !isStopping {
            guard let term = await standby() else { return }
            var configuration = self.configuration
            configuration.postgres.leaseEpoch = term.epoch
            configuration.postgres.leaseTTL = configuration.lease.ttl
            let broker = try makeBroker(configuration)
            current.withLock { $0 = broker }
            let (ended, last) = await hold(term, broker)
            current.withLock { $0 = nil }
            switch ended {
            case .failedToStart(let error):
                await Task { [lease] in await lease.release(last) }.value
                throw error
            case .stopped:
                // In a task of its own: a stop by cancellation must still hand the lease over.
                await Task { [lease] in await lease.release(last) }.value
                if let failure = broker.failure { throw BrokerService.Failure(description: failure) }
                logger.notice("stopped; the lease is released for the standby", metadata: ["epoch": "\(term.epoch)"])
                return
            case .lost:
                logger.notice("stopped after losing the lease; now a standby", metadata: ["epoch": "\(term.epoch)"])
            }
        }
    }

    /// The broker of `term` has started: counted, said, and readiness told the first time.
    private func began(_ term: BrokerLease.Term, _ broker: Broker) {
        terms.withLock { $0 += 1 }
        logger.notice(
            "active: this broker holds the lease", metadata: ["epoch": "\(term.epoch)", "holder": "\(configuration.lease.holder)"])
        if isStopping { broker.requestStop() }
        let first = notified.withLock { notified in
            defer { notified = true }
            return !notified
        }
        if first { onServing() }
    }

    /// Asks for the lease until it is granted; nil when stopping first.
    private func standby() async -> BrokerLease.Term? {
        var said = ""
        while !isStopping {
            do {
                switch try await lease.acquire() {
                case .acquired(let term):
                    standingBy.withLock { $0 = false }
                    return term
                case .held(let holder, let remaining):
                    standingBy.withLock { $0 = true }
                    if said != holder {
                        said = holder
                        logger.notice(
                            "standby: another broker holds the lease; binding nothing until it ends",
                            metadata: ["holder": "\(holder)", "remaining": "\(remaining)"])
                    }
                }
            } catch {
                if said != "\(error)" {
                    said = "\(error)"
                    logger.warning("standby: the lease cannot be asked for", metadata: ["error": "\(error)"])
                }
            }
            try? await Task.sleep(for: configuration.lease.pollEvery)
        }
        return nil
    }

    enum Ended: Sendable {
        case stopped
        case lost(String)
        case failedToStart(any Error)
    }

    /// Starts the term's broker and serves the term: renews the lease from the moment it is
    /// granted (a start slower than the lease, a large journal read under load, would otherwise
    /// lose it before serving), follows the allow-list, until the broker stops or the lease is
    /// lost (then stops the broker). Returns how it ended and the last term renewed.
    private func hold(_ first: BrokerLease.Term, _ broker: Broker) async -> (Ended, BrokerLease.Term) {
        let latest = LatestTerm(first)
        let ended = await withTaskGroup(of: Ended?.self) { group in
            group.addTask { [self] in
                do {
                    _ = try await broker.start()
                } catch {
                    return .failedToStart(error)
                }
                began(first, broker)
                guard let security = broker.security else {
                    await broker.waitUntilStopped()
                    return .stopped
                }
                let watching = Task { await BrokerService.watchDirectory(security, broker: broker) }
                await broker.waitUntilStopped()
                watching.cancel()
                return .stopped
            }
            group.addTask { [lease, configuration] in
                var term = first
                var wait = configuration.lease.renewEvery
                while !Task.isCancelled {
                    let now = ContinuousClock.now
                    try? await Task.sleep(until: min(now + wait, term.deadline))
                    if Task.isCancelled { return nil }
                    if ContinuousClock.now >= term.deadline {
                        return .lost("no renewal succeeded within the lease's \(configuration.lease.ttl)")
                    }
                    do {
                        guard let renewed = try await lease.renew(term) else {
                            return .lost("the lease ended or another broker took it over")
                        }
                        term = renewed
                        latest.term.withLock { $0 = renewed }
                        wait = configuration.lease.renewEvery
                    } catch {
                        // Try again soon, until the deadline.
                        wait = configuration.lease.ttl / 10
                    }
                }
                return nil
            }
            var outcome = Ended.stopped
            while let next = await group.next() {
                guard let next else { continue }
                outcome = next
                break
            }
            // Lost (while starting or serving): no longer serving from this moment (its commits
            // are refused by the epoch check from now on, so it acknowledges nothing more; its
            // readiness says so at once, not once the commit in hand has given up), and the
            // broker stops; the group then waits for the starting and serving task, so nothing
            // of this term runs on into the next.
            if case .lost(let reason) = outcome {
                current.withLock { $0 = nil }
                logger.error(
                    "lease lost: stopped serving (another broker may be active)",
                    metadata: ["epoch": "\(first.epoch)", "reason": "\(reason)"])
                broker.requestStop()
            }
            group.cancelAll()
            while await group.next() != nil {}
            return outcome
        }
        return (ended, latest.term.withLock { $0 })
    }

    /// The term as last renewed (what a graceful stop releases).
    private final class LatestTerm: Sendable {
        let term: Mutex<BrokerLease.Term>
        init(_ term: BrokerLease.Term) { self.term = Mutex(term) }
    }
}
