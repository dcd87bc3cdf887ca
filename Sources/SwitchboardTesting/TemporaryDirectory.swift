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
