// The broker's event plane: ingest, journal, fan-out and replay on one thread.
//
// All three sockets and the journal live on a single dedicated thread that sleeps in
// `zmq_poll`. That is deliberate: libzmq sockets must stay on one thread, SQLite writes are
// serial anyway, and a single writer makes `bus_seq` assignment and ACK ordering trivially
// correct. Throughput comes from group commit: every wake-up drains up to `batch_limit`
// waiting EVENTs, journals them in one transaction (one fsync), and only then ACKs them and
// publishes them. A slow subscriber can never stall ingest: the fan-out drops for it at its
// high-water mark, and it recovers through HEAD and replay like any late joiner. The checks of
// the next batch (envelope, JSON, schema, role) run on a second thread meanwhile
// (IngestValidation.swift): the sockets and the journal stay on the broker thread.

public import CoreMetrics
import Foundation
public import Logging
public import SwitchboardProtocol
import SwitchboardSecurity
import Synchronization
public import ZeroMQ

/// Counters a running broker keeps; read with `Broker.statistics`.
public struct BrokerStatistics: Sendable, Hashable {
    /// Events newly journaled.
    public var journaled: Int64 = 0
    /// EVENTs that were already journaled (ACKed again with their first `bus_seq`).
    public var duplicates: Int64 = 0
    /// NACKs sent (conflict, unavailable, shutting down).
    public var nacks: Int64 = 0
    /// ERRORs sent for malformed input, by code.
    public var errors: [ProtocolError.Code: Int64] = [:]
    /// Group commits (one transaction each).
    public var commits: Int64 = 0
    /// FETCHes answered.
    public var fetches: Int64 = 0
    /// The journal's head and first retained `bus_seq`.
    public var head: Int64 = 0
    public var first: Int64 = 1
    /// Events deleted by retention.
    public var pruned: Int64 = 0
    /// Events in the journal, and their stored bytes (what `retention.max_bytes` bounds).
    public var journalCount: Int64 = 0
    public var journalBytes: Int64 = 0
}

/// The endpoints a started broker is bound to (with real ports where `*` was asked for).
/// A started broker writes them to `endpoints.json` in its data directory, so programs on the
/// same machine (and tests) can find it.
public struct BrokerEndpoints: Sendable, Hashable, Codable {
    public var ingest: String
    public var fanout: String
    public var replay: String
    /// The Majordomo endpoint of the service plane.
    public var service: String
    /// The consumer-group endpoint (section 15).
    public var groups: String

    public init(ingest: String, fanout: String, replay: String, service: String, groups: String) {
        self.ingest = ingest
        self.fanout = fanout
        self.replay = replay
        self.service = service
        self.groups = groups
    }

    public static func read(from path: String) throws -> BrokerEndpoints {
        try JSONDecoder().decode(BrokerEndpoints.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    func write(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

/// The durable event broker. `start()` opens the journal, binds the endpoints and starts the
/// broker thread; `stop()` asks it to finish and waits. Safe to call from any task.
public final class Broker: Sendable {
    public let configuration: BrokerConfiguration
    private let logger: Logger
    /// The process's ZeroMQ context; its owner (the process's `IOThread`) terminates it after
    /// the broker has stopped.
    private let context: Context
    /// The event plane's thread: it owns every event-plane socket and the journal.
    private let thread: PollThread
    private let state = Mutex(State())
    /// The service plane, on its own thread and socket.
    public let services: ServiceBroker
    /// CURVE keys, allow-list and ZAP decisions; nil when the broker runs without security.
    public let security: BrokerSecurity?
    private let zap = Mutex<ZAPHandler?>(nil)
    /// Where the broker's metrics go (deploy/prometheus/README.md).
    let metricsFactory: any MetricsFactory

    private struct State {
        var statistics = BrokerStatistics()
        /// The journal is open and the endpoints are bound.
        var serving = false
        /// Rebind every endpoint (closing every connection) at the next wake-up.
        var rebindRequested = false
    }

    /// Why the broker thread stopped on its own (a journal or socket failure).
    struct Stopped: Error, CustomStringConvertible {
        var description: String
    }

    /// - Parameters:
    ///   - context: the ZeroMQ context to use (the same as a ZAP handler's, when one is used).
    ///     The broker never terminates it: the process's `IOThread` owns it.
    ///   - metrics: where its metrics go; by default swift-metrics' bootstrapped factory.
    public init(
        configuration: BrokerConfiguration, logger: Logger, context: Context, metrics: any MetricsFactory = MetricsSystem.factory
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        self.logger = logger
        self.metricsFactory = metrics
        self.context = context
        self.thread = try PollThread(name: "broker")
        let security = try configuration.securityKey.map { key in
            try BrokerSecurity(secretFile: key, certificates: configuration.securityCertificates ?? "", logger: logger)
        }
        self.security = security
        security?.attach(thread.wakeUp)
        self.services = try ServiceBroker(
            settings: configuration.serviceSettings, logger: logger, context: context, security: security, metrics: metrics)
    }

    public var statistics: BrokerStatistics { state.withLock { $0.statistics } }

    /// Whether the broker is serving: its journal open, its endpoints bound, not stopped.
    public var isServing: Bool { state.withLock { $0.serving } && !thread.isFinished }

    /// Why the broker thread stopped on its own, if it did (journal failure, socket failure).
    public var failure: String? { thread.failure.map { "\($0)" } }

    /// Opens the journal, binds every endpoint and starts serving.
    /// - Returns: the bound endpoints.
    /// - Throws: when the data directory, the journal or an endpoint cannot be set up; nothing
    ///   keeps running then.
    public func start() async throws -> BrokerEndpoints {
        let serviceEndpoint: String
        do {
            try configuration.preparePrivateFiles()
            if let security {
                // Before any server socket: with no handler, CURVE servers would accept any key.
                let handler = try ZAPHandler.start(context: context, authenticate: security.authenticate)
                zap.withLock { $0 = handler }
            }
            serviceEndpoint = try await services.start()
        } catch {
            // `tearDown` waits for the service plane's thread and for libzmq: on a thread of its
            // own, never on the cooperative pool (two threads on two cores).
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.start(named: "broker-teardown") { [self] in
                    tearDown()
                    continuation.resume()
                }
            }
            throw error
        }
        return try await thread.start { [self] ready in
            // The event plane is down (stopped, failed on its own, or never up): so is the rest.
            defer { tearDown() }
            let core = try BrokerCore(broker: self, serviceEndpoint: serviceEndpoint)
            do {
                try core.endpoints.write(to: configuration.endpointsPath)
            } catch {
                logger.warning(
                    "could not write the endpoints file", metadata: ["path": "\(configuration.endpointsPath)", "error": "\(error)"])
            }
            state.withLock { $0.serving = true }
            ready(core.endpoints)
            if let failure = core.run() { throw Stopped(description: failure) }
        }
    }

    /// Asks the broker to stop: it finishes the batch in hand (so every ACKed event is on disk),
    /// closes its sockets and the journal. Returns at once; `waitUntilStopped()` waits.
    public func requestStop() {
        thread.requestStop()
        services.requestStop()
    }

    /// Waits until the broker thread has exited (or returns at once if it has).
    public func waitUntilStopped() async {
        await thread.waitUntilStopped()
        await services.waitUntilStopped()
    }

    /// Closes every connection to every endpoint: the endpoints are unbound and bound again, so
    /// peers reconnect and pass the ZAP handler anew. Used when the allow-list loses a key: a
    /// revoked principal's open connections end, and its reconnection is refused.
    public func dropAllConnections() {
        state.withLock { $0.rebindRequested = true }
        thread.wakeUp.signal()
        services.dropAllConnections()
    }

    /// Stops the ZAP handler while the endpoints stay up. Only tests use it: they show that the
    /// broker then refuses connections (ZAP enforcement) instead of accepting any key.
    func stopAuthenticator() {
        zap.withLock { handler in
            handler?.stop()
            handler = nil
        }
    }

    /// `requestStop()` then `waitUntilStopped()`.
    public func stop() async {
        requestStop()
        await waitUntilStopped()
    }

    /// Blocks: the broker thread at its end, or a thread of its own (never async code).
    private func tearDown() {
        // The event plane is down (stopped, or failed on its own): the service plane goes too.
        // `waitUntilStopped()` waits for it before it returns, so the context's owner
        // terminates the context only once both planes have closed their sockets.
        services.requestStop()
        zap.withLock { handler in
            handler?.stop()
            handler = nil
        }
    }

    // MARK: Access for the core (on the broker thread)

    var stopRequested: Bool { thread.isStopRequested }
    func takeRebindRequest() -> Bool {
        state.withLock { state in
            defer { state.rebindRequested = false }
            return state.rebindRequested
        }
    }
    func update(_ body: (inout BrokerStatistics) -> Void) { state.withLock { body(&$0.statistics) } }
    var loggerForCore: Logger { logger }
    var contextForCore: Context { context }
    var wakeUpForCore: WakeUpSignal { thread.wakeUp }
}
