// The Directory → bus half of `switchboard-directory` as a `Service` of its group: a poll, then
// `interval` of rest, again. Graceful shutdown (SIGTERM) ends the rest at once but never cuts a
// poll short, so a poll's facts and its snapshot are written together or not started.

public import ServiceLifecycle

public struct DirectoryPoller: Service {
    public let syncer: DirectorySyncer
    public let interval: Duration

    public init(syncer: DirectorySyncer, interval: Duration) {
        self.syncer = syncer
        self.interval = interval
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            await syncer.poll()
            let interval = self.interval
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }
}
