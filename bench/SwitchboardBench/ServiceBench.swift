// The service plane: request/reply round trips through the Majordomo broker, next to a raw
// DEALER↔ROUTER echo with no broker, measured in the same run.
//
//   SWITCHBOARD_BENCH=1 swift run -c release switchboard-bench --service [--quick] [--polled] [--library-only] [--io-thread-only]
//
// `--polled` runs every client socket on one thread (zmq_poll) instead of a thread each;
// `--library-only` runs only the async rows, and `--io-thread-only` only those with their tasks
// on the I/O thread.
//
// Clients and workers are raw libzmq sockets on threads of this process (each client does one
// round trip at a time and times it), so the figures measure the broker and the network path,
// not a client library. The last rows run the same load through `ServiceClient` and
// `ServiceWorker` to show what the async library adds, and beside them the bridge alone:
// tasks sending raw MDP frames through `AsyncSocket`, with nothing of the library's own. Both
// run twice: with their tasks on the global pool (the default), and on the I/O thread
// (`IOThread` as their executor, `ServiceWorker.Settings.runsOnIOThread`), where a round trip
// wakes no thread between the socket and the task.
//
// Between the raw echo and the broker, a third row: the same echo through libzmq's own
// forwarder (`zmq_proxy`, ROUTER in front, DEALER behind, on a context and I/O thread of its
// own, as a broker process has). It does nothing but move frames, so it is the floor of any
// broker on this machine: each round trip crosses two TCP connections twice, where the raw echo
// crosses one.
//
// The rows through the broker also give this process's CPU and context switches per round trip
// (its clients and workers, with libzmq's threads) beside the broker's: the library's own cost
// shows apart from the machine's mode, which moves both throughputs (bench/RESULTS.md, "the
// service library's own cost per round trip").

import CZeroMQ
import Foundation
import Glibc
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Synchronization
import ZeroMQ

struct RoundTrips {
    var latencies: [Duration]
    var seconds: Double
    /// CPU seconds per round trip of what sits between clients and workers, where measured: the
    /// broker process (all its threads), or the forwarder's thread and its context's libzmq threads.
    var middleCPU: Double?
    /// Context switches of the same threads per round trip.
    var middleSwitches: Double?
    /// CPU seconds per round trip of this process while it timed them: the clients and workers
    /// (raw sockets, or the library with its `IOThread`) and this process's libzmq threads.
    var sidesCPU: Double?
    /// Context switches of this process per round trip while it timed them.
    var sidesSwitches: Double?

    var perSecond: Double { Double(latencies.count) / seconds }

    func percentile(_ p: Double) -> Duration {
        let sorted = latencies.sorted()
        guard !sorted.isEmpty else { return .zero }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }
}

/// CPU seconds this process has used so far, all its threads (`clock()`: microseconds).
func ownCPUSeconds() -> Double { Double(clock()) / Double(CLOCKS_PER_SEC) }

/// Context switches (voluntary and not) of this process so far, all its threads, those that
/// ended too.
func ownContextSwitches() -> Int {
    var usage = rusage()
    guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
    return usage.ru_nvcsw + usage.ru_nivcsw
}

func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}

func micros(_ duration: Duration) -> String { String(format: "%.0f µs", seconds(duration) * 1e6) }

/// A REQUEST body of realistic size: what an ETO "programs of a site" question looks like.
/// `--polled`: clients on one thread (see `polledClients`) instead of a thread each.
let polledHarness = CommandLine.arguments.contains("--polled")

let sampleBody: [Data] = {
    let header = RequestHeader(
        requestID: "0193a5f2-7c1e-7a3b-9c4d-5e6f7a8b9c0e", operation: "programs.list", timeoutMilliseconds: 5000, idempotent: true)
    return try! ServiceBody.requestBody(header, content: Data(#"{"site_id":12,"include_disabled":false}"#.utf8))
}()

func serviceBench(quick: Bool) async throws {
    let scale = quick ? 10 : 1
    let body = sampleBody
    print(
        "Switchboard service-plane benchmark, \(Timestamp.now()), \(ProcessInfo.processInfo.activeProcessorCount) cores\(quick ? " (quick)" : "")"
    )
    print("request body: \(body.count) frames, \(body.reduce(0) { $0 + $1.count }) B; each client makes one round trip at a time\n")
    var rows: [(String, String, String)] = []
    func row(_ name: String, _ figures: RoundTrips, _ note: String = "") {
        let value = String(format: "%.0f/s", figures.perSecond)
        let detail = "p50 \(micros(figures.percentile(0.5))), p99 \(micros(figures.percentile(0.99)))" + (note.isEmpty ? "" : "; " + note)
        rows.append((name, value, detail))
        print(String(format: "%-52@ %10@  %@", name as NSString, value as NSString, detail as NSString))
    }

    let directory = try TemporaryDirectory("service-bench")
    defer { directory.remove() }
    let broker = try await BrokerProcess.start(directory: directory.path("broker"))
    let endpoint = broker.endpoints.service

    // The async library on the global pool (the default) and with its tasks on the I/O thread,
    // each beside the bridge alone run the same way; against the raw-socket run when there was one.
    func asyncRows(against rawSockets: RoundTrips?) async throws {
        func ratio(_ figures: RoundTrips) -> String {
            rawSockets.map { String(format: "%.2f× the raw-socket run through the broker; ", figures.perSecond / $0.perSecond) } ?? ""
        }
        // `--io-thread-only`: only the runs with their tasks on the I/O thread (for a profile).
        for onIOThread in CommandLine.arguments.contains("--io-thread-only") ? [true] : [false, true] {
            let bridge = try await bridgeEcho(
                endpoint: endpoint, clients: 8, workers: 4, perClient: 3_000 / scale, body: body, onIOThread: onIOThread)
            let library = try await libraryEcho(broker: broker, clients: 8, workers: 4, perClient: 3_000 / scale, onIOThread: onIOThread)
            let tasks = onIOThread ? ", tasks on the I/O thread" : ""
            row(
                "AsyncSocket with raw MDP frames (the bridge alone)\(tasks), 8 clients", bridge,
                ratio(bridge)
                    + String(
                        format: "clients and workers CPU %.1f µs and %.1f context switches a round trip", (bridge.sidesCPU ?? 0) * 1e6,
                        bridge.sidesSwitches ?? 0))
            row(
                "ServiceClient + ServiceWorker (async library)\(tasks), 8 clients", library,
                ratio(library)
                    + String(
                        format:
                            "%.2f× the bridge alone; broker CPU %.1f µs a round trip; clients and workers CPU %.1f µs and %.1f context switches a round trip",
                        library.perSecond / bridge.perSecond, (library.middleCPU ?? 0) * 1e6, (library.sidesCPU ?? 0) * 1e6,
                        library.sidesSwitches ?? 0))
        }
    }
    if CommandLine.arguments.contains("--library-only") {
        try await asyncRows(against: nil)
        await broker.stop()
        return
    }
    var rawFigures: [Int: RoundTrips] = [:]
    var brokerFigures: [Int: RoundTrips] = [:]
    for clients in [1, 8] {
        let perClient = (clients == 1 ? 20_000 : 6_000) / scale
        // The runs alternate, twice, and each keeps its better half, so a burst of noise on the
        // shared machine does not land on one side only.
        var raw: [RoundTrips] = []
        var forwarded: [RoundTrips] = []
        var through: [RoundTrips] = []
        for _ in 0..<2 {
            raw.append(try await rawEcho(clients: clients, perClient: perClient, body: body))
            forwarded.append(try await forwarderEcho(clients: clients, workers: 4, perClient: perClient, body: body))
            let before = broker.cpuSeconds()
            let switchesBefore = processContextSwitches(broker.process.processIdentifier)
            var figures = try await brokerEcho(endpoint: endpoint, clients: clients, workers: 4, perClient: perClient, body: body)
            let after = broker.cpuSeconds()
            figures.middleCPU = (after.user + after.system - before.user - before.system) / Double(figures.latencies.count)
            figures.middleSwitches =
                Double(processContextSwitches(broker.process.processIdentifier) - switchesBefore) / Double(figures.latencies.count)
            through.append(figures)
        }
        let rawBest = raw.max { $0.perSecond < $1.perSecond }!
        let forwarderBest = forwarded.max { $0.perSecond < $1.perSecond }!
        let brokerBest = through.max { $0.perSecond < $1.perSecond }!
        rawFigures[clients] = rawBest
        brokerFigures[clients] = brokerBest
        func p50(_ figures: RoundTrips, over base: RoundTrips) -> Double {
            seconds(figures.percentile(0.5)) / seconds(base.percentile(0.5))
        }
        let name = "\(clients) client\(clients == 1 ? "" : "s")"
        row("raw DEALER↔ROUTER echo, \(name) (baseline)", rawBest)
        row(
            "through zmq_proxy (no logic: the floor), 4 workers, \(name)", forwarderBest,
            String(
                format: "p50 %.2f× raw, throughput %.2f× raw; forwarder CPU %.1f µs and %.1f context switches a round trip",
                p50(forwarderBest, over: rawBest), forwarderBest.perSecond / rawBest.perSecond, (forwarderBest.middleCPU ?? 0) * 1e6,
                forwarderBest.middleSwitches ?? 0)
        )
        row(
            "through the broker, MDP/0.2, 4 workers, \(name)", brokerBest,
            String(
                format:
                    "p50 %.2f× raw, throughput %.2f× raw, %.2f× zmq_proxy; broker CPU %.1f µs and %.1f context switches a round trip; clients and workers CPU %.1f µs and %.1f context switches a round trip",
                p50(brokerBest, over: rawBest), brokerBest.perSecond / rawBest.perSecond, brokerBest.perSecond / forwarderBest.perSecond,
                (brokerBest.middleCPU ?? 0) * 1e6, brokerBest.middleSwitches ?? 0, (brokerBest.sidesCPU ?? 0) * 1e6,
                brokerBest.sidesSwitches ?? 0)
        )
    }
    try await asyncRows(against: brokerFigures[8]!)
    await broker.stop()

    print("\n| measurement | round trips/s | latency |\n|---|---|---|")
    for (name, value, note) in rows { print("| \(name) | \(value) | \(note) |") }
}

/// Runs `clients` threads, each making `perClient` round trips with `exchange`.
func timedClients(
    clients: Int, perClient: Int, exchange: @escaping @Sendable (Int) throws -> (() throws -> Void)
) async throws
    -> RoundTrips
{
    let start = ContinuousClock.now
    let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
        for index in 0..<clients {
            group.addTask {
                try await onThread { () throws -> [Duration] in
                    let roundTrip = try exchange(index)
                    var samples: [Duration] = []
                    samples.reserveCapacity(perClient)
                    for _ in 0..<perClient {
                        let begin = ContinuousClock.now
                        try roundTrip()
                        samples.append(ContinuousClock.now - begin)
                    }
                    return samples
                }
            }
        }
        return try await group.reduce(into: [Duration]()) { $0 += $1 }
    }
    let elapsed = ContinuousClock.now - start
    return RoundTrips(latencies: latencies, seconds: Double(elapsed.wholeMilliseconds) / 1000)
}

/// The same load from one thread: `clients` sockets, each with one request outstanding, served
/// by zmq_poll. Fewer threads compete with the broker for the two cores than with a thread per
/// client. `send` sends a request on a socket; `check` validates a reply.
func polledClients(
    clients: Int, perClient: Int, open: @escaping @Sendable () throws -> Socket, request: [Data],
    check: @escaping @Sendable ([Data]) -> Bool
) async throws -> RoundTrips {
    let start = ContinuousClock.now
    let latencies = try await onThread { () throws -> [Duration] in
        let sockets = try (0..<clients).map { _ in try open() }
        let poller = Poller()
        for socket in sockets { poller.add(socket) }
        var sentAt = [ContinuousClock.Instant](repeating: .now, count: clients)
        var done = [Int](repeating: 0, count: clients)
        var samples: [Duration] = []
        samples.reserveCapacity(clients * perClient)
        for (index, socket) in sockets.enumerated() {
            sentAt[index] = .now
            try socket.send(request)
        }
        var remaining = clients * perClient
        while remaining > 0 {
            try poller.poll(timeout: 5000)
            for (index, socket) in sockets.enumerated() where poller.returned(index).contains(.readable) {
                while let reply = try socket.receive(dontWait: true) {
                    guard check(reply.frames) else { throw BenchFailure(description: "unexpected reply") }
                    samples.append(ContinuousClock.now - sentAt[index])
                    done[index] += 1
                    remaining -= 1
                    if done[index] < perClient {
                        sentAt[index] = .now
                        try socket.send(request)
                    }
                }
            }
        }
        for socket in sockets { socket.close() }
        return samples
    }
    return RoundTrips(latencies: latencies, seconds: Double((ContinuousClock.now - start).wholeMilliseconds) / 1000)
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
}

/// The baseline: a ROUTER on its own thread sends every message straight back.
func rawEcho(clients: Int, perClient: Int, body: [Data]) async throws -> RoundTrips {
    let context = try Context()
    let ready = Mutex<String?>(nil)
    let stop = Mutex(false)
    let server = Thread {
        guard let router = try? context.socket(.router, linger: 0), (try? router.bind("tcp://127.0.0.1:*")) != nil else { return }
        ready.withLock { $0 = try? router.lastEndpoint() }
        let poller = Poller()
        poller.add(router)
        while !stop.withLock({ $0 }) {
            _ = try? poller.poll(timeout: 100)
            while let message = try? router.receive(dontWait: true) { _ = try? router.send(message.frames) }
        }
        router.close()
    }
    server.start()
    try await waitUntil("the echo server binds") { ready.withLock { $0 } != nil }
    let endpoint = ready.withLock { $0 }!
    if polledHarness {
        let figures = try await polledClients(
            clients: clients, perClient: perClient,
            open: {
                let dealer = try context.socket(.dealer, linger: 0)
                try dealer.connect(endpoint)
                return dealer
            }, request: body, check: { $0.count == body.count })
        stop.withLock { $0 = true }
        try await waitUntil("the echo server stops") { server.isFinished }
        await context.terminate()
        return figures
    }
    let figures = try await timedClients(clients: clients, perClient: perClient) { _ in
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.connect(endpoint)
        return {
            try dealer.send(body)
            guard try dealer.receive() != nil else { throw BenchFailure(description: "echo lost") }
        }
    }
    stop.withLock { $0 = true }
    try await waitUntil("the echo server stops") { server.isFinished }
    await context.terminate()
    return figures
}

/// The floor of a broker: the raw echo's clients and `workers` echo sockets on one thread, with
/// libzmq's `zmq_proxy` between them on a context of its own (ROUTER in front, DEALER behind).
/// A worker gets [client identity, body…] and sends it back as it came.
func forwarderEcho(clients: Int, workers: Int, perClient: Int, body: [Data]) async throws -> RoundTrips {
    let threadsBefore = Set(threads(of: "self"))
    let forwarderContext = try Context()
    let endpoints = Mutex<(front: String, back: String)?>(nil)
    let control = "inproc://bench-forwarder-control"
    let forwarder = Thread {
        guard let front = try? forwarderContext.socket(.router, linger: 0), (try? front.bind("tcp://127.0.0.1:*")) != nil,
            let back = try? forwarderContext.socket(.dealer, linger: 0), (try? back.bind("tcp://127.0.0.1:*")) != nil,
            let steer = try? forwarderContext.socket(.pair, linger: 0), (try? steer.bind(control)) != nil,
            let frontEndpoint = try? front.lastEndpoint(), let backEndpoint = try? back.lastEndpoint()
        else { return }
        endpoints.withLock { $0 = (frontEndpoint, backEndpoint) }
        // Returns when the control socket says TERMINATE.
        _ = try? front.withHandle { frontHandle in
            try back.withHandle { backHandle in
                try steer.withHandle { steerHandle in zmq_proxy_steerable(frontHandle, backHandle, nil, steerHandle) }
            }
        }
        for socket in [front, back, steer] { socket.close() }
    }
    forwarder.name = "bench-forwarder"
    forwarder.start()
    try await waitUntil("the forwarder binds") { endpoints.withLock { $0 } != nil }
    let (front, back) = endpoints.withLock { $0 }!
    // The forwarder's CPU, as a broker process's would be counted: its thread and its context's
    // libzmq threads (made with its first socket), the threads this process did not have before.
    let forwarderThreads = threads(of: "self").filter { !threadsBefore.contains($0) && threadIsForwarder($0) }
    func forwarderCPU() -> Double {
        forwarderThreads.reduce(0) { total, thread in
            let (user, system) = processCPUSeconds("self/task/\(thread)")
            return total + user + system
        }
    }
    func forwarderSwitches() -> Int { forwarderThreads.reduce(0) { $0 + contextSwitches("self/task/\($1)") } }

    let context = try Context()
    let stop = Mutex(false)
    let connected = Mutex(false)
    let workerThread = Thread {
        var sockets: [Socket] = []
        for _ in 0..<workers {
            guard let socket = try? context.socket(.dealer, linger: 0), (try? socket.connect(back)) != nil else { return }
            sockets.append(socket)
        }
        connected.withLock { $0 = true }
        let poller = Poller()
        for socket in sockets { poller.add(socket) }
        while !stop.withLock({ $0 }) {
            _ = try? poller.poll(timeout: 100)
            for socket in sockets {
                while let message = try? socket.receive(dontWait: true) { _ = try? socket.send(message.frames) }
            }
        }
        for socket in sockets { socket.close() }
    }
    workerThread.start()
    try await waitUntil("the echo workers connect") { connected.withLock { $0 } }
    // One warm-up round trip per worker, so every worker's connection is up before timing starts
    // (the DEALER behind deals requests round-robin over the connected workers).
    _ = try await timedClients(clients: 1, perClient: workers) { _ in
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.connect(front)
        return {
            try dealer.send(body)
            _ = try dealer.receive()
        }
    }
    let cpuBefore = forwarderCPU()
    let switchesBefore = forwarderSwitches()
    var figures = try await timedClients(clients: clients, perClient: perClient) { _ in
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.connect(front)
        return {
            try dealer.send(body)
            guard let reply = try dealer.receive(), reply.frames.count == body.count else {
                throw BenchFailure(description: "not an echo through the forwarder")
            }
        }
    }
    figures.middleCPU = (forwarderCPU() - cpuBefore) / Double(figures.latencies.count)
    figures.middleSwitches = Double(forwarderSwitches() - switchesBefore) / Double(figures.latencies.count)
    stop.withLock { $0 = true }
    try await waitUntil("the echo workers stop") { workerThread.isFinished }
    await context.terminate()
    let steer = try forwarderContext.socket(.pair, linger: 0)
    try steer.connect(control)
    try steer.send([Data("TERMINATE".utf8)])
    try await waitUntil("the forwarder stops") { forwarder.isFinished }
    steer.close()
    await forwarderContext.terminate()
    return figures
}

/// Context switches (voluntary and not) of a process or thread (`PID`, `self/task/TID`) so far.
func contextSwitches(_ path: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(path)/status", encoding: .utf8)) ?? ""
    return status.split(separator: "\n").reduce(0) { total, line in
        guard line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") else { return total }
        return total + (Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0)
    }
}

/// Context switches of every thread of a process so far.
func processContextSwitches(_ pid: Int32) -> Int {
    threads(of: "\(pid)").reduce(0) { $0 + contextSwitches("\(pid)/task/\($1)") }
}

/// A process's thread ids (`PID` or `self`), from /proc/PROCESS/task.
func threads(of process: String) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task")) ?? []
}

/// Whether a thread of this process is the forwarder's or one of libzmq's (by its name).
func threadIsForwarder(_ thread: String) -> Bool {
    let name = (try? String(contentsOfFile: "/proc/self/task/\(thread)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? ""
    return name == "bench-forwarder" || name.hasPrefix("ZMQbg/")
}

/// Round trips through the broker: raw MDP/0.2 clients, and `workers` raw MDP/0.2 worker
/// sockets on one thread that echo each body back as FINAL.
func brokerEcho(
    endpoint: String, clients: Int, workers: Int, perClient: Int, body: [Data], clientOptions: [SocketOption] = [],
    workerOptions: [SocketOption] = []
) async throws -> RoundTrips {
    let context = try Context()
    let stop = Mutex(false)
    let registered = Mutex(0)
    let service = "bench.echo"
    let workerThread = Thread {
        var sockets: [Socket] = []
        for _ in 0..<workers {
            guard let socket = try? context.socket(.dealer, linger: 0), (try? socket.set(workerOptions)) != nil,
                (try? socket.connect(endpoint)) != nil
            else { return }
            _ = try? socket.send(Majordomo.worker(.v02, .ready, service: service))
            sockets.append(socket)
        }
        registered.withLock { $0 = workers }
        let poller = Poller()
        for socket in sockets { poller.add(socket) }
        var lastBeat = ContinuousClock.now
        while !stop.withLock({ $0 }) {
            _ = try? poller.poll(timeout: 100)
            for socket in sockets {
                while let message = try? socket.receive(dontWait: true) {
                    let frames = message.frames
                    // ["MDPW02"][0x02][client][""][body…] → FINAL with the same body.
                    guard frames.count >= 4, frames[1] == Data([0x02]) else { continue }
                    _ = try? socket.send(Majordomo.worker(.v02, .final, client: frames[2], body: Array(frames[4...])))
                }
            }
            if ContinuousClock.now - lastBeat >= .seconds(1) {
                for socket in sockets { _ = try? socket.send(Majordomo.worker(.v02, .heartbeat)) }
                lastBeat = .now
            }
        }
        for socket in sockets {
            _ = try? socket.send(Majordomo.worker(.v02, .disconnect))
            socket.close()
        }
    }
    workerThread.start()
    try await waitUntil("workers registered") { registered.withLock { $0 } == workers }
    let request = Majordomo.clientRequest(.v02, service: service, body: body)
    // One warm-up request, so every worker is known to the broker before timing starts.
    _ = try await timedClients(clients: 1, perClient: 1) { _ in
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.set(clientOptions)
        try dealer.connect(endpoint)
        return {
            try dealer.send(request)
            _ = try dealer.receive()
            dealer.close()
        }
    }
    if polledHarness {
        let figures = try await polledClients(
            clients: clients, perClient: perClient,
            open: {
                let dealer = try context.socket(.dealer, linger: 0)
                try dealer.set(clientOptions)
                try dealer.connect(endpoint)
                return dealer
            }, request: request, check: { $0.count == 3 + body.count && $0[1] == Data([0x03]) })
        stop.withLock { $0 = true }
        try await waitUntil("the workers stop") { workerThread.isFinished }
        await context.terminate()
        return figures
    }
    let cpuBefore = ownCPUSeconds()
    let switchesBefore = ownContextSwitches()
    var figures = try await timedClients(clients: clients, perClient: perClient) { _ in
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.set(clientOptions)
        try dealer.connect(endpoint)
        return {
            try dealer.send(request)
            guard let reply = try dealer.receive(), reply.frames.count == 3 + body.count, reply.frames[1] == Data([0x03]) else {
                throw BenchFailure(description: "not a FINAL echo")
            }
        }
    }
    figures.sidesCPU = (ownCPUSeconds() - cpuBefore) / Double(figures.latencies.count)
    figures.sidesSwitches = Double(ownContextSwitches() - switchesBefore) / Double(figures.latencies.count)
    stop.withLock { $0 = true }
    try await waitUntil("the workers stop") { workerThread.isFinished }
    await context.terminate()
    return figures
}

/// The same load through the async library: `clients` concurrent tasks on one `ServiceClient`,
/// with the broker's CPU and this process's while they are timed.
///
/// `onIOThread`: the client tasks prefer the I/O thread as their executor, and the workers run
/// there (`ServiceWorker.Settings.runsOnIOThread`).
func libraryEcho(broker: BrokerProcess, clients: Int, workers: Int, perClient: Int, onIOThread: Bool = false) async throws -> RoundTrips {
    let endpoint = broker.endpoints.service
    let context = try Context()
    let io = try IOThread(context: context)
    var logger = Logger(label: "bench")
    logger.logLevel = .error
    var settings = ServiceWorker.Settings()
    settings.concurrency = workers
    settings.runsOnIOThread = onIOThread
    let worker = ServiceWorker(service: "bench.library", io: io, endpoint: endpoint, settings: settings, logger: logger) { request, _ in
        request.content
    }
    let running = Task { try await worker.run() }
    let client = ServiceClient(io: io, endpoint: endpoint, logger: logger)
    try await waitUntil("library workers registered") {
        (try? await client.directory().services.first { $0.name == "bench.library" }?.workers) == workers
    }
    let content = Data(#"{"site_id":12,"include_disabled":false}"#.utf8)
    let brokerBefore = broker.cpuSeconds()
    var figures = try await timedTasks(clients: clients, perClient: perClient, executor: onIOThread ? io : nil) { _ in
        _ = try await client.request(service: "bench.library", operation: "programs.list", content: content)
    }
    let brokerAfter = broker.cpuSeconds()
    figures.middleCPU = (brokerAfter.user + brokerAfter.system - brokerBefore.user - brokerBefore.system) / Double(figures.latencies.count)
    worker.stop()
    try await running.value
    await client.close()
    await io.shutdown()
    await context.terminate()
    return figures
}

/// The floor of any async library on `IOThread`: the raw MDP/0.2 frames of `brokerEcho`, sent
/// and received through `AsyncSocket` by tasks, with nothing of the library's own (no envelope
/// made or read, no request id, no routing of replies, no time-outs). Each client task has a
/// socket of its own, posts its request (no suspension) and awaits the reply (one); each worker
/// task awaits a request and posts the FINAL, as `ServiceWorker` does. What the library costs
/// above this row is its own work; what this row costs above the raw sockets is the bridge
/// between tasks and the I/O thread.
///
/// `onIOThread`: the tasks run on the I/O thread itself (`IOThread` as their executor), not on
/// the global pool.
func bridgeEcho(
    endpoint: String, clients: Int, workers: Int, perClient: Int, body: [Data], onIOThread: Bool = false
) async throws -> RoundTrips {
    let context = try Context()
    let io = try IOThread(context: context)
    let service = "bench.bridge"
    let request = Majordomo.clientRequest(.v02, service: service, body: body)
    var workerSockets: [AsyncSocket] = []
    for _ in 0..<workers {
        let socket = try await io.open(.dealer, linger: 0) { try $0.connect(endpoint) }
        try await socket.send(Majordomo.worker(.v02, .ready, service: service))
        workerSockets.append(socket)
    }
    let serving = Task { [workerSockets] in
        try await withThrowingTaskGroup(of: Void.self) { group in
            for socket in workerSockets {
                // The broker's liveness wants a HEARTBEAT now and then; it costs nothing per round trip.
                group.addTask {
                    while !Task.isCancelled {
                        try await Task.sleep(for: .seconds(1))
                        socket.post(Majordomo.worker(.v02, .heartbeat), deadline: nil) { _ in }
                    }
                }
                group.addTask(executorPreference: onIOThread ? io : nil) {
                    while !Task.isCancelled {
                        let frames = try await socket.receive().frames
                        // ["MDPW02"][0x02][client][""][body…] → FINAL with the same body.
                        guard frames.count >= 4, frames[1] == Data([0x02]) else { continue }
                        socket.post(Majordomo.worker(.v02, .final, client: frames[2], body: Array(frames[4...])), deadline: nil) { _ in }
                    }
                }
            }
            try await group.waitForAll()
        }
    }
    var clientSockets: [AsyncSocket] = []
    for _ in 0..<clients { clientSockets.append(try await io.open(.dealer, linger: 0) { try $0.connect(endpoint) }) }
    // One warm-up round trip per client, so every connection is up and every worker known.
    for socket in clientSockets {
        try await socket.send(request)
        _ = try await socket.receive()
    }
    let figures = try await timedTasks(clients: clients, perClient: perClient, executor: onIOThread ? io : nil) {
        [clientSockets] index in
        let socket = clientSockets[index]
        socket.post(request, deadline: nil) { _ in }
        let reply = try await socket.receive().frames
        guard reply.count == 3 + body.count, reply[1] == Data([0x03]) else { throw BenchFailure(description: "not a FINAL echo") }
    }
    serving.cancel()
    _ = try? await serving.value
    for socket in workerSockets { try? await socket.send(Majordomo.worker(.v02, .disconnect)) }
    await io.shutdown()
    await context.terminate()
    return figures
}

/// Runs `clients` tasks (on `executor` when given, else on the global pool), each making
/// `perClient` round trips with `exchange(its index)`, timing each, with this process's CPU and
/// context switches per round trip meanwhile.
func timedTasks(
    clients: Int, perClient: Int, executor: (any TaskExecutor)?, _ exchange: @escaping @Sendable (Int) async throws -> Void
) async throws -> RoundTrips {
    let cpuBefore = ownCPUSeconds()
    let switchesBefore = ownContextSwitches()
    let start = ContinuousClock.now
    let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
        for index in 0..<clients {
            group.addTask(executorPreference: executor) {
                var samples: [Duration] = []
                samples.reserveCapacity(perClient)
                for _ in 0..<perClient {
                    let begin = ContinuousClock.now
                    try await exchange(index)
                    samples.append(ContinuousClock.now - begin)
                }
                return samples
            }
        }
        return try await group.reduce(into: [Duration]()) { $0 += $1 }
    }
    let seconds = Double((ContinuousClock.now - start).wholeMilliseconds) / 1000
    return RoundTrips(
        latencies: latencies, seconds: seconds, sidesCPU: (ownCPUSeconds() - cpuBefore) / Double(latencies.count),
        sidesSwitches: Double(ownContextSwitches() - switchesBefore) / Double(latencies.count))
}
