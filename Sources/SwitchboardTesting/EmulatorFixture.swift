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
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { continuation.finish() }
            try await emulator.run { port in continuation.yield(port) }
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await group.next()
            throw EmulatorError("the emulator stopped before it listened")
        }
        do {
            let result = try await body(
                RunningEmulator(emulator: emulator, port: port, scheme: configuration.tls == nil ? "http" : "https"))
            group.cancelAll()
            try await group.waitForAll()
            return result
        } catch {
            group.cancelAll()
            try? await group.waitForAll()
            throw error
        }
    }
}
