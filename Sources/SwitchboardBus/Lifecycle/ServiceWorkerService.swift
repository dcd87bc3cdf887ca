// A Majordomo worker (`ServiceWorker`) as a service of a worker process's `ServiceGroup`: on
// graceful shutdown it finishes the request in hand, tells the broker DISCONNECT, and returns.

public import ServiceLifecycle

public struct ServiceWorkerService: Service {
    public let worker: ServiceWorker

    public init(worker: ServiceWorker) { self.worker = worker }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await worker.run()
        } onGracefulShutdown: {
            worker.stop()
        }
    }
}
