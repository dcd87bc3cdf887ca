import Foundation
import Testing
import ZeroMQ

/// The names the kernel shows for this process's threads (`/proc/self/task/TID/comm`).
private func kernelThreadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
        .map { $0.trimmingCharacters(in: .newlines) }
}

@Suite("Named threads")
struct NamedThreadTests {
    @Test("a started thread, an I/O thread and a poll thread show their names to the system; a long name shows its first 15 bytes")
    func namesReachTheKernel() async throws {
        let seen = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            Thread.start(named: "named-thread-test-long-name") {
                continuation.resume(
                    returning: ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
                        .trimmingCharacters(in: .newlines))
            }
        }
        #expect(seen == "named-thread-te")

        let context = try Context()
        let io = try IOThread(context: context, name: "io-name-test")
        // A socket made there: the thread has run (and named itself) by then.
        let probe = try await io.open(.pair)
        let poll = try PollThread(name: "poll-name-test")
        let serving = try await poll.start { (ready: (Bool) -> Void) in
            ready(true)
            _ = try PollThreadTests.loop(poll)
        }
        #expect(serving)
        let names = kernelThreadNames()
        #expect(names.contains("io-name-test"), "\(names)")
        #expect(names.contains("poll-name-test"), "\(names)")
        poll.requestStop()
        await poll.waitUntilStopped()
        await probe.close()
        await io.shutdown()
        await context.terminate()
    }
}
