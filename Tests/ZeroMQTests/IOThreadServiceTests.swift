import Foundation
import Logging
import ServiceLifecycle
import Testing
import ZeroMQ

/// The I/O thread as the owner of its context: every way out of its `run()` (graceful shutdown,
/// cancellation) and of `withIOThread` (a body that returns or throws) ends with the thread
/// stopped and the context terminated.
@Suite("IOThread as a Service")
struct IOThreadServiceTests {
    /// A user of the I/O thread: opens a socket, says so, and waits on it until graceful
    /// shutdown or cancellation; then says whether the context was still alive when it closed.
    struct SocketUser: Service {
        let io: IOThread
        let events: AsyncStream<String>.Continuation

        func run() async throws {
            let pull = try await io.open(.pull) { try $0.bind("inproc://user-\(UUID().uuidString)") }
            events.yield("opened")
            _ = try? await cancelWhenGracefulShutdown { try await pull.receive() }
            await pull.close()
            events.yield(io.context.isTerminated ? "closed after the context" : "closed before the context")
        }
    }

    static let logger = Logger(label: "io-thread-service")

    @Test("graceful shutdown reaches the I/O thread last: its users close first, then run() terminates the context")
    func gracefulShutdown() async throws {
        let io = try IOThread()
        let (events, continuation) = AsyncStream.makeStream(of: String.self)
        let group = ServiceGroup(
            configuration: .init(services: [io, SocketUser(io: io, events: continuation)], logger: Self.logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == "opened")
            #expect(!io.context.isTerminated)
            await group.triggerGracefulShutdown()
            #expect(await iterator.next() == "closed before the context")
            try await tasks.waitForAll()
        }
        #expect(io.context.isTerminated)
    }

    @Test("a cancelled group ends the I/O thread's run() too, and its context is terminated")
    func cancellation() async throws {
        let io = try IOThread()
        let (events, continuation) = AsyncStream.makeStream(of: String.self)
        let group = ServiceGroup(
            configuration: .init(services: [io, SocketUser(io: io, events: continuation)], logger: Self.logger))
        let running = Task { try await group.run() }
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == "opened")
        running.cancel()
        _ = try? await running.value
        #expect(io.context.isTerminated)
        await #expect(throws: ZMQError.self) { try await io.open(.dealer) }
    }

    struct StartFailed: Error {}

    @Test("withIOThread shuts the thread down and terminates the context when its body throws, and when it returns")
    func scoped() async throws {
        var failed: IOThread?
        do {
            try await IOThread.withIOThread { io in
                failed = io
                _ = try await io.open(.dealer)
                throw StartFailed()
            }
            Issue.record("the body's error should come out of withIOThread")
        } catch is StartFailed {}
        #expect(failed?.context.isTerminated == true)
        let returned = try await IOThread.withIOThread { io in
            _ = try await io.open(.dealer)
            return io
        }
        #expect(returned.context.isTerminated)
    }

    @Test("a thread on a borrowed context leaves it to its owner")
    func borrowedContext() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        await io.shutdown()
        #expect(!context.isTerminated)
        await context.terminate()
        #expect(context.isTerminated)
    }
}
