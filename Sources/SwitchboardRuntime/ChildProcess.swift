import CSpawn
public import Foundation

/// A program of ours started as a child process, for `switchboard up` and end-to-end tests.
///
/// Started with `posix_spawn`, not Foundation's `Process`: on Linux, `Process.run()` (Swift
/// 6.3.1) reads past a buffer while it lists `/proc/self/fd` and now and then kills the parent
/// with SIGSEGV (swift-corelibs-foundation #5472); a full test run, which starts children with
/// many descriptors open, hit it. The child gets standard input from /dev/null, the given output
/// and error descriptors, every signal at its default and none blocked, and no other descriptor
/// of ours (closefrom 3).
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: the mutable state (`pid`, `exitStatus`, `waitStatus`, `exitHandlers`) is guarded
    // by `exited`.
    public let name: String
    private let path: String
    private let arguments: [String]
    private let environment: [String: String]
    private let directory: URL?
    private let output: FileHandle?
    private let errors: FileHandle?
    private let exited = NSCondition()
    private var pid: pid_t = 0
    private var exitStatus: Int32?
    /// waitpid's status, which tells an exit code from a signal (`exitStatus` does not).
    private var waitStatus: Int32?
    private var exitHandlers: [@Sendable (Int32) -> Void] = []

    /// The directory holding our executables: the one this process was started from.
    public static var executableDirectory: URL {
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: resolved).deletingLastPathComponent()
    }

    /// Why a child could not be started.
    public struct StartFailure: Error, CustomStringConvertible {
        public var description: String
    }

    /// - Parameters:
    ///   - executable: a name (looked up beside this program) or a path.
    ///   - environment: the child's whole environment (a program passes its own on, or a part).
    ///   - output: where standard output and error go (default: inherited).
    public init(
        name: String, executable: String, arguments: [String], environment: [String: String],
        directory: URL? = nil, output: FileHandle? = nil, errors: FileHandle? = nil
    ) {
        self.name = name
        self.path = executable.contains("/") ? executable : Self.executableDirectory.appendingPathComponent(executable).path
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.output = output
        self.errors = errors
    }

    /// Starts the child and a thread that waits for its exit.
    /// - Throws: `StartFailure` naming the program and the reason (no such file, not executable…).
    public func start() throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let output { posix_spawn_file_actions_adddup2(&actions, output.fileDescriptor, 1) }
        if let errors { posix_spawn_file_actions_adddup2(&actions, errors.fileDescriptor, 2) }
        if let directory, switchboard_spawn_add_chdir(&actions, directory.path) != 0 {
            throw StartFailure(description: "\(name): cannot start in \(directory.path)")
        }
        switchboard_spawn_add_closefrom(&actions, 3)
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        var noSignal = sigset_t()
        sigemptyset(&noSignal)
        posix_spawnattr_setsigmask(&attributes, &noSignal)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let environment = environment.map { "\($0.key)=\($0.value)" }
        var child: pid_t = 0
        let result = Self.withCStrings([path] + arguments) { argv in
            Self.withCStrings(environment) { envp in posix_spawn(&child, path, &actions, &attributes, argv, envp) }
        }
        guard result == 0 else {
            throw StartFailure(description: "\(name): cannot start \(path): \(String(cString: strerror(result)))")
        }
        exited.lock()
        pid = child
        exited.unlock()
        let reaper = Thread { [self, child] in
            var status: Int32 = 0
            while waitpid(child, &status, 0) == -1 && errno == EINTR {}
            exited.lock()
            let code = Self.exitCode(status)
            exitStatus = code
            waitStatus = status
            let handlers = exitHandlers
            exitHandlers = []
            exited.broadcast()
            exited.unlock()
            for handler in handlers { handler(code) }
        }
        reaper.name = "child-\(name)"
        reaper.start()
    }

    /// The exit code, or the number of the signal that ended it (as Foundation's `Process` says).
    private static func exitCode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// A NULL-terminated array of C strings for `body`, freed after it.
    private static func withCStrings<Result>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> Result) -> Result {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        return body(pointers)
    }

    public var processIdentifier: Int32 {
        exited.lock()
        defer { exited.unlock() }
        return pid
    }

    /// How a child ended: by exiting or by a signal.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        case exited(code: Int32)
        case signalled(Int32)

        public var description: String {
            switch self {
            case .exited(let code): "exit code \(code)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    /// How it ended, once it has (set before the exit handlers are called).
    public var termination: Termination? {
        exited.lock()
        defer { exited.unlock() }
        guard let waitStatus else { return nil }
        let signal = waitStatus & 0x7f
        return signal == 0 ? .exited(code: (waitStatus >> 8) & 0xff) : .signalled(signal)
    }

    public var isRunning: Bool {
        exited.lock()
        defer { exited.unlock() }
        return pid != 0 && exitStatus == nil
    }

    /// Sends a signal (SIGTERM, SIGINT, SIGKILL) while the child runs (never to a reaped pid).
    public func signal(_ signal: Int32) {
        exited.lock()
        defer { exited.unlock() }
        guard pid != 0, exitStatus == nil else { return }
        kill(pid, signal)
    }

    /// Calls `handler` with the exit code once the child has exited (at once if it has), on the
    /// thread that reaped it; it must not block.
    public func onExit(_ handler: @escaping @Sendable (Int32) -> Void) {
        exited.lock()
        guard let code = exitStatus else {
            exitHandlers.append(handler)
            exited.unlock()
            return
        }
        exited.unlock()
        handler(code)
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
