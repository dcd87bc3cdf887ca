import Foundation
import Testing
import ZeroMQ

@Suite("IOThread bridge")
struct IOThreadTests {
    @Test("async sockets exchange messages over TCP through one I/O thread")
    func asyncRoundTrip() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let router = try await io.open(.router) { socket in
            try socket.set(.routerMandatory(true))
            try socket.bind("tcp://127.0.0.1:*")
        }
        let endpoint = try await router.perform { try $0.lastEndpoint() }
        let dealer = try await io.open(.dealer) { try $0.connect(endpoint) }

        for i in 0..<100 { try await dealer.send([Data(frame: "ping \(i)")]) }
        for i in 0..<100 {
            let message = try await router.receive()
            #expect(message.frames.last == Data(frame: "ping \(i)"))
            try await router.send([message.frames[0], Data(frame: "pong \(i)")])
        }
        for i in 0..<100 {
            #expect(try await dealer.receive().frames == [Data(frame: "pong \(i)")])
        }
        await io.shutdown()
        await context.terminate()
    }

    @Test("receive(timeout:) returns nil when nothing comes, and a cancelled receive throws")
    func timeoutAndCancel() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let pull = try await io.open(.pull) { try $0.bind("inproc://quiet") }
        #expect(try await pull.receive(timeout: .milliseconds(20)) == nil)

        let waiting = Task { try await pull.receive() }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }

        let push = try await io.open(.push) { try $0.connect("inproc://quiet") }
        try await push.send([Data(frame: "after")])
        #expect(try await pull.receive().frames == [Data(frame: "after")])
        await io.shutdown()
    }

    @Test("a full inbox stops reading, so the sender's queue fills instead of memory growing")
    func backPressure() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let pull = try await io.open(.pull, inboxCapacity: 8) { socket in
            try socket.set(.receiveHighWaterMark(8))
            try socket.bind("inproc://pressure")
        }
        // The sender runs on a thread of its own, as a producer in another process would.
        let accepted = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
            let thread = Thread {
                do {
                    let push = try context.socket(.push, linger: 0)
                    try push.set(.sendHighWaterMark(8))
                    try push.connect("inproc://pressure")
                    var sent = 0
                    let deadline = Date().addingTimeInterval(2)
                    // Keep offering until the pipe refuses for a while: then the reader is paused.
                    var refusedSince: Date?
                    while Date() < deadline {
                        if try push.send([Data(frame: "m\(sent)")], dontWait: true) {
                            sent += 1
                            refusedSince = nil
                        } else if let since = refusedSince {
                            if Date().timeIntervalSince(since) > 0.2 { break }
                        } else {
                            refusedSince = Date()
                        }
                    }
                    push.close()
                    continuation.resume(returning: sent)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            thread.start()
        }
        // inbox (8) + libzmq's receive and send queues (8 + 8, inproc sums them) and a little slack.
        #expect(accepted < 100, "the reader kept reading into memory: \(accepted) accepted")
        for i in 0..<accepted {
            #expect(try await pull.receive().frames == [Data(frame: "m\(i)")])
        }
        await io.shutdown()
    }

    @Test("a send from an already cancelled task is withdrawn, not left waiting for a peer that never comes")
    func cancelledBeforeSend() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let dealer = try await io.open(.dealer, linger: 0) { socket in
            try socket.set(.immediate(true))
            try socket.connect("tcp://127.0.0.1:1")
        }
        // Many rounds: the I/O thread races the cancelling task, and a lost withdrawal hangs.
        for _ in 0..<200 {
            let early = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                try await dealer.send([Data(frame: "nobody listens")])
            }
            await #expect(throws: CancellationError.self) { try await early.value }
            // And one cancelled while it starts or waits for the socket to become writable.
            let waiting = Task { try await dealer.send([Data(frame: "still nobody")]) }
            waiting.cancel()
            await #expect(throws: CancellationError.self) { try await waiting.value }
        }
        await io.shutdown()
        await context.terminate()
    }

    @Test("shutdown fails waiting receivers and later calls instead of hanging")
    func shutdownFailsWaiters() async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let pull = try await io.open(.pull) { try $0.bind("inproc://closing") }
        // Whether the receive is already waiting or arrives after shutdown, it must fail.
        let pending = Task { try await pull.receive() }
        await io.shutdown()
        await #expect(throws: (any Error).self) { try await pending.value }
        await #expect(throws: (any Error).self) { try await pull.send([Data(frame: "late")]) }
        await #expect(throws: (any Error).self) { try await io.open(.pull) }
        await context.terminate()
    }
}
