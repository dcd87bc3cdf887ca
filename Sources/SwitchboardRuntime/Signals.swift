import UnixSignals

/// Runs `body` until it returns or the process receives SIGINT or SIGTERM, which cancels it.
/// - Returns: the body's result, or nil if a signal ended it.
public func untilInterrupted<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            for await _ in signals { return nil }
            return nil
        }
        defer { group.cancelAll() }
        let first = try await group.next() ?? nil
        return first
    }
}
