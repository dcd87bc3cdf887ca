// The emulator as a service of a `ServiceGroup`. Stop it by graceful shutdown, never by
// cancelling its task: cancelled, the server drops connections it accepted but has not served
// yet, and swift-nio traps on one of them ("Deinited NIOAsyncWriter without calling finish()").

public import ServiceLifecycle

public struct EmulatorService: Service {
    public let emulator: Emulator
    let onListening: @Sendable (Int) async -> Void

    /// - Parameter onListening: called with the bound port once the server listens.
    public init(emulator: Emulator, onListening: @escaping @Sendable (Int) async -> Void = { _ in }) {
        self.emulator = emulator
        self.onListening = onListening
    }

    public func run() async throws { try await emulator.run(onListening: onListening) }
}
