import Foundation
import Synchronization

/// A task executor with one thread of its own, for test code that blocks the thread it runs on.
///
/// The journal store is synchronous (made for the broker's own thread), and so are `initdb`,
/// `pg_ctl` and a PostgreSQL connect that waits for a server to come up. Called from an async
/// test, such a call holds one of the cooperative pool's threads (two on our machines) for as
/// long as it waits, and every other suite's timers and sockets wait with it. Run under
/// `withTaskExecutorPreference(ThreadExecutor(...))`, the test's own code and its child tasks
/// run on this thread instead; actors and other executors are unaffected.
///
/// `shutdown()` lets the thread finish what is queued and end; a job that arrives after that
/// (a continuation resumed late) goes to the global concurrent executor.
public final class ThreadExecutor: TaskExecutor, Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var stopping = false
        var exited = false
    }

    private let state = Mutex(State())
    private let wakeUp = DispatchSemaphore(value: 0)

    public init(name: String) {
        let thread = Thread { [self] in
            // Set from the thread itself, so that it is the name the system shows (a stack dump).
            Thread.current.name = name
            serve()
        }
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let queued = state.withLock { state -> Bool in
            guard !state.exited else { return false }
            state.jobs.append(unowned)
            return true
        }
        if queued {
            wakeUp.signal()
        } else {
            globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
        }
    }

    /// Ends the thread once every job queued so far has run; returns at once.
    public func shutdown() {
        state.withLock { $0.stopping = true }
        wakeUp.signal()
    }

    private func serve() {
        var batch: [UnownedJob] = []
        while true {
            let (done, idle) = state.withLock { state -> (Bool, Bool) in
                swap(&batch, &state.jobs)
                if batch.isEmpty && state.stopping { state.exited = true }
                return (state.exited, batch.isEmpty)
            }
            if done { return }
            if idle {
                wakeUp.wait()
                continue
            }
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
