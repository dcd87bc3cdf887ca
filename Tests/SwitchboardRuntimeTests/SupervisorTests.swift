import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Synchronization
import Testing

/// Real /bin/sh children that speak the notify protocol through python3 (a child of the shell,
/// as a program's helper would be), against a real supervisor.
@Suite("Supervisor: readiness on a notify socket, exits, stop order (processes)", .timeLimit(.minutes(2)))
struct SupervisorTests {
    /// A shell function `notify 'READY=1'` that sends one datagram to NOTIFY_SOCKET.
    static let notify = """
        notify() { python3 -c 'import os, socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(sys.argv[1].encode(), os.environ["NOTIFY_SOCKET"])' "$1"; }
        """

    static func shell(_ name: String, _ script: String, grace: Duration = .seconds(10)) -> Supervisor.Program {
        .init(name: name, executable: "/bin/sh", arguments: ["-c", notify + "\n" + script], stopGrace: grace)
    }

    @Test("a child says READY=1 on its own socket: the wait ends then, with the STATUS it sent")
    func ready() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        try supervisor.start(Self.shell("a", "notify 'STATUS=warming up'; notify 'READY=1'; exec sleep 30"))
        #expect(await supervisor.waitUntilReady("a", timeout: .seconds(30)) == .ready)
        let status = try #require(supervisor.statuses["a"])
        #expect(status.ready && status.status == "warming up" && status.exitCode == nil)
        #expect(await supervisor.stopAll() == ["a": 15], "SIGTERM ended it")
    }

    @Test("the socket is private: in a 0700 directory of the supervisor's, one per child, gone after stopAll")
    func privateSocket() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        let attributes = try FileManager.default.attributesOfItem(atPath: supervisor.runtimeDirectory)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        let directory = try TemporaryDirectory("supervisor")
        defer { directory.remove() }
        let seen = directory.path("seen")
        try supervisor.start(Self.shell("a", "echo \"$NOTIFY_SOCKET\" > '\(seen)'; notify 'READY=1'; exec sleep 30"))
        try supervisor.start(Self.shell("b", "notify 'READY=1'; exec sleep 30"))
        #expect(await supervisor.waitUntilReady("a", timeout: .seconds(30)) == .ready)
        #expect(await supervisor.waitUntilReady("b", timeout: .seconds(30)) == .ready)
        let socket = try String(contentsOfFile: seen, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(socket.hasPrefix(supervisor.runtimeDirectory + "/"))
        #expect(FileManager.default.fileExists(atPath: socket))
        await supervisor.stopAll()
        try await waitUntil("the socket file is removed", timeout: .seconds(5)) { !FileManager.default.fileExists(atPath: socket) }
    }

    @Test("a child that exits before READY=1 ends the wait at once, with its exit code")
    func exitsFirst() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        try supervisor.start(Self.shell("a", "exit 3"))
        let started = ContinuousClock.now
        #expect(await supervisor.waitUntilReady("a", timeout: .seconds(60)) == .exited(3))
        #expect(started.duration(to: .now) < .seconds(30))
        #expect(supervisor.exited == ["a"])
    }

    @Test("a child that never says READY=1 is reported timed out after the limit, and still runs")
    func timesOut() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        let child = try supervisor.start(Self.shell("a", "exec sleep 30"))
        let started = ContinuousClock.now
        #expect(await supervisor.waitUntilReady("a", timeout: .milliseconds(300)) == .timedOut)
        #expect(started.duration(to: .now) >= .milliseconds(300))
        #expect(child.isRunning)
        await supervisor.stopAll()
        #expect(!child.isRunning)
    }

    @Test("waitUntilAnyExits names the child that exited, with its code; the others run on")
    func anyExits() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        try supervisor.start(Self.shell("a", "notify 'READY=1'; exec sleep 30"))
        try supervisor.start(Self.shell("b", "notify 'READY=1'; exit 4"))
        #expect(await supervisor.waitUntilAnyExits(timeout: .seconds(60)) == ["b"])
        #expect(supervisor.statuses["b"]?.exitCode == 4)
        #expect(supervisor.statuses["a"]?.exitCode == nil)
        #expect(await supervisor.stopAll() == ["a": 15, "b": 4])
    }

    @Test("stopAll stops one child at a time in the reverse of the start, and SIGKILLs one that ignores SIGTERM after its grace")
    func stopOrder() async throws {
        let directory = try TemporaryDirectory("supervisor")
        defer { directory.remove() }
        let order = directory.path("order")
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        func polite(_ name: String) -> Supervisor.Program {
            // The shell runs a trap between commands: a short sleep loop lets it run at once.
            Self.shell(name, "trap 'echo \(name) >> \(order); exit 0' TERM; notify 'READY=1'; while :; do sleep 0.05; done")
        }
        try supervisor.start(polite("a"))
        try supervisor.start(polite("b"))
        try supervisor.start(
            Self.shell("stubborn", "trap '' TERM; notify 'READY=1'; while :; do sleep 0.05; done", grace: .milliseconds(500)))
        try supervisor.start(polite("c"))
        for name in ["a", "b", "stubborn", "c"] { #expect(await supervisor.waitUntilReady(name, timeout: .seconds(30)) == .ready) }
        let started = ContinuousClock.now
        let codes = await supervisor.stopAll()
        #expect(started.duration(to: .now) >= .milliseconds(500), "the stubborn one had its grace")
        #expect(codes == ["a": 0, "b": 0, "stubborn": 9, "c": 0])
        #expect(try String(contentsOfFile: order, encoding: .utf8) == "c\nb\na\n")
    }

    @Test("a name is started once")
    func uniqueNames() throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        try supervisor.start(Self.shell("a", "exit 0"))
        #expect(throws: Supervisor.Failure.self) { try supervisor.start(Self.shell("a", "exit 0")) }
    }

    /// Events `keepRunning` reports, on a stream a test waits on.
    static func events() -> (AsyncStream<Supervisor.Event>, @Sendable (Supervisor.Event) -> Void) {
        let (stream, continuation) = AsyncStream.makeStream(of: Supervisor.Event.self)
        return (stream, { continuation.yield($0) })
    }

    static let quick = RestartPolicy.Configuration(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(80), limit: 2)

    @Test(
        "keepRunning restarts a child killed with SIGKILL on its notify socket (READY=1 again), with the restart arguments; the others run on"
    )
    func restartsKilled() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        var program = Self.shell("a", "notify 'READY=1'; exec sleep 30")
        program.restart = Self.quick
        program.restartArguments = ["-c", Self.notify + "\nnotify 'STATUS=again'; notify 'READY=1'; exec sleep 30"]
        let first = try supervisor.start(program)
        let other = try supervisor.start(Self.shell("b", "notify 'READY=1'; exec sleep 30"))
        #expect(await supervisor.waitUntilReady("a", timeout: .seconds(30)) == .ready)
        let (events, report) = Self.events()
        try await withThrowingTaskGroup(of: Supervisor.GaveUp?.self) { group in
            group.addTask { await supervisor.keepRunning(report: report) }
            first.signal(SIGKILL)
            var iterator = events.makeAsyncIterator()
            #expect(
                await iterator.next()
                    == .exited(
                        name: "a", termination: .signalled(SIGKILL),
                        action: .restart(after: .milliseconds(20), restart: 1, limit: 2, window: .seconds(300))))
            guard case .restarted("a", let pid, 1)? = await iterator.next() else {
                Issue.record("not restarted")
                return
            }
            #expect(pid != first.processIdentifier && supervisor.processes["a"]?.processIdentifier == pid)
            guard case .ready("a", pid, _)? = await iterator.next() else {
                Issue.record("not ready again")
                return
            }
            let status = try #require(supervisor.statuses["a"])
            #expect(status.ready && status.restarts == 1 && status.exitCode == nil && status.status == "again")
            #expect(other.isRunning && supervisor.statuses["b"]?.restarts == 0)
            group.cancelAll()
            #expect(try await group.next() == .some(nil), "cancelled: no child given up on")
        }
        #expect(await supervisor.stopAll() == ["a": 15, "b": 15], "stopAll stops the restarted process")
    }

    @Test("keepRunning gives up on a child that exits once more after its limit of restarts, with how it ended")
    func givesUp() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        var program = Self.shell("a", "exit 3")
        program.restart = Self.quick
        try supervisor.start(program)
        let (events, report) = Self.events()
        let gaveUp = try #require(await supervisor.keepRunning(report: report))
        #expect(gaveUp.name == "a" && gaveUp.termination == .exited(code: 3) && gaveUp.restarts == 2 && gaveUp.window == .seconds(300))
        var exits: [RestartPolicy.Action] = []
        for await event in events {
            if case .exited(_, _, let action) = event { exits.append(action) }
            if case .exited(_, _, .giveUp) = event { break }
        }
        #expect(
            exits == [
                .restart(after: .milliseconds(20), restart: 1, limit: 2, window: .seconds(300)),
                .restart(after: .milliseconds(40), restart: 2, limit: 2, window: .seconds(300)),
                .giveUp(restarts: 2, window: .seconds(300)),
            ])
        #expect(supervisor.statuses["a"]?.restarts == 2)
    }

    @Test("a restart waiting out its delay is abandoned when keepRunning is cancelled: stopAll starts nothing")
    func cancelledDelay() async throws {
        let supervisor = try Supervisor(environment: ProcessInfo.processInfo.environment)
        var program = Self.shell("a", "exit 3")
        program.restart = .init(initialDelay: .seconds(30))
        try supervisor.start(program)
        let (events, report) = Self.events()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await supervisor.keepRunning(report: report) }
            var iterator = events.makeAsyncIterator()
            _ = await iterator.next()
            #expect(supervisor.statuses["a"]?.restartScheduled == true)
            group.cancelAll()
        }
        #expect(await supervisor.stopAll() == ["a": 3])
        #expect(supervisor.statuses["a"]?.restarts == 0)
    }
}

@Suite("ServiceReadiness: the program's end of the notify protocol")
struct ServiceReadinessTests {
    /// A notify socket whose messages arrive on a stream.
    func listen(_ path: String) throws -> (NotifySocket, AsyncStream<[String: String]>) {
        let (stream, continuation) = AsyncStream.makeStream(of: [String: String].self)
        let socket = try NotifySocket(path: path) { continuation.yield($0) }
        return (socket, stream)
    }

    @Test("READY=1, STATUS and STOPPING reach a socket named by a path, in one datagram, a STATUS on one line")
    func path() async throws {
        let directory = try TemporaryDirectory("notify")
        defer { directory.remove() }
        let path = directory.path("n.sock")
        let (socket, messages) = try listen(path)
        defer { socket.stop() }
        #expect(ServiceReadiness.notify(.ready, .status("two\nlines"), environment: ["NOTIFY_SOCKET": path]))
        var iterator = messages.makeAsyncIterator()
        #expect(await iterator.next() == ["READY": "1", "STATUS": "two lines"])
        try ServiceReadiness.send([.stopping], to: path)
        #expect(await iterator.next() == ["STOPPING": "1"])
    }

    @Test("a name starting with '@' is in the abstract namespace, as systemd writes it")
    func abstract() async throws {
        let name = "@switchboard-test-\(UUID().uuidString.prefix(8))"
        let (socket, messages) = try listen(name)
        defer { socket.stop() }
        #expect(ServiceReadiness.notify(.ready, environment: ["NOTIFY_SOCKET": name]))
        var iterator = messages.makeAsyncIterator()
        #expect(await iterator.next() == ["READY": "1"])
    }

    @Test("without NOTIFY_SOCKET nothing is sent; a relative or absent socket is an error, not a trap")
    func nowhere() {
        #expect(!ServiceReadiness.notify(.ready, environment: [:]))
        #expect(!ServiceReadiness.notify(.ready, environment: ["NOTIFY_SOCKET": ""]))
        #expect(!ServiceReadiness.notify(.ready, environment: ["NOTIFY_SOCKET": "relative.sock"]))
        #expect(!ServiceReadiness.notify(.ready, environment: ["NOTIFY_SOCKET": "/nonexistent/n.sock"]))
        #expect(throws: ServiceReadiness.Failure.self) {
            try ServiceReadiness.send([.ready], to: "/" + String(repeating: "x", count: 200))
        }
    }
}
