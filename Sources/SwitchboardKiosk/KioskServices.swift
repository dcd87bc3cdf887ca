// The kiosk as a long-running program (`serve`, and `demo`) is one ServiceGroup of three
// services after the process's I/O thread: the admin server, the delivery of the outbox, and
// (in `demo`) the recording of check-ins. A group shuts its services down gracefully in the reverse of their order, so on
// SIGTERM the recorder stops first (a check-in being saved is saved; no new one begins), then
// the delivery sends what is waiting for as long as its drain time allows, and the admin server
// goes last, answering /health and /metrics until the work has stopped. Whatever is not
// delivered by then stays in the outbox for the next run: nothing recorded is lost, and nothing
// the broker acknowledged is sent again except as a duplicate it recognises.

public import CoreMetrics
public import Logging
public import ServiceLifecycle
public import SwitchboardBus
public import SwitchboardObservability
import SwitchboardProtocol
import Synchronization
public import ZeroMQ

/// Sends an outbox to the broker until graceful shutdown, then drains it.
///
/// On graceful shutdown it stops waiting for new events and keeps sending until the outbox has
/// nothing pending and nothing in flight, or `drainTime` has passed; then it returns. On
/// cancellation it stops at once. Either way what was not acknowledged stays in the outbox.
/// Its socket is on the process's I/O thread, which goes before it in the group.
public final class KioskDelivery: Service, Sendable {
    public let sender: OutboxSender
    /// How long graceful shutdown may spend sending what is waiting.
    public let drainTime: Duration
    private let logger: Logger

    /// - Parameters:
    ///   - io: the process's I/O thread.
    ///   - metrics: where the outbox metrics go.
    public init(
        io: IOThread, outbox: Outbox, endpoint: String, settings: OutboxSender.Settings = .init(), drainTime: Duration = .seconds(5),
        logger: Logger, metrics: any MetricsFactory
    ) {
        sender = OutboxSender(outbox: outbox, io: io, endpoint: endpoint, settings: settings, logger: logger, metrics: metrics)
        self.drainTime = drainTime
        self.logger = logger
    }

    /// Whether the broker answers (the kiosk's readiness).
    public var isConnected: Bool { sender.isConnected }

    public func run() async throws {
        let draining = Flag()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { [sender] in
                    _ = try await sender.deliver(keepWaiting: { !draining.isSet })
                }
                group.addTask { [drainTime] in
                    // Cancelled instead: the delivery ended (an error), or the group is cancelled.
                    guard (try? await gracefulShutdown()) != nil else { return }
                    draining.set()
                    try? await Task.sleep(for: drainTime)
                }
                // The first to end decides: the delivery drained, or the drain time ran out.
                try await group.next()
                group.cancelAll()
                try await group.waitForAll()
            }
        } catch is CancellationError {
            // The drain time ran out, or the group was cancelled: what is left stays queued.
        }
        let waiting = (try? await sender.outbox.counts().pending) ?? -1
        logger.info("outbox delivery stopped", metadata: ["waiting": "\(waiting)", "drained": "\(waiting == 0)"])
    }

    /// Sends what `outbox` holds until nothing is pending or `wait` has passed, on an I/O
    /// thread of its own (shut down on every way out): what a kiosk command that records once
    /// (`checkin`, `import`, `flush`, `load`) does before it exits.
    /// - Parameter keepWaiting: asked when the outbox is empty: true waits for more (a load
    ///   run still generating).
    public static func deliver(
        _ outbox: Outbox, endpoint: String, settings: OutboxSender.Settings = .init(), within wait: Duration,
        keepWaiting: @escaping @Sendable () -> Bool = { false }, logger: Logger
    ) async throws -> DeliveryReport {
        try await IOThread.withIOThread { io in
            let sender = OutboxSender(outbox: outbox, io: io, endpoint: endpoint, settings: settings, logger: logger)
            return try await sender.deliver(until: .now + wait, keepWaiting: keepWaiting)
        }
    }
}

/// A boolean set once, read from any thread (the sender asks it from its loop).
private final class Flag: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Records a check-in every `interval` until graceful shutdown or cancellation: the demo kiosk.
///
/// Shutdown cuts the wait between check-ins short, never an enqueue in progress: a check-in it
/// began to save is saved (the outbox's transaction), and none is begun after.
public struct CheckInTrickle: Service {
    public let outbox: Outbox
    public let kioskID: String
    public let interval: Duration
    /// The people to check in, in turn; nil: `SyntheticCheckIns`.
    public let roster: CheckInRoster?
    /// Where in the roster (or the synthetic people) to begin.
    public let startIndex: Int

    public init(outbox: Outbox, kioskID: String, interval: Duration, roster: CheckInRoster?, startIndex: Int = .random(in: 0..<1000)) {
        self.outbox = outbox
        self.kioskID = kioskID
        self.interval = interval
        self.roster = roster
        self.startIndex = startIndex
    }

    public func run() async throws {
        var index = startIndex
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let checkIn = try roster?.checkIn(index, kioskID: kioskID) ?? SyntheticCheckIns.make(index: index, kioskID: kioskID)
            try await outbox.enqueue([.checkIn(checkIn)])
            index += 1
            do {
                try await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
            } catch is CancellationError {
                return
            }
        }
    }
}

/// The services of a long-running kiosk, in start order (shutdown goes in reverse; see the
/// top of this file).
public struct KioskServices: Sendable {
    /// Serves /metrics and /health (ready: the broker answers); nil with `--admin none`.
    public let admin: AdminServer?
    public let delivery: KioskDelivery
    /// Records check-ins (the demo); nil for a kiosk that only sends (`serve`).
    public let recorder: CheckInTrickle?

    /// - Parameters:
    ///   - io: the process's I/O thread (a service before these).
    ///   - endpoint: the broker's ingest endpoint.
    ///   - settings: the sender's settings (CURVE keys among them).
    ///   - admin: where to serve /metrics and /health, or nil for nowhere.
    ///   - observability: the program's metrics registry.
    ///   - onListening: called once the admin server has bound its address (never with no admin).
    public init(
        io: IOThread, outbox: Outbox, endpoint: String, settings: OutboxSender.Settings = .init(), drainTime: Duration = .seconds(5),
        admin: AdminAddress?, observability: Observability, recorder: CheckInTrickle?, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        let delivery = KioskDelivery(
            io: io, outbox: outbox, endpoint: endpoint, settings: settings, drainTime: drainTime, logger: logger,
            metrics: observability.factory)
        var readiness = Readiness()
        readiness.add("broker") { delivery.isConnected }
        // What the outbox has held over its life (waiting, refused and delivered), which other
        // kiosk commands add to.
        let recorded = TotalCounter(label: "switchboard_kiosk_checkins_total", factory: observability.factory)
        self.admin = observability.adminServer(
            at: admin, readiness: readiness,
            collectors: [
                { await delivery.sender.updateDepth() },
                {
                    if let counts = try? await outbox.counts() {
                        recorded.update(total: Double(counts.pending + counts.rejected) + Double(counts.delivered))
                    }
                },
            ], logger: logger, onListening: onListening)
        self.delivery = delivery
        self.recorder = recorder
    }

    /// The services in start order (admin server, delivery, recorder), named, with what their
    /// ending does to the group.
    public var configurations: [ServiceGroupConfiguration.ServiceConfiguration] {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let admin { services.append(.init(service: admin, serviceName: "admin")) }
        services.append(.init(service: delivery, serviceName: "delivery"))
        if let recorder {
            // A recorder that fails (a full disk) leaves the delivery its drain, not a cancellation.
            services.append(.init(service: recorder, failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "recorder"))
        }
        return services
    }

    /// How long a kiosk program's graceful shutdown may take before what is left is cancelled:
    /// under what a supervisor grants before SIGKILL (`switchboard up` and systemd give 10 s).
    public static let shutdownDeadline: Duration = .seconds(8)
}
