// Starting a worker when its peers may not be up yet. `switchboard up` (and systemd, and a
// cluster scheduler) start the broker, auth and the workers together, so a worker's first
// token.get can find no auth yet: it keeps trying for a bounded time, while a configuration
// error (a mapping naming a field the layout lacks) stops it at once with the setting named.

public import Logging
public import ServiceLifecycle
public import SwitchboardBus
import SwitchboardProtocol
public import SwitchboardRuntime

public enum WorkerStart {
    /// Runs `body` until it succeeds, throws a non-retryable error, or `limit` has passed.
    public static func retrying<T: Sendable>(
        for limit: Duration, logger: Logger, _ body: () async throws(WorkerConfigurationError) -> T
    ) async throws(WorkerConfigurationError) -> T {
        let deadline = ContinuousClock.now + limit
        var delay = Duration.milliseconds(200)
        while true {
            do {
                return try await body()
            } catch  where error.retryable && ContinuousClock.now + delay < deadline {
                logger.notice("not ready yet; trying again", metadata: ["reason": "\(error.description)", "in": "\(delay)"])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            } catch  where error.retryable {
                throw WorkerConfigurationError("gave up after \(limit): \(error.description)")
            }
        }
    }

    /// Logs the worker's group membership as it changes: "ready" when the broker says JOINED
    /// (what an operator waits for; a supervisor is told READY=1 then), and each rejoin with
    /// its reason.
    public struct ReadyLog: Service {
        let consumer: GroupConsumer
        let readiness: ServiceReadiness.Notifier
        let logger: Logger

        /// - Parameter readiness: where to say READY=1 (the program's NOTIFY_SOCKET).
        public init(consumer: GroupConsumer, readiness: ServiceReadiness.Notifier, logger: Logger) {
            self.consumer = consumer
            self.readiness = readiness
            self.logger = logger
        }

        public func run() async throws {
            for await notice in consumer.notices.cancelOnGracefulShutdown() {
                switch notice {
                case .joined(let joined):
                    readiness.notify(.ready, .status("joined group \(joined.group)"))
                    logger.info(
                        "ready: joined the group",
                        metadata: [
                            "group": "\(joined.group)", "member": "\(joined.member)", "credit": "\(joined.credit)",
                            "cursor": "\(joined.cursor)", "head": "\(joined.head)",
                        ])
                case .rejoining(let reason):
                    logger.notice("rejoining the group", metadata: ["reason": "\(reason)"])
                case .refused(let code, let message):
                    logger.notice("the broker refused a settle", metadata: ["code": "\(code)", "message": "\(message)"])
                }
            }
            // The notices end when the consumer stops; wait for the group to stop too rather
            // than ending early, which a service group would take for a failure.
            try? await gracefulShutdown()
        }
    }
}
