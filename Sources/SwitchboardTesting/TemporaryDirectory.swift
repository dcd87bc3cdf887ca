public import Foundation

/// A directory under the system's temporary directory, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let url: URL

    public init(_ label: String = "switchboard") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    public var path: String { url.path }

    public func path(_ component: String) -> String { url.appendingPathComponent(component).path }

    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Waits for a condition that another process or thread makes true, checking every
/// `interval`; fails with `message` after `timeout`. For conditions with no event to await
/// (a row count in a file another process writes).
public func waitUntil(
    _ message: @autoclosure () -> String, timeout: Duration = .seconds(30), interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw WaitTimedOut(description: "timed out after \(timeout): \(message())") }
        try await Task.sleep(for: interval)
    }
}

public struct WaitTimedOut: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// Runs `body`, cancelling it and throwing `WaitTimedOut` naming `what` if it has not finished
/// within `timeout`: for a test loop that waits on a stream with no end of its own, so a lost
/// item fails the test instead of hanging the whole run. `body` must end when cancelled.
public func within<T: Sendable>(
    _ timeout: Duration, _ what: @autoclosure () -> String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let description = what()
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw WaitTimedOut(description: "timed out after \(timeout): \(description)")
        }
        return value
    }
}
