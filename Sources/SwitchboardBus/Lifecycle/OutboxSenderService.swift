// An `OutboxSender` as a service of a program's `ServiceGroup`: it sends for as long as the
// program runs; on graceful shutdown it stops once nothing is left to send. Put it first in the
// group: services stop in reverse order, so it is the last to stop and sends what the others
// enqueued on their way out. The group's deadline cuts short a wait for an absent broker; what
// is left stays in the outbox for the next start.

public import ServiceLifecycle
import Synchronization

public struct OutboxSenderService: Service {
    public let sender: OutboxSender

    public init(sender: OutboxSender) { self.sender = sender }

    public func run() async throws {
        let stopping = Atomic<Bool>(false)
        try await withGracefulShutdownHandler {
            _ = try await sender.deliver(keepWaiting: { !stopping.load(ordering: .acquiring) })
        } onGracefulShutdown: {
            stopping.store(true, ordering: .releasing)
        }
    }
}
