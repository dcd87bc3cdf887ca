public import ServiceLifecycle

/// Runs a `Broker` as a service of a `ServiceGroup`: graceful shutdown (SIGTERM, SIGINT) and
/// cancellation both stop it the same way, after the batch in hand is durable and answered.
public struct BrokerService: Service {
    public let broker: Broker

    public init(broker: Broker) {
        self.broker = broker
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public func run() async throws {
        _ = try await broker.start()
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await broker.waitUntilStopped()
            } onGracefulShutdown: {
                broker.requestStop()
            }
        } onCancel: {
            broker.requestStop()
        }
        if let failure = broker.failure { throw Failure(description: failure) }
    }
}
