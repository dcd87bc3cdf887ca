import Logging
import ServiceLifecycle
public import SwitchboardEmulators

/// A running in-process emulator on a free loopback port, for tests and benchmarks.
public struct RunningEmulator: Sendable {
    public let emulator: Emulator
    public let port: Int
    public let scheme: String

    /// `http://127.0.0.1:PORT` (or https).
    public var baseURL: String { "\(scheme)://127.0.0.1:\(port)" }
}

/// Starts an emulator with the bundled seed (changed by `configure`), runs `body` against it,
/// then stops it (and saves its state, when it has a state file).
public func withEmulator<T: Sendable>(
    _ configure: (inout Emulator.Configuration) throws -> Void = { _ in },
    _ body: (RunningEmulator) async throws -> T
) async throws -> T {
    var configuration = Emulator.Configuration(seed: try EmulatorSeed.bundled())
    configuration.port = 0
    try configure(&configuration)
    let emulator = try Emulator(configuration: configuration)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    // Stopped by graceful shutdown, not by cancelling its task: cancelled, the server drops the
    // connections it accepted but has not served yet, and swift-nio traps on one of them
    // ("Deinited NIOAsyncWriter without calling finish()"), taking the test process with it.
    var logger = Logger(label: "test-emulator")
    logger.logLevel = .critical
    let service = EmulatorService(emulator: emulator) { port in continuation.yield(port) }
    let services = ServiceGroup(configuration: .init(services: [service], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { continuation.finish() }
            try await services.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await group.next()
            throw EmulatorError("the emulator stopped before it listened")
        }
        do {
            let result = try await body(
                RunningEmulator(emulator: emulator, port: port, scheme: configuration.tls == nil ? "http" : "https"))
            await services.triggerGracefulShutdown()
            try await group.waitForAll()
            return result
        } catch {
            await services.triggerGracefulShutdown()
            try? await group.waitForAll()
            throw error
        }
    }
}
