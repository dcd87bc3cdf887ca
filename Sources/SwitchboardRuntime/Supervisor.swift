// Runs programs as child processes and knows, without polling, when each is ready and when one
// has exited: what `switchboard up` does with the broker, emulators, auth, workers, monitor and
// kiosk. Each child gets NOTIFY_SOCKET naming a datagram socket of its own (in a private
// directory), so whatever arrives there is that child's, with no need to match the sender's
// pid: a helper a child starts may speak for it, as with systemd's NotifyAccess=all. Readiness
// is what the child says (READY=1, see ServiceReadiness), not a log line or a file.
//
// `keepRunning` restarts a child that exits on its own, as the systemd units do
// (`Restart=on-failure`): each child has a `RestartPolicy` that says when, and when to give up.
// A restarted child keeps its name and its notify socket, so whatever waits for it by name
// follows the new process.

public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Starts child processes, follows what they report on the notify protocol and their exits,
/// and stops them in the reverse of their start.
///
/// All of its methods may be called from any task; the waits suspend the calling task without
/// blocking a thread, and end early when it is cancelled.
public final class Supervisor: Sendable {
    /// A program to run.
    public struct Program: Sendable {
        /// The name the supervisor knows it by (unique among its children).
        public var name: String
        /// A name (looked up beside this program) or a path; see `ChildProcess`.
        public var executable: String
        public var arguments: [String]
        /// The arguments of a restart, when they differ from the first start's (e.g. reuse what
        /// the first start made); nil: `arguments`.
        public var restartArguments: [String]?
        /// The child's environment without NOTIFY_SOCKET, which the supervisor sets (default: the
        /// supervisor's `environment`).
        public var environment: [String: String]?
        /// Where its standard output and error go (default: inherited).
        public var output: FileHandle?
        public var errors: FileHandle?
        /// How long `stopAll` waits after SIGTERM before SIGKILL.
        public var stopGrace: Duration
        /// When `keepRunning` restarts it, and when it gives up.
        public var restart: RestartPolicy.Configuration

        public init(
            name: String, executable: String, arguments: [String], environment: [String: String]? = nil, output: FileHandle? = nil,
            errors: FileHandle? = nil, stopGrace: Duration = .seconds(10), restart: RestartPolicy.Configuration = .init(),
            restartArguments: [String]? = nil
        ) {
            self.name = name
            self.executable = executable
            self.arguments = arguments
            self.environment = environment
            self.output = output
            self.errors = errors
            self.stopGrace = stopGrace
            self.restart = restart
            self.restartArguments = restartArguments
        }
    }

    /// What a child has said and whether it runs.
    public struct Status: Sendable, Hashable {
        /// It sent READY=1.
        public var ready = false
        /// It sent STOPPING=1.
        public var stopping = false
        /// Its last STATUS=.
        public var status: String?
        /// Its exit code (or the signal that ended it), once it has exited.
        public var exitCode: Int32?
        /// The times `keepRunning` started it again.
        public var restarts = 0
        /// It exited and `keepRunning` will start it again after a delay.
        public var restartScheduled = false
    }

    /// What `keepRunning` did, for its caller to tell the operator.
    public enum Event: Sendable, Hashable {
        /// A child exited on its own (`termination` nil: unknown), and what the policy said.
        case exited(name: String, termination: ChildProcess.Termination?, action: RestartPolicy.Action)
        /// It was started again, as this process.
        case restarted(name: String, pid: Int32, restarts: Int)
        /// It could not be started again; this counts as another exit.
        case restartFailed(name: String, reason: String)
        /// The restarted child said READY=1 this long after it was started again.
        case ready(name: String, pid: Int32, after: Duration)
    }

    /// Why `keepRunning` stopped restarting: a child that kept exiting.
    public struct GaveUp: Sendable, Hashable {
        public var name: String
        public var termination: ChildProcess.Termination?
        /// The restarts within `window` before its last exit.
        public var restarts: Int
        public var window: Duration
    }

    /// How a wait for readiness ended.
    public enum Readiness: Sendable, Hashable {
        case ready
        /// It exited first, with this code.
        case exited(Int32)
        case timedOut
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    private struct Child {
        let program: Program
        var process: ChildProcess
        let socket: NotifySocket
        var status = Status()
        var policy: RestartPolicy
    }

    private struct Waiter {
        let id: Int
        let isSatisfied: @Sendable ([String: Status]) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var children: [Child] = []
        var waiters: [Waiter] = []
        /// Waits cancelled before they were registered.
        var cancelled: Set<Int> = []
        var nextWaiter = 0

        var statuses: [String: Status] {
            Dictionary(uniqueKeysWithValues: children.map { ($0.program.name, $0.status) })
        }
    }

    /// The private directory holding the children's notify sockets (0700: only this user may
    /// speak to them).
    public let runtimeDirectory: String
    private let state = Mutex(State())

    /// The environment of every child that does not name its own: the program's, passed in.
    private let environment: [String: String]

    /// Makes the runtime directory under `parent` (default: the temporary directory, or /tmp
    /// when that is too long a path for a socket address).
    /// - Parameter environment: what the children inherit (`up` passes its own environment).
    public init(parent: String? = nil, environment: [String: String]) throws(Failure) {
        self.environment = environment
        var base = parent ?? FileManager.default.temporaryDirectory.path
        if parent == nil && base.utf8.count > 60 { base = "/tmp" }
        var template = Array((base + "/switchboard-supervisor.XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "cannot make a directory in \(base): \(String(cString: strerror(errno)))")
        }
        runtimeDirectory = String(cString: made)
    }

    deinit {
        for child in state.withLock({ $0.children }) { child.socket.stop() }
        try? FileManager.default.removeItem(atPath: runtimeDirectory)
    }

    /// Starts `program` with NOTIFY_SOCKET set to a socket of its own.
    /// - Throws: `Failure` for a name already used or a socket that cannot be made;
    ///   `ChildProcess.StartFailure` when the program cannot be started.
    @discardableResult
    public func start(_ program: Program) throws -> ChildProcess {
        let (index, taken) = state.withLock { ($0.children.count, $0.children.contains { $0.program.name == program.name }) }
        guard !taken else { throw Failure(description: "a child named \(program.name) was already started") }
        // Numbered, not named: a program's name could be anything, and a socket path is short.
        let path = "\(runtimeDirectory)/\(index).notify"
        let socket = try NotifySocket(path: path) { [weak self] assignments in
            self?.update(program.name) { status in
                if assignments["READY"] == "1" { status.ready = true }
                if assignments["STOPPING"] == "1" { status.stopping = true }
                if let text = assignments["STATUS"] { status.status = text }
            }
        }
        let process = Self.launch(program, socketPath: path, environment: environment)
        do {
            try process.start()
        } catch {
            socket.stop()
            throw error
        }
        var policy = RestartPolicy(program.restart)
        policy.started(at: .now)
        state.withLock { $0.children.append(Child(program: program, process: process, socket: socket, policy: policy)) }
        process.onExit { [weak self] code in self?.update(program.name) { $0.exitCode = code } }
        return process
    }

    /// A process for `program` (not yet started, `again`: a restart) whose NOTIFY_SOCKET is
    /// `socketPath`.
    private static func launch(
        _ program: Program, socketPath: String, environment inherited: [String: String], again: Bool = false
    ) -> ChildProcess {
        var environment = program.environment ?? inherited
        environment[ServiceReadiness.socketVariable] = socketPath
        return ChildProcess(
            name: program.name, executable: program.executable,
            arguments: again ? program.restartArguments ?? program.arguments : program.arguments, environment: environment,
            output: program.output, errors: program.errors)
    }

    /// The running process of each child, by name (the latest, after a restart).
    public var processes: [String: ChildProcess] {
        state.withLock { Dictionary(uniqueKeysWithValues: $0.children.map { ($0.program.name, $0.process) }) }
    }

    /// Restarts every child that exits on its own, as its program's `RestartPolicy` says, until
    /// the task is cancelled (nil) or a child exits once too often (that child). Every exit,
    /// restart and return to readiness goes to `report`, which must not block.
    ///
    /// Restarts already waiting out their delay are abandoned when it returns, so a `stopAll`
    /// after it stops what runs and starts nothing. Call `stopAll` only then: while this runs,
    /// a child that `stopAll` ends is an exit like any other, and is restarted.
    public func keepRunning(report: @escaping @Sendable (Event) -> Void) async -> GaveUp? {
        await withDiscardingTaskGroup(returning: GaveUp?.self) { group in
            while !Task.isCancelled {
                _ = await wait(timeout: nil) { statuses in statuses.values.contains { $0.exitCode != nil && !$0.restartScheduled } }
                guard !Task.isCancelled else { break }
                for (name, termination, action) in decideExits() {
                    report(.exited(name: name, termination: termination, action: action))
                    switch action {
                    case .giveUp(let restarts, let window):
                        group.cancelAll()
                        return GaveUp(name: name, termination: termination, restarts: restarts, window: window)
                    case .restart(let delay, _, _, _):
                        group.addTask { await self.restart(name, after: delay, report: report) }
                    }
                }
            }
            group.cancelAll()
            return nil
        }
    }

    /// Asks the policy of each child that exited and has no restart scheduled; marks those it
    /// restarts as scheduled, so the next wait does not see them again.
    private func decideExits() -> [(String, ChildProcess.Termination?, RestartPolicy.Action)] {
        let now = ContinuousClock.now
        return state.withLock { state in
            var decisions: [(String, ChildProcess.Termination?, RestartPolicy.Action)] = []
            for index in state.children.indices where state.children[index].status.exitCode != nil {
                guard !state.children[index].status.restartScheduled else { continue }
                let action = state.children[index].policy.exited(at: now)
                if case .restart = action { state.children[index].status.restartScheduled = true }
                decisions.append((state.children[index].program.name, state.children[index].process.termination, action))
            }
            return decisions
        }
    }

    /// Waits out `delay` (nothing if cancelled first), starts `name` again and reports when it is
    /// ready.
    private func restart(_ name: String, after delay: Duration, report: @Sendable (Event) -> Void) async {
        guard (try? await Task.sleep(for: delay)) != nil else { return }
        let started = ContinuousClock.now
        let process: ChildProcess
        do {
            process = try relaunch(name, at: started)
        } catch {
            report(.restartFailed(name: name, reason: "\(error)"))
            // Seen again by `keepRunning` as an exit: the policy backs off or gives up.
            update(name) { $0.restartScheduled = false }
            return
        }
        let restarts = statuses[name]?.restarts ?? 0
        report(.restarted(name: name, pid: process.processIdentifier, restarts: restarts))
        // Nothing to tell when it exits first (that exit is reported) or is cancelled.
        if await waitUntilReady(name, timeout: .seconds(120)) == .ready, process.isRunning {
            report(.ready(name: name, pid: process.processIdentifier, after: started.duration(to: .now)))
        }
    }

    /// Starts the exited child `name` again on its notify socket, with a fresh status.
    private func relaunch(_ name: String, at now: ContinuousClock.Instant) throws -> ChildProcess {
        let found = state.withLock { state in
            state.children.firstIndex { $0.program.name == name }.map { ($0, state.children[$0].program) }
        }
        guard case let (index, program)? = found else { throw Failure(description: "no child named \(name)") }
        // The socket path is the one `start` gave it: numbered by its place among the children.
        let process = Self.launch(program, socketPath: "\(runtimeDirectory)/\(index).notify", environment: environment, again: true)
        // A fresh status before the start, so a READY=1 the new process sends at once is kept.
        let previous = state.withLock { state in
            defer {
                state.children[index].status = Status(restarts: state.children[index].status.restarts + 1)
                state.children[index].process = process
                state.children[index].policy.started(at: now)
            }
            return (state.children[index].status, state.children[index].process)
        }
        do {
            try process.start()
        } catch {
            state.withLock { state in
                state.children[index].status = previous.0
                state.children[index].process = previous.1
            }
            throw error
        }
        process.onExit { [weak self] code in self?.update(name) { $0.exitCode = code } }
        return process
    }

    /// What each child has said, by name.
    public var statuses: [String: Status] { state.withLock { $0.statuses } }

    /// The names of the children that have exited, in start order.
    public var exited: [String] {
        state.withLock { $0.children.filter { $0.status.exitCode != nil }.map(\.program.name) }
    }

    /// Waits until the child `name` says READY=1, exits, or `timeout` passes (a name never
    /// started: `.timedOut` at once).
    public func waitUntilReady(_ name: String, timeout: Duration) async -> Readiness {
        _ = await wait(timeout: timeout) { statuses in statuses[name].map { $0.ready || $0.exitCode != nil } ?? true }
        guard let status = statuses[name] else { return .timedOut }
        if status.ready { return .ready }
        if let code = status.exitCode { return .exited(code) }
        return .timedOut
    }

    /// Waits until any child exits, or `timeout` (nil: no limit) passes, or the task is cancelled.
    /// - Returns: the names of the children that have exited, in start order.
    @discardableResult
    public func waitUntilAnyExits(timeout: Duration? = nil) async -> [String] {
        _ = await wait(timeout: timeout) { statuses in statuses.values.contains { $0.exitCode != nil } }
        return exited
    }

    /// Stops every child, one at a time in the reverse of their start: SIGTERM, then SIGKILL
    /// after its `stopGrace`. Then closes the notify sockets.
    /// - Returns: each child's exit code (nil: it did not exit even after SIGKILL).
    @discardableResult
    public func stopAll() async -> [String: Int32?] {
        var codes: [String: Int32?] = [:]
        for child in state.withLock({ $0.children }).reversed() {
            codes[child.program.name] = await child.process.stop(grace: child.program.stopGrace)
            child.socket.stop()
        }
        return codes
    }

    /// Changes one child's status and resumes the waits it satisfies.
    private func update(_ name: String, _ change: (inout Status) -> Void) {
        let satisfied = state.withLock { state -> [Waiter] in
            guard let index = state.children.firstIndex(where: { $0.program.name == name }) else { return [] }
            change(&state.children[index].status)
            let statuses = state.statuses
            let (ready, waiting) = (state.waiters.filter { $0.isSatisfied(statuses) }, state.waiters.filter { !$0.isSatisfied(statuses) })
            state.waiters = waiting
            return ready
        }
        for waiter in satisfied { waiter.continuation.resume() }
    }

    /// Waits until `condition` holds of the statuses; false when `timeout` passed or the task was
    /// cancelled first.
    private func wait(timeout: Duration?, until condition: @escaping @Sendable ([String: Status]) -> Bool) async -> Bool {
        guard let timeout else { return await wait(until: condition) }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.wait(until: condition) }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    private func wait(until condition: @escaping @Sendable ([String: Status]) -> Bool) async -> Bool {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.cancelled.remove(id) != nil || condition(state.statuses) { return true }
                    state.waiters.append(Waiter(id: id, isSatisfied: condition, continuation: continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume()
        }
        return !Task.isCancelled && condition(statuses)
    }
}
