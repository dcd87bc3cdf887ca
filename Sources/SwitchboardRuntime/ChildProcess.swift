public import Foundation

/// A program of ours started as a child process, for `switchboard up` and end-to-end tests.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: `process` is a Foundation `Process`, used only through its thread-safe
    // calls (run, signals, termination status after exit); `exited` is guarded by its lock.
    public let name: String
    private let process = Process()
    private let exited = NSCondition()
    private var exitStatus: Int32?

    /// The directory holding our executables: the one this process was started from.
    public static var executableDirectory: URL {
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: resolved).deletingLastPathComponent()
    }

    /// - Parameters:
    ///   - executable: a name (looked up beside this program) or a path.
    ///   - output: where standard output and error go (default: inherited).
    public init(
        name: String, executable: String, arguments: [String], environment: [String: String]? = nil,
        directory: URL? = nil, output: FileHandle? = nil, errors: FileHandle? = nil
    ) {
        self.name = name
        let path = executable.contains("/") ? executable : Self.executableDirectory.appendingPathComponent(executable).path
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = directory }
        if let output { process.standardOutput = output }
        if let errors { process.standardError = errors }
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [exited] finished in
            exited.lock()
            self.exitStatus = finished.terminationStatus
            exited.broadcast()
            exited.unlock()
        }
    }

    /// One `Process.run()` at a time in this process: a full test run, which starts children
    /// from many tasks at once, crashed inside Foundation's `Process.run()` on Linux (a bad
    /// pointer in memcpy while it set up the child). Starting is quick; serialising costs nothing.
    private static let starting = NSLock()

    public func start() throws {
        Self.starting.lock()
        defer { Self.starting.unlock() }
        try process.run()
    }

    public var processIdentifier: Int32 { process.processIdentifier }

    public var isRunning: Bool {
        exited.lock()
        defer { exited.unlock() }
        return exitStatus == nil
    }

    /// Sends a signal (SIGTERM, SIGINT, SIGKILL).
    public func signal(_ signal: Int32) {
        guard isRunning else { return }
        kill(process.processIdentifier, signal)
    }

    /// Waits for the exit without blocking the cooperative pool; nil on time-out.
    public func waitForExit(timeout: Duration) async -> Int32? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32?, Never>) in
            let thread = Thread { [self] in
                let deadline = Date().addingTimeInterval(Double(timeout.wholeMilliseconds) / 1000)
                exited.lock()
                while exitStatus == nil && exited.wait(until: deadline) {}
                let status = exitStatus
                exited.unlock()
                continuation.resume(returning: status)
            }
            thread.start()
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    @discardableResult
    public func stop(grace: Duration = .seconds(10)) async -> Int32? {
        signal(SIGTERM)
        if let status = await waitForExit(timeout: grace) { return status }
        signal(SIGKILL)
        return await waitForExit(timeout: .seconds(5))
    }
}
