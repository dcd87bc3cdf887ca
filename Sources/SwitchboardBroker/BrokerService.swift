public import ServiceLifecycle
import SwitchboardSecurity
import UnixSignals

/// Runs a `Broker` as a service of a `ServiceGroup`: graceful shutdown (SIGTERM, SIGINT) and
/// cancellation both stop it the same way, after the batch in hand is durable and answered.
public struct BrokerService: Service {
    public let broker: Broker
    /// Called once the broker has bound its endpoints (and written `endpoints.json`).
    let onServing: @Sendable () -> Void

    /// - Parameter onServing: called once every endpoint is bound, e.g. to tell a supervisor
    ///   the broker is ready (`ServiceReadiness.notify(.ready)`).
    public init(broker: Broker, onServing: @escaping @Sendable () -> Void = {}) {
        self.broker = broker
        self.onServing = onServing
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public func run() async throws {
        _ = try await broker.start()
        onServing()
        await withDiscardingTaskGroup { group in
            // The allow-list follows its directory: reloaded on SIGHUP and when a file changes.
            if let security = broker.security {
                group.addTask { [broker] in await Self.watch(security, broker: broker) }
            }
            await withTaskCancellationHandler {
                await withGracefulShutdownHandler {
                    await broker.waitUntilStopped()
                } onGracefulShutdown: {
                    broker.requestStop()
                }
            } onCancel: {
                broker.requestStop()
            }
            group.cancelAll()
        }
        if let failure = broker.failure { throw Failure(description: failure) }
    }

    static func watch(_ security: BrokerSecurity, broker: Broker) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in await UnixSignalsSequence(trapping: .sighup) { reload(security, broker: broker, reason: "SIGHUP") }
            }
            group.addTask { await watchDirectory(security, broker: broker) }
        }
    }

    /// Reloads the allow-list; a revoked key's open connections are closed, so every peer
    /// reconnects through ZAP.
    static func reload(_ security: BrokerSecurity, broker: Broker, reason: String) {
        if !security.reload(reason: reason).isEmpty { broker.dropAllConnections() }
    }

    /// Reloads the allow-list when its directory changes (looked at every second).
    static func watchDirectory(_ security: BrokerSecurity, broker: Broker) async {
        var fingerprint = security.allowList.fingerprint()
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            let now = security.allowList.fingerprint()
            if now != fingerprint {
                fingerprint = now
                reload(security, broker: broker, reason: "the certificate directory changed")
            }
        }
    }
}
