import Foundation
import Synchronization
import Testing
import ZeroMQ

/// `PollThread`'s lifecycle with a real poll: the body sleeps in `zmq_poll` on the wake-up
/// descriptor until a stop is asked. Nothing sleeps in the tests; they wait for the thread.
@Suite("PollThread")
struct PollThreadTests {
    struct SetUpFailed: Error, Equatable {}
    struct LoopFailed: Error, CustomStringConvertible {
        var description: String { "the loop failed" }
    }

    /// A body's loop: poll the wake-up signal with no time-out until a stop is asked. Returns
    /// how many times it woke.
    static func loop(_ thread: PollThread) throws -> Int {
        let poller = Poller()
        _ = poller.add(fileDescriptor: thread.wakeUp.fileDescriptor)
        var turns = 0
        while !thread.isStopRequested {
            _ = try poller.poll(timeout: -1)
            if poller.returned(0).contains(.readable) { thread.wakeUp.drain() }
            turns += 1
        }
        return turns
    }

    @Test("start returns what the body made ready; requestStop wakes its poll; waitUntilStopped and join return once it has returned")
    func lifecycle() async throws {
        let thread = try PollThread(name: "poll-thread-test")
        #expect(!thread.isFinished)
        await thread.waitUntilStopped()  // never started: at once
        let closed = Mutex(false)
        let name = try await thread.start { (ready: (String) -> Void) in
            ready("serving")
            _ = try Self.loop(thread)
            closed.withLock { $0 = true }
        }
        #expect(name == "serving")
        #expect(!thread.isFinished && !thread.isStopRequested)

        // A blocked joiner on a thread of its own hears of the end too.
        let joined = AsyncStream<Void>.makeStream()
        let joiner = Thread {
            thread.join()
            joined.continuation.yield()
            joined.continuation.finish()
        }
        joiner.start()

        thread.requestStop()
        await thread.waitUntilStopped()
        #expect(thread.isFinished && closed.withLock { $0 } && thread.failure == nil)
        var heard = 0
        for await _ in joined.stream { heard += 1 }
        #expect(heard == 1)
        thread.join()  // finished: at once
    }

    @Test("what the body throws before it is ready, start throws, and the thread has ended")
    func failsBeforeReady() async throws {
        let thread = try PollThread(name: "poll-thread-fails")
        await #expect(throws: SetUpFailed.self) {
            _ = try await thread.start { (_: (Int) -> Void) in throw SetUpFailed() }
        }
        #expect(thread.isFinished && thread.failure == nil)
        await thread.waitUntilStopped()

        let silent = try PollThread(name: "poll-thread-silent")
        await #expect(throws: PollThread.EndedBeforeReady.self) {
            _ = try await silent.start { (_: (Int) -> Void) in }
        }
    }

    @Test("what the body throws after it is ready is kept as failure; a stop asked before start ends the loop at its first turn")
    func failsAfterReady() async throws {
        let thread = try PollThread(name: "poll-thread-late")
        thread.requestStop()
        let turns = Mutex(-1)
        _ = try await thread.start { (ready: (Bool) -> Void) in
            ready(true)
            turns.withLock { $0 = (try? Self.loop(thread)) ?? -1 }
            throw LoopFailed()
        }
        await thread.waitUntilStopped()
        #expect(turns.withLock { $0 } == 0)
        #expect(thread.failure.map { "\($0)" } == "the loop failed")
    }
}
