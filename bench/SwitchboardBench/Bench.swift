// Switchboard benchmarks: one run, one table, every figure next to a baseline measured in the
// same run on the same machine (the machine is shared and noisy; only ratios travel).
//
//   SWITCHBOARD_BENCH=1 swift run -c release switchboard-bench [--quick] [--ingest-only N [--single-acks] | --service | --security | --groups [--sustained | --floor] | --emulator [--nio-executor] | --client | --codec | --journal | --eto-calls | --growth [N]]
//
// The broker under test is the real `switchboard-broker` executable, started as a child
// process (its RSS is read from /proc). Producers and subscribers are plain libzmq sockets on
// threads of this process, so the figures measure the broker, not a client library.

import Foundation
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Synchronization
import ZeroMQ

@main
struct Bench {
    /// A failure (a program missing beside the bench, a broker that did not start) is one line
    /// and exit status 1, not a crash report.
    static func main() async {
        do {
            try await run()
        } catch {
            FileHandle.standardError.write(Data("switchboard-bench: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run() async throws {
        let quick = CommandLine.arguments.contains("--quick")
        if CommandLine.arguments.contains("--service") {
            try await serviceBench(quick: quick)
            return
        }
        if CommandLine.arguments.contains("--security") {
            try await securityBench(quick: quick)
            return
        }
        if let flag = CommandLine.arguments.firstIndex(of: "--filemaker-writes") {
            try await fileMakerWrites(arguments: Array(CommandLine.arguments[(flag + 1)...]))
            return
        }
        if CommandLine.arguments.contains("--client") {
            try await clientBench(quick: quick)
            return
        }
        if CommandLine.arguments.contains("--emulator") {
            try await emulatorBench(quick: quick, takeOver: CommandLine.arguments.contains("--nio-executor"))
            return
        }
        if CommandLine.arguments.contains("--groups") {
            try await groupBench(
                quick: quick, sustainedOnly: CommandLine.arguments.contains("--sustained") || CommandLine.arguments.contains("--floor"),
                floorRounds: CommandLine.arguments.contains("--floor") ? 3 : 0)
            return
        }
        if CommandLine.arguments.contains("--metrics") {
            try await metricsBench(quick: quick)
            return
        }
        if CommandLine.arguments.contains("--journal") {
            try await journalStoreBench(quick: quick)
            return
        }
        if let flag = CommandLine.arguments.firstIndex(of: "--growth") {
            let given = flag + 1 < CommandLine.arguments.count ? Int(CommandLine.arguments[flag + 1]) : nil
            try await growthBench(count: given ?? (quick ? 1_000_000 : 10_000_000), quick: quick)
            return
        }
        if CommandLine.arguments.contains("--eto-calls") {
            try await etoCallsBench(quick: quick)
            return
        }
        if let flag = CommandLine.arguments.firstIndex(of: "--ingest-only") {
            // One broker, one run of 4 producers, nothing else: for A/B runs of two builds.
            guard flag + 1 < CommandLine.arguments.count, let count = Int(CommandLine.arguments[flag + 1]), count >= 4 else {
                throw BenchFailure(description: "--ingest-only needs a count of events, at least 4")
            }
            let directory = try TemporaryDirectory("bench-ingest-only")
            defer { directory.remove() }
            let broker = try await BrokerProcess.start(directory: directory.path("ingest"))
            let version: ProtocolVersion = CommandLine.arguments.contains("--single-acks") ? .current : .batchedAcks
            let measured = try await ingest(broker: broker.endpoints, producers: 4, perProducer: count / 4, window: 1000, version: version)
            await broker.stop()
            print("ingested \(measured.count) events at \(rate(measured))")
            return
        }
        if CommandLine.arguments.contains("--codec") {
            for (name, micros) in codecCost() { print(String(format: "%-32@ %8.2f µs/event", name as NSString, micros)) }
            return
        }
        let scale = quick ? 10 : 1
        var rows: [(String, String, String)] = []
        func row(_ name: String, _ value: String, _ note: String = "") {
            rows.append((name, value, note))
            print(String(format: "%-58@ %14@  %@", name as NSString, value as NSString, note as NSString))
        }
        print(
            "Switchboard benchmarks, \(Timestamp.now()), \(ProcessInfo.processInfo.activeProcessorCount) cores\(quick ? " (quick: 1/10 of the counts)" : "")"
        )
        let sample = Sample.event(producer: "p0", seq: 1)
        let eventBytes = sample.reduce(0) { $0 + $1.count }
        row("event size on the wire (6 frames)", "\(eventBytes) B")

        let raw = try rawDealerRouter(messages: 400_000 / scale, frames: sample)
        row("raw libzmq DEALER→ROUTER, tcp, event-sized (ceiling)", rate(raw))
        let rawPubSub = try rawPubSub(messages: 400_000 / scale, frames: [Data("checkin.recorded".utf8)] + sample)
        row("raw libzmq XPUB→SUB, tcp, event-sized", rate(rawPubSub))

        let directory = try TemporaryDirectory("bench")
        defer { directory.remove() }
        var broker = try await BrokerProcess.start(directory: directory.path("ingest"))
        let one = try await ingest(broker: broker.endpoints, producers: 1, perProducer: 100_000 / scale, window: 1000)
        row("durable-acked ingest, 1 producer, window 1000", rate(one), ratio(one, raw) + " of raw")
        let cpuBefore = broker.cpuSeconds()
        let four = try await ingest(broker: broker.endpoints, producers: 4, perProducer: 60_000 / scale, window: 1000, prefix: "q")
        let cpuAfter = broker.cpuSeconds()
        let userPerEvent = (cpuAfter.user - cpuBefore.user) / Double(four.count) * 1e6
        let systemPerEvent = (cpuAfter.system - cpuBefore.system) / Double(four.count) * 1e6
        row("durable-acked ingest, 4 producers, window 1000 each (ACKS, 1.1)", rate(four), ratio(four, raw) + " of raw")
        row(
            "broker CPU per event in that run (all its threads)", String(format: "%.1f µs", userPerEvent + systemPerEvent),
            String(
                format: "%.1f µs user + %.1f µs system; one free core would allow about %.0f/s", userPerEvent, systemPerEvent,
                1e6 / (userPerEvent + systemPerEvent)))
        let single = try await ingest(
            broker: broker.endpoints, producers: 4, perProducer: 60_000 / scale, window: 1000, prefix: "r", version: .current)
        row("durable-acked ingest, 4 producers, an ACK per event (1.0)", rate(single), ratio(single, raw) + " of raw")
        row("ACKS against an ACK per event, same broker, same run", ratio(four, single))
        await broker.stop()

        for subscribers in [1, 4] {
            broker = try await BrokerProcess.start(directory: directory.path("fanout-\(subscribers)"))
            let (ingestRate, fanout, received) = try await fanoutRun(
                broker: broker.endpoints, subscribers: subscribers, perProducer: 50_000 / scale)
            row(
                "fan-out to \(subscribers) subscriber\(subscribers == 1 ? "" : "s") (4 producers feeding)", rate(fanout),
                "\(ratio(fanout, raw)) of raw D→R, \(ratio(fanout, ingestRate)) of its ingest, \(received)% delivered live")
            await broker.stop()
        }

        broker = try await BrokerProcess.start(directory: directory.path("rss"))
        let baseline = broker.rssKilobytes()
        let million = 1_000_000 / scale
        let big = try await ingest(broker: broker.endpoints, producers: 4, perProducer: million / 4, window: 1000, prefix: "m")
        let rss = broker.rssKilobytes()
        row("broker RSS at start", "\(baseline / 1024) MB")
        row("broker RSS after \(million) journaled events", "\(rss / 1024) MB", "ingest of those ran at \(rate(big))")
        await broker.stop()

        print("\n| measurement | figure | note |\n|---|---|---|")
        for (name, value, note) in rows { print("| \(name) | \(value) | \(note) |") }
    }

    static func rate(_ measured: Measured) -> String { String(format: "%.0f/s", measured.perSecond) }
    static func ratio(_ a: Measured, _ b: Measured) -> String { String(format: "%.2f×", a.perSecond / b.perSecond) }
}

struct Measured {
    var count: Int
    var seconds: Double
    var perSecond: Double { Double(count) / seconds }
}

/// Pre-built EVENT frames, so the producers' own cost stays out of the figures.
enum Sample {
    static let content: Data = {
        let checkIn = CheckIn(
            participant: .init(firstName: "Ana", lastName: "Diaz", dateOfBirth: "1990-04-01"), siteID: 12, programID: 3,
            kioskID: "riverside-1", checkedInAt: "2026-11-22T21:04:00.000Z")
        return try! WireJSON.encode(checkIn)
    }()

    /// - Parameter version: 1.1 (the default) reads one ACKS per commit; 1.0 an ACK per event.
    static func event(producer: String, seq: Int64, version: ProtocolVersion = .batchedAcks) -> [Data] {
        let header = """
            {"event_id":"\(UUIDv7.string())","producer":"\(producer)","producer_seq":\(seq),"schema":"checkin.recorded/1","session":"bench","time":"2026-11-22T21:04:00.120Z","type":"checkin.recorded"}
            """
        return [Envelope.versionFrame(version), Data("EVENT".utf8), Data(header.utf8), Data("{}".utf8), Data("{}".utf8), content]
    }
}

/// Runs `body` on a new thread (sockets stay on one thread) and returns its result.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

func rawDealerRouter(messages: Int, frames: [Data]) throws -> Measured {
    let context = try Context()
    let router = try context.socket(.router, linger: 0)
    try router.set([.receiveHighWaterMark(100_000)])
    try router.bind("tcp://127.0.0.1:*")
    let endpoint = try router.lastEndpoint()
    let sender = Thread {
        guard let dealer = try? context.socket(.dealer, linger: 0) else { return }
        try? dealer.set(.sendHighWaterMark(100_000))
        try? dealer.connect(endpoint)
        for _ in 0..<messages { _ = try? dealer.send(frames) }
        _ = try? dealer.receive()  // stays open until the receiver is done
        dealer.close()
    }
    sender.start()
    var first = try router.receive()!
    let start = ContinuousClock.now
    for _ in 1..<messages { first = try router.receive()! }
    let seconds = Double(start.duration(to: .now).wholeMilliseconds) / 1000
    try router.send([first.frames[0], Data("done".utf8)])
    router.close()
    return Measured(count: messages - 1, seconds: seconds)
}

func rawPubSub(messages: Int, frames: [Data]) throws -> Measured {
    let context = try Context()
    let bound = DispatchSemaphore(value: 0)
    let endpoint = Mutex<String>("")
    // The publisher lives on its own thread, from creation to close.
    let sender = Thread {
        guard let publisher = try? context.socket(.xpublisher, linger: 0) else { return }
        try? publisher.set([.sendHighWaterMark(0), .xpubNoDrop(true)])
        try? publisher.bind("tcp://127.0.0.1:*")
        endpoint.withLock { $0 = (try? publisher.lastEndpoint()) ?? "" }
        bound.signal()
        _ = try? publisher.receive()  // the subscription has arrived
        for _ in 0..<messages { _ = try? publisher.send(frames) }
        try? publisher.set(.receiveTimeout(milliseconds: 5000))
        _ = try? publisher.receive()  // the unsubscription: the reader is done
        publisher.close()
    }
    sender.start()
    bound.wait()
    let subscriber = try context.socket(.subscriber, linger: 0)
    try subscriber.set([.receiveHighWaterMark(0), .subscribe(Data())])
    try subscriber.connect(endpoint.withLock { $0 })
    _ = try subscriber.receive()
    let start = ContinuousClock.now
    var received = 1
    while received < messages {
        _ = try subscriber.receive()
        received += 1
    }
    let seconds = Double(start.duration(to: .now).wholeMilliseconds) / 1000
    subscriber.close()
    return Measured(count: received - 1, seconds: seconds)
}

/// `producers` threads, each keeping up to `window` EVENTs unACKed, against the broker.
func ingest(
    broker: BrokerEndpointsFile, producers: Int, perProducer: Int, window: Int, prefix: String = "p",
    version: ProtocolVersion = .batchedAcks, options: @escaping @Sendable (Int) -> [SocketOption] = { _ in [] },
    progress: IngestProgress? = nil
) async throws -> Measured {
    let context = try Context()
    let batches = (0..<producers).map { p in
        (1...perProducer).map { Sample.event(producer: "\(prefix)\(p)", seq: Int64($0), version: version) }
    }
    let start = ContinuousClock.now
    let counts = try await withThrowingTaskGroup(of: Int.self) { group in
        for (index, batch) in batches.enumerated() {
            group.addTask {
                try await onThread {
                    let dealer = try context.socket(.dealer, linger: 0)
                    try dealer.set([.sendHighWaterMark(Int32(window * 2)), .receiveHighWaterMark(Int32(window * 2))] + options(index))
                    try dealer.connect(broker.ingest)
                    var sent = 0
                    var acked = 0
                    while acked < batch.count {
                        while sent < batch.count && sent - acked < window {
                            try dealer.send(batch[sent])
                            sent += 1
                        }
                        var answer = try dealer.receive()
                        while let reply = answer {
                            if reply.frames.count > 1 && reply.frames[1] == Data("ACK".utf8) {
                                acked += 1
                                progress?.add(1)
                            }
                            if reply.frames.count > 1 && reply.frames[1] == Data("ACKS".utf8) {
                                // What a producer does with it: read every pair.
                                let entries = try Acks(Envelope.parse(reply.frames)).entries.count
                                acked += entries
                                progress?.add(entries)
                            }
                            answer = try dealer.receive(dontWait: true)
                        }
                    }
                    dealer.close()
                    return acked
                }
            }
        }
        var total = 0
        for try await count in group { total += count }
        return total
    }
    let seconds = Double(start.duration(to: .now).wholeMilliseconds) / 1000
    await context.terminate()
    return Measured(count: counts, seconds: seconds)
}

/// How many events the producers of an `ingest` run have seen acknowledged so far, for a
/// thread that paces itself by it.
final class IngestProgress: Sendable {
    private let acked = Atomic<Int>(0)
    func add(_ count: Int) { acked.add(count, ordering: .releasing) }
    var count: Int { acked.load(ordering: .acquiring) }
}

/// Subscribers count the EVENTs they receive while 4 producers feed the broker.
func fanoutRun(broker: BrokerEndpointsFile, subscribers: Int, perProducer: Int) async throws -> (Measured, Measured, Int) {
    let context = try Context()
    let total = perProducer * 4
    let ready = DispatchSemaphore(value: 0)
    let results = Mutex<[(Int, Double)]>([])
    let threads = (0..<subscribers).map { _ in
        Thread {
            guard let sub = try? context.socket(.subscriber, linger: 0) else { return }
            try? sub.set([
                .receiveHighWaterMark(200_000), .subscribe(Data("checkin.".utf8)), .subscribe(Data("$sys.".utf8)),
                .receiveTimeout(milliseconds: 3000),
            ])
            try? sub.connect(broker.fanout)
            _ = try? sub.receive()  // the welcome: connected and subscribed
            ready.signal()
            var received = 0
            var start: ContinuousClock.Instant?
            var last = ContinuousClock.now
            // Ends when every event came, or 3 s passed without one (HEADs keep arriving).
            while received < total, last.duration(to: .now) < .seconds(3), let message = try? sub.receive() {
                guard message.frames.count == 7, message.frames[2] == Data("EVENT".utf8) else { continue }
                if start == nil { start = .now }
                received += 1
                last = .now
            }
            let seconds = start.map { Double($0.duration(to: last).wholeMilliseconds) / 1000 } ?? 1
            results.withLock { $0.append((received, max(seconds, 0.001))) }
            sub.close()
        }
    }
    for thread in threads { thread.start() }
    for _ in threads { ready.wait() }
    let fed = try await ingest(broker: broker, producers: 4, perProducer: perProducer, window: 1000, prefix: "f")
    while results.withLock({ $0.count }) < subscribers { try await Task.sleep(for: .milliseconds(20)) }
    let all = results.withLock { $0 }
    let slowest = all.min { Double($0.0) / $0.1 < Double($1.0) / $1.1 }!
    let delivered = all.map(\.0).min()! * 100 / total
    await context.terminate()
    return (fed, Measured(count: slowest.0, seconds: slowest.1), delivered)
}

struct BrokerEndpointsFile: Decodable, Sendable {
    var ingest: String
    var fanout: String
    var replay: String
    var service: String
    var groups: String
}

/// The real broker executable, started from the same build directory.
struct BrokerProcess {
    let process: ChildProcess
    let endpoints: BrokerEndpointsFile

    /// - Parameter admin: `--admin`; `none` runs the broker without metrics.
    static func start(directory: String, security: [String] = ["--insecure"], admin: String = "127.0.0.1:0") async throws -> BrokerProcess {
        let file = (directory as NSString).appendingPathComponent("endpoints.json")
        let log = FileHandle(forWritingAtPath: "/dev/null")
        let process = ChildProcess(
            name: "broker", executable: "switchboard-broker",
            arguments: [
                "--data-dir", directory, "--ingest", "tcp://127.0.0.1:*", "--fanout", "tcp://127.0.0.1:*", "--replay", "tcp://127.0.0.1:*",
                "--service", "tcp://127.0.0.1:*", "--groups", "tcp://127.0.0.1:*", "--log-level", "warning", "--admin", admin,
            ] + security,
            environment: ProcessInfo.processInfo.environment, errors: log)
        try process.start()
        try await waitUntil("the broker is ready", timeout: .seconds(30)) { FileManager.default.fileExists(atPath: file) }
        let endpoints = try JSONDecoder().decode(BrokerEndpointsFile.self, from: Data(contentsOf: URL(fileURLWithPath: file)))
        return BrokerProcess(process: process, endpoints: endpoints)
    }

    func rssKilobytes() -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }

    /// User plus system CPU time the broker has used, from /proc (clock ticks of 1/100 s).
    func cpuSeconds() -> (user: Double, system: Double) { processCPUSeconds("\(process.processIdentifier)") }

    func stop() async { await process.stop() }
}

/// User plus system CPU time a process (a pid, or `self`) has used, from /proc (clock ticks of
/// 1/100 s).
func processCPUSeconds(_ pid: String) -> (user: Double, system: Double) {
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    // Fields after the command name (which is in parentheses and may hold spaces).
    guard let close = stat.lastIndex(of: ")") else { return (0, 0) }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return (0, 0) }
    return (user / 100, system / 100)
}
