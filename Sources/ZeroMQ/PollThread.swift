// A dedicated thread that owns sockets and sleeps in `zmq_poll`, for a server loop such as the
// broker's event plane and its service plane: libzmq sockets must stay on the thread that made
// them, and a blocking poll must never hold one of the cooperative pool's threads (two here).
//
// The lifecycle is the same for every such loop, so it lives here once: `start` runs the body
// on a new thread and returns when the body says it serves (or throws what it threw before);
// `requestStop` sets a flag and wakes the poll; `waitUntilStopped` (async) and `join` (for a
// thread outside the pool) wait until the body has returned, having closed its sockets.

import Foundation
import Synchronization

/// One thread running one polling loop; see the file's comment for the contract.
public final class PollThread: Sendable {
    /// Why `start` failed without an error of the body's own.
    public struct EndedBeforeReady: Error, CustomStringConvertible {
        public var description: String { "the poll thread ended before it was ready" }
    }

    /// Poll this descriptor beside the sockets: `requestStop` and the owner's own requests
    /// (`signal()`) make it readable. The body drains it after each wake-up.
    public let wakeUp: WakeUpSignal
    private let name: String
    private let stackSize: Int
    private let state = Mutex(State())

    private struct State {
        var stopRequested = false
        var started = false
        var finished = false
        /// What the body threw after it was ready, if it did.
        var failure: (any Error)?
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Threads (not tasks) waiting in `join()`.
        var joiners: [DispatchSemaphore] = []
    }

    /// - Parameters:
    ///   - name: the thread's name (in `top`, `gdb` and crash reports).
    ///   - stackSize: bytes of stack for the thread.
    public init(name: String, stackSize: Int = 4 << 20) throws(ZMQError) {
        self.name = name
        self.stackSize = stackSize
        wakeUp = try WakeUpSignal()
    }

    /// Starts the thread, which runs `body` once. `body` sets up what it owns (sockets…), calls
    /// `ready` with what its starter is to hear once it serves, loops until `isStopRequested`,
    /// closes what it opened and returns. Call `start` once.
    /// - Returns: the value `body` gave `ready`.
    /// - Throws: what `body` threw before it called `ready` (the thread has ended then), or
    ///   `EndedBeforeReady` if it returned without calling it. What it throws after `ready` is
    ///   kept as `failure`.
    public func start<Ready: Sendable>(_ body: @escaping @Sendable (_ ready: (Ready) -> Void) throws -> Void) async throws -> Ready {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Ready, any Error>) in
            state.withLock { $0.started = true }
            Thread.start(named: name, stackSize: stackSize) { [self] in
                var answered = false
                var failure: (any Error)?
                do {
                    try body { value in
                        guard !answered else { return }
                        answered = true
                        continuation.resume(returning: value)
                    }
                } catch {
                    failure = error
                }
                finish(failure: answered ? failure : nil)
                if !answered { continuation.resume(throwing: failure ?? EndedBeforeReady()) }
            }
        }
    }

    /// Asks the body to return: `isStopRequested` becomes true and the poll wakes. Returns at
    /// once; safe from any thread, before `start` too (the body then returns at its first turn).
    public func requestStop() {
        state.withLock { $0.stopRequested = true }
        wakeUp.signal()
    }

    /// For the body: whether to leave its loop.
    public var isStopRequested: Bool { state.withLock { $0.stopRequested } }

    /// Whether the body has returned (or thrown).
    public var isFinished: Bool { state.withLock { $0.finished } }

    /// What the body threw after it was ready, once it has.
    public var failure: (any Error)? { state.withLock { $0.failure } }

    /// Waits until the body has returned (at once if it has, or if the thread was never started).
    public func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                let done = state.finished || !state.started
                if !done { state.waiters.append(continuation) }
                return done
            }
            if done { continuation.resume() }
        }
    }

    /// `waitUntilStopped()` for a thread outside the cooperative pool (another poll thread at
    /// its end). Never call it from async code, nor from the body itself: it blocks its thread.
    public func join() {
        let semaphore = DispatchSemaphore(value: 0)
        let done = state.withLock { state -> Bool in
            let done = state.finished || !state.started
            if !done { state.joiners.append(semaphore) }
            return done
        }
        if !done { semaphore.wait() }
    }

    private func finish(failure: (any Error)?) {
        let (waiters, joiners) = state.withLock { state in
            state.finished = true
            state.failure = failure
            defer {
                state.waiters = []
                state.joiners = []
            }
            return (state.waiters, state.joiners)
        }
        for waiter in waiters { waiter.resume() }
        for joiner in joiners { joiner.signal() }
    }
}
