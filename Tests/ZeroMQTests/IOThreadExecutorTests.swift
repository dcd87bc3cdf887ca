import Foundation
import Testing
import ZeroMQ

@Suite("IOThread as a task executor", .timeLimit(.minutes(1)))
struct IOThreadExecutorTests {
    @Test("tasks that prefer the I/O thread run on it, and exchange 1,000 messages with tasks there and on the pool")
    func tasksRunOnTheThread() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let router = try await io.open(.router) { try $0.bind("inproc://executor") }
        let ioThread = try await router.perform { _ in pthread_self() }
        let dealer = try await io.open(.dealer) { try $0.connect("inproc://executor") }
        // Each task returns the threads it ran on after its awaits.
        let threads = try await withThrowingTaskGroup(of: Set<pthread_t>.self) { group in
            // The echo runs on the I/O thread; the asking side once there and once on the pool.
            group.addTask(executorPreference: io) {
                var threads: Set<pthread_t> = []
                for _ in 0..<1000 {
                    let message = try await router.receive()
                    threads.insert(pthread_self())
                    router.post(message.frames, deadline: nil) { _ in }
                }
                return threads
            }
            group.addTask(executorPreference: io) {
                var threads: Set<pthread_t> = []
                for i in 0..<500 {
                    dealer.post([Data(frame: "on the thread \(i)")], deadline: nil) { _ in }
                    #expect(try await dealer.receive().frames == [Data(frame: "on the thread \(i)")])
                    threads.insert(pthread_self())
                }
                // After an await the pool resumes, the task is back on the thread.
                try await Task.sleep(for: .milliseconds(1))
                threads.insert(pthread_self())
                return threads
            }
            var threads = try await group.next() ?? []
            group.addTask {
                for i in 0..<500 {
                    try await dealer.send([Data(frame: "on the pool \(i)")])
                    #expect(try await dealer.receive().frames == [Data(frame: "on the pool \(i)")])
                }
                return []
            }
            for try await more in group { threads.formUnion(more) }
            return threads
        }
        #expect(threads == [ioThread])
        await io.shutdown()
        await context.terminate()
    }

    @Test("a task on the I/O thread that adds a timer, a receive deadline or a send while nothing else happens is not left asleep")
    func workAddedOnTheThreadIsSeen() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let pull = try await io.open(.pull) { try $0.bind("inproc://quiet-executor") }
        let push = try await io.open(.push) { try $0.connect("inproc://quiet-executor") }
        // Nothing but this task's own calls can wake the thread here: what it adds from the
        // thread itself must bound the thread's next poll. (Past the suite's time limit, the
        // test fails.)
        let task = Task(executorPreference: io) {
            #expect(try await pull.receive(timeout: .milliseconds(50)) == nil)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                _ = io.schedule(at: .now + .milliseconds(20)) { continuation.resume() }
            }
            try await push.send([Data(frame: "sent from the thread")])
            #expect(try await pull.receive().frames == [Data(frame: "sent from the thread")])
        }
        try await task.value
        await io.shutdown()
        await context.terminate()
    }

    @Test("a task still preferring the I/O thread after shutdown finishes on the global pool")
    func jobsAfterShutdown() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let pull = try await io.open(.pull) { try $0.bind("inproc://closing-executor") }
        let ioThread = try await pull.perform { _ in pthread_self() }
        let (gate, opened) = AsyncStream.makeStream(of: Void.self)
        let finished = Task(executorPreference: io) { () -> pthread_t in
            // Fails with the shutdown, then awaits something the pool resumes.
            await #expect(throws: (any Error).self) { try await pull.receive() }
            let during = pthread_self()
            for await _ in gate { break }
            return during
        }
        await io.shutdown()
        opened.yield()
        // The task finishes (its jobs are not left in a queue nobody runs; past the suite's time
        // limit, the test fails).
        let during = await finished.value
        #expect(during == ioThread, "the thread runs what came before it stopped, and the task finished")
        await context.terminate()
    }
}
