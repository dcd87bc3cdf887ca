import Foundation
import Synchronization
import Testing
import ZeroMQ

/// The I/O thread's direct paths: a receive handler instead of an inbox, sends posted without
/// waiting, and timers (what `ServiceClient` and `ServiceWorker` use to wake a task once per
/// round trip).
@Suite("IOThread handlers, posted sends and timers")
struct IOThreadHandlerTests {
    @Test("many messages ready at one wake-up reach the receive handler in order, a batch per wake-up; the end comes once, at close")
    func handlerBatches() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let (events, input) = AsyncStream<Result<[Message], ZMQError>>.makeStream()
        let pull = try await io.open(.pull, configure: { try $0.bind("inproc://batches") }, onReceive: { input.yield($0) })
        let push = try context.socket(.push, linger: 0)
        try push.connect("inproc://batches")

        // Hold the I/O thread while 500 messages are queued, so they are all ready when it next
        // reads: they must come in two batches (256 a wake-up), not one call per message.
        let (entered, enteredInput) = AsyncStream<Void>.makeStream()
        let release = DispatchSemaphore(value: 0)
        async let held: Void = pull.perform { _ in
            enteredInput.yield()
            release.wait()
        }
        for await _ in entered { break }
        for i in 0..<500 { #expect(try push.send([Data(frame: "m\(i)")], dontWait: true)) }
        release.signal()
        try await held

        var received: [Data] = []
        var batches: [Int] = []
        var iterator = events.makeAsyncIterator()
        while received.count < 500, let event = await iterator.next() {
            let messages = try event.get()
            batches.append(messages.count)
            received += messages.map { $0.frames[0] }
        }
        #expect(received == (0..<500).map { Data(frame: "m\($0)") })
        #expect(batches == [256, 244])

        await pull.close()
        let end = await iterator.next()
        #expect(throws: ZMQError.self) { try end?.get() }
        push.close()
        await io.shutdown()
        input.finish()
        #expect(await iterator.next() == nil, "nothing after the end")
        await context.terminate()
    }

    @Test("a posted send reports taken once a peer takes it, and not taken when none does by its deadline")
    func postedSends() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let (results, input) = AsyncStream<Result<Bool, any Error>>.makeStream()
        var iterator = results.makeAsyncIterator()

        let lonely = try await io.open(.dealer, linger: 0) { socket in
            try socket.set(.immediate(true))
            try socket.connect("tcp://127.0.0.1:1")
        }
        lonely.post([Data(frame: "nobody")], deadline: .now + .milliseconds(50)) { input.yield($0) }
        #expect(try await iterator.next()?.get() == false)

        let pull = try await io.open(.pull) { try $0.bind("inproc://posted") }
        let push = try await io.open(.push) { try $0.connect("inproc://posted") }
        for i in 0..<10 { push.post([Data(frame: "p\(i)")], deadline: .now + .seconds(30)) { input.yield($0) } }
        for _ in 0..<10 { #expect(try await iterator.next()?.get() == true) }
        for i in 0..<10 { #expect(try await pull.receive().frames == [Data(frame: "p\(i)")]) }

        await io.shutdown()
        lonely.post([Data(frame: "late")]) { input.yield($0) }
        let late = await iterator.next()
        #expect(throws: (any Error).self) { try late?.get() }
        await context.terminate()
    }

    @Test("timers run in deadline order on the I/O thread, a cancelled one never; at shutdown the rest run at once")
    func timers() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let (fired, input) = AsyncStream<String>.makeStream()
        var iterator = fired.makeAsyncIterator()
        let now = ContinuousClock.now
        io.schedule(at: now + .milliseconds(60)) { input.yield("third") }
        let cancelled = io.schedule(at: now + .milliseconds(20)) { input.yield("cancelled") }
        io.schedule(at: now + .milliseconds(40)) { input.yield("second") }
        io.schedule(at: now + .milliseconds(10)) { input.yield("first") }
        #expect(io.cancel(cancelled))
        #expect(await iterator.next() == "first")
        #expect(await iterator.next() == "second")
        #expect(await iterator.next() == "third")
        #expect(ContinuousClock.now >= now + .milliseconds(60))

        io.schedule(at: .now + .seconds(3600)) { input.yield("at shutdown") }
        await io.shutdown()
        #expect(await iterator.next() == "at shutdown")
        io.schedule(at: .now + .seconds(3600)) { input.yield("after shutdown") }
        #expect(await iterator.next() == "after shutdown")
        await context.terminate()
    }
}
