import Foundation
import Logging
import ServiceLifecycle
import SwitchboardBus
import SwitchboardRuntime
import Synchronization
import Testing
import ZeroMQ

/// A program's runtime releases what it made on every way out: a start-up step that throws
/// before the group runs, a service that fails, a cancelled group. The I/O thread it adds owns
/// the ZeroMQ context, so "released" here means the context is terminated.
@Suite("ProcessRuntime")
struct ProcessRuntimeTests {
    struct StepFailed: Error {}

    /// What the runtime released, in order, and the I/O thread a start-up made.
    final class Releases: Sendable {
        private let names = Mutex<[String]>([])
        private let made = Mutex<IOThread?>(nil)
        func add(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
        var io: IOThread? {
            get { made.withLock { $0 } }
            set { made.withLock { $0 = newValue } }
        }
    }

    /// Opens a socket on the I/O thread, says so, then fails or waits until cancelled.
    struct Worker: Service {
        let io: IOThread
        let started: AsyncStream<Void>.Continuation
        let fails: Bool

        func run() async throws {
            _ = try await io.open(.dealer)
            started.yield()
            if fails { throw StepFailed() }
            try await Task.sleep(for: .seconds(3600))
        }
    }

    static let logger: Logger = {
        var logger = Logger(label: "process-runtime")
        logger.logLevel = .critical
        return logger
    }()

    @Test(
        "a start-up step that throws after the I/O thread was made: the thread stops, its context is terminated, releases run newest first")
    func startUpFails() async throws {
        let releases = Releases()
        await #expect(throws: StepFailed.self) {
            try await ProcessRuntime.run(program: "test", logger: Self.logger) { runtime in
                runtime.onExit { releases.add("http client") }
                let io = try runtime.ioThread()
                releases.io = io
                runtime.onExit { releases.add("service client") }
                _ = try await io.open(.dealer)
                throw StepFailed()
            }
        }
        let io = try #require(releases.io)
        #expect(io.context.isTerminated)
        #expect(releases.all == ["service client", "http client"])
    }

    @Test("a service that fails cancels the group: the I/O thread's run() returns, the context is terminated, releases run")
    func serviceFails() async throws {
        let releases = Releases()
        var runtime = ProcessRuntime(program: "test", logger: Self.logger)
        let io = try runtime.ioThread()
        let (started, continuation) = AsyncStream.makeStream(of: Void.self)
        runtime.add(Worker(io: io, started: continuation, fails: true))
        runtime.onExit { releases.add("released") }
        await #expect(throws: StepFailed.self) { try await runtime.run() }
        var iterator = started.makeAsyncIterator()
        #expect(await iterator.next() != nil)
        #expect(io.context.isTerminated)
        #expect(releases.all == ["released"])
    }

    @Test("a cancelled program: every service ends, the context is terminated, releases run")
    func cancelled() async throws {
        let releases = Releases()
        var runtime = ProcessRuntime(program: "test", logger: Self.logger)
        let io = try runtime.ioThread()
        let (started, continuation) = AsyncStream.makeStream(of: Void.self)
        runtime.add(Worker(io: io, started: continuation, fails: false))
        runtime.onExit { releases.add("released") }
        let running = Task { [runtime] in try await runtime.run() }
        var iterator = started.makeAsyncIterator()
        #expect(await iterator.next() != nil)
        running.cancel()
        _ = try? await running.value
        #expect(io.context.isTerminated)
        #expect(releases.all == ["released"])
    }
}
