// Consumer-group benchmarks (`--groups`): how fast a group delivers and collects ACKs next to
// how fast the same broker ingests in the same run, and how long a dead member's deliveries
// take to reach another member. Members are plain libzmq DEALERs on threads of this process
// that ACK at once, so the figures measure the broker, not a client library.

import Foundation
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Synchronization
import ZeroMQ

/// The bus_seqs members acked, shared by their threads. A member adds what one ACKS settles
/// at once: a lock per delivery, contended by 4 member threads, was a fifth of the members' CPU.
final class AckedSet: Sendable {
    private let seqs = Mutex<Set<Int64>>([])
    func insert(contentsOf deliveries: [HeldDelivery]) {
        seqs.withLock { seqs in for delivery in deliveries { seqs.insert(delivery.busSeq) } }
    }
    var count: Int { seqs.withLock { $0.count } }
}

/// A member thread: joins `group`, ACKs every DELIVER at once until `total` distinct events
/// were acked (or `quiet` passed without one). Returns the acked count and first/last instants.
/// With `hold`, it ACKs nothing, keeps `credit` deliveries and returns once it holds them. With
/// `batched`, it reads every DELIVER waiting and settles them with one ACKS (protocol 1.2), as
/// `GroupConsumer` does; else with an ACK each. With `batch` above 1 it asks for that many
/// deliveries per DELIVER (protocol 1.3).
func benchMember(
    context: Context, endpoint: String, group: String, credit: Int, total: Int, hold: Bool = false, quiet: Duration = .seconds(5),
    acked: AckedSet? = nil, start: GroupStart = .head, batched: Bool = true, batch: Int = 1
) throws -> (count: Int, first: ContinuousClock.Instant?, last: ContinuousClock.Instant, socket: Socket?) {
    let dealer = try context.socket(.dealer, linger: 0)
    try dealer.set([.receiveHighWaterMark(100_000), .sendHighWaterMark(100_000), .receiveTimeout(milliseconds: 200)])
    try dealer.connect(endpoint)
    let join = JoinHeader(group: group, topics: ["checkin."], credit: credit, start: start, batch: batch)
    try dealer.send(join.envelope().frames())
    var first: ContinuousClock.Instant?
    var last = ContinuousClock.now
    var count = 0
    var lastHeard = ContinuousClock.now
    var lastSent = ContinuousClock.now
    var finished: [HeldDelivery] = []
    // Until this member, or the group (`acked`, shared by its members), has `total`.
    while count < total, (acked?.count ?? 0) < total, lastHeard.duration(to: .now) < quiet {
        guard var message = try receiveOrTimeout(dealer) else {
            if lastSent.duration(to: .now) >= .milliseconds(500) {
                try dealer.send(Envelope(command: .heartbeat, header: Envelope.emptyObject).frames())
                lastSent = .now
            }
            continue
        }
        lastHeard = .now
        // This message and, batched, every other one already waiting.
        while true {
            // Each delivery's header as a member library reads it: the broker's spelling without
            // the general parse, anything else with it; a DELIVER of several (1.3) carries one
            // every four frames.
            var at = 2
            while message.frames.count >= at + 4, message.frames[1] == Data("DELIVER".utf8),
                let header = DeliverHeader.plain(message.frames[at]) ?? (try? DeliverHeader(wire: message.frames[at]))
            {
                at += 4
                if first == nil { first = .now }
                count += 1
                last = .now
                if hold {
                    if count == credit { return (count, first, last, dealer) }
                } else {
                    finished.append(HeldDelivery(busSeq: header.busSeq, attempt: header.attempt))
                }
            }
            guard batched, !hold, finished.count < GroupAcks.maximumCount, let next = try dealer.receive(dontWait: true) else { break }
            message = next
        }
        guard !finished.isEmpty else { continue }
        acked?.insert(contentsOf: finished)
        if batched {
            try dealer.send(GroupAcks(group: group, deliveries: finished).envelope().frames())
        } else {
            for delivery in finished {
                let settle = SettleHeader(.ack, group: group, busSeq: delivery.busSeq, attempt: delivery.attempt)
                try dealer.send(Envelope(command: .ack, header: settle.wireJSON()).frames())
            }
        }
        finished.removeAll(keepingCapacity: true)
        lastSent = .now
    }
    dealer.close()
    return (count, first, last, nil)
}

/// A receive that gives nil when the socket's receive timeout passes: libzmq reports that as
/// EAGAIN, which `Socket.receive()` throws (its nil is only for `dontWait`).
func receiveOrTimeout(_ socket: Socket) throws -> Message? {
    do {
        return try socket.receive()
    } catch {
        if error.isWouldBlock { return nil }
        throw error
    }
}

/// With `sustainedOnly` (`--groups --sustained`, for profiles), only the baseline and ingest
/// while 4 members consume with ACKS.
func groupBench(quick: Bool, sustainedOnly: Bool = false, floorRounds: Int = 0) async throws {
    let scale = quick ? 10 : 1
    let directory = try TemporaryDirectory("bench-groups")
    defer { directory.remove() }
    let broker = try await BrokerProcess.start(directory: directory.path("broker"))
    let endpoint = broker.endpoints.groups
    // Each phase's group is deleted after it: a group left without members would still take
    // events into its buffer (up to its limit) and hold the event cache's floor back, a cost
    // the next phase would pay for a group no one consumes.
    let adminIO = try IOThread(name: "bench-admin")
    let admin = GroupAdminClient(io: adminIO, endpoint: endpoint, settings: .init(timeout: .seconds(10)))
    print(
        "Switchboard group benchmarks, \(Timestamp.now()), \(ProcessInfo.processInfo.activeProcessorCount) cores\(quick ? " (quick)" : "")")
    func row(_ name: String, _ value: String, _ note: String = "") {
        print(String(format: "%-62@ %14@  %@", name as NSString, value as NSString, note as NSString))
    }
    let perProducer = 25_000 / scale
    let total = perProducer * 4

    // CPU of the broker and of this process (producers and members) over a phase, per event:
    // with both cores busy, what a consuming group adds per event bounds the ratio.
    func cpu() -> (broker: Double, bench: Double) {
        let (brokerUser, brokerSystem) = broker.cpuSeconds()
        let (benchUser, benchSystem) = processCPUSeconds("self")
        return (brokerUser + brokerSystem, benchUser + benchSystem)
    }
    func cpuNote(since start: (broker: Double, bench: Double), events: Int) -> String {
        let end = cpu()
        return String(
            format: "CPU per event: broker %.1f µs, producers and members %.1f µs", (end.broker - start.broker) * 1e6 / Double(events),
            (end.bench - start.bench) * 1e6 / Double(events))
    }

    // Baseline: ingest alone, 4 producers, window 1000.
    let aloneCPU = cpu()
    let alone = try await ingest(broker: broker.endpoints, producers: 4, perProducer: perProducer, window: 1000, prefix: "base")
    row("durable-acked ingest alone, 4 producers (baseline)", Bench.rate(alone), cpuNote(since: aloneCPU, events: total))

    // The floor under a group: every event leaving the broker once more, as a message of its own
    // (the fan-out to one subscriber, the same frames a DELIVER carries), with nothing to settle
    // and no state. A group delivering each event in its own DELIVER cannot cost less than this.
    let floorCPU = cpu()
    let (floorIngest, _, floorDelivered) = try await fanoutRun(broker: broker.endpoints, subscribers: 1, perProducer: perProducer)
    row(
        "ingest while 1 subscriber takes every event (floor, 1 per DELIVER)", Bench.rate(floorIngest),
        String(format: "%.2f× of ingest alone, %d%% delivered; ", floorIngest.perSecond / alone.perSecond, floorDelivered)
            + cpuNote(since: floorCPU, events: total))

    // Capacity: a group of 1 and then 4 members drains the baseline's events, already
    // journaled, from the start of the journal, with no ingest running beside it.
    for members in sustainedOnly ? [] : [1, 4] {
        let context = try Context()
        let acked = AckedSet()
        let finished = Mutex(0)
        let start = ContinuousClock.now
        let threads = (0..<members).map { _ in
            Thread {
                do {
                    _ = try benchMember(
                        context: context, endpoint: endpoint, group: "drain\(members)", credit: 256, total: total, acked: acked,
                        start: .earliest)
                } catch {
                    print("member of drain\(members) failed: \(error)")
                }
                finished.withLock { $0 += 1 }
            }
        }
        for thread in threads { thread.start() }
        while acked.count < total, start.duration(to: .now) < .seconds(120) { try await Task.sleep(for: .milliseconds(2)) }
        let drained = Measured(count: acked.count, seconds: Double(start.duration(to: .now).wholeMilliseconds) / 1000)
        row(
            "a group of \(members) drains the \(total) journaled events", Bench.rate(drained),
            String(format: "%.2f× of ingest alone (%d of %d acked, join included)", drained.perSecond / alone.perSecond, acked.count, total)
        )
        // Members see the group done within a receive time-out (200 ms) and close their sockets.
        for _ in 0..<100 where finished.withLock({ $0 }) < members { try await Task.sleep(for: .milliseconds(20)) }
        await context.terminate()
        try await admin.deleteGroup("drain\(members)")
    }

    // Sustained: members joined at the head while 4 producers feed the broker. A member's
    // credit bounds what the broker delivers to it per round trip (one loop iteration while
    // ingest keeps the loop busy): 1 member is also measured at the maximum credit.
    // The last row: the same members taking up to 64 deliveries per DELIVER (protocol 1.3).
    /// Ingest while `members` members consume, and what the group delivered; returns ingest.
    func consuming(
        members: Int, credit: Int, batched: Bool, batch: Int, against alone: Measured, round: String = ""
    ) async throws
        -> Measured
    {
        let context = try Context()
        let group = "bench\(round)\(members)-\(credit)\(batched ? "" : "-single")-b\(batch)"
        let acked = AckedSet()
        let results = Mutex<[(Int, ContinuousClock.Instant?, ContinuousClock.Instant)]>([])
        let threads = (0..<members).map { _ in
            Thread {
                do {
                    let result = try benchMember(
                        context: context, endpoint: endpoint, group: group, credit: credit, total: total, acked: acked, batched: batched,
                        batch: batch)
                    results.withLock { $0.append((result.count, result.first, result.last)) }
                } catch {
                    print("member of \(group) failed: \(error)")
                }
            }
        }
        for thread in threads { thread.start() }
        // Members join at the head before the producers start.
        try await Task.sleep(for: .milliseconds(500))
        let start = ContinuousClock.now
        let startCPU = cpu()
        let fed = try await ingest(
            broker: broker.endpoints, producers: 4, perProducer: perProducer, window: 1000,
            prefix: "g\(round)\(members)-\(credit)\(batched ? "" : "s")-b\(batch)-")
        while acked.count < total, start.duration(to: .now) < .seconds(120) {
            try await Task.sleep(for: .milliseconds(5))
        }
        let done = ContinuousClock.now
        let consumedCPU = cpuNote(since: startCPU, events: total)
        let count = acked.count
        let seconds = Double(start.duration(to: done).wholeMilliseconds) / 1000
        let through = Measured(count: count, seconds: seconds)
        let who =
            "\(members) member\(members == 1 ? "" : "s"), credit \(credit), \(batched ? "ACKS" : "ACK each")"
            + (batch > 1 ? ", \(batch) per DELIVER" : "")
        row(
            "ingest while \(who) consume\(members == 1 ? "s" : "")", Bench.rate(fed),
            String(format: "%.2f× of ingest alone", fed.perSecond / alone.perSecond))
        row(
            "delivered and acked through the group, \(who)", Bench.rate(through),
            String(format: "%.2f× of ingest in the same run (%d of %d acked); ", through.perSecond / fed.perSecond, count, total)
                + consumedCPU)
        // Members stop after 5 s without a delivery.
        for _ in 0..<600 where results.withLock({ $0.count }) < members { try await Task.sleep(for: .milliseconds(20)) }
        await context.terminate()
        try await admin.deleteGroup(group)
        return fed
    }
    let sustained = [(1, 256, true, 1), (1, 1000, true, 1), (4, 256, false, 1), (4, 256, true, 1), (4, 256, true, 64)]
    for (members, credit, batched, batch) in sustainedOnly ? [(4, 256, true, 1), (4, 256, true, 64)] : sustained {
        _ = try await consuming(members: members, credit: credit, batched: batched, batch: batch, against: alone)
    }

    /// The floor under a group taking 64 per DELIVER (`batchedTransportFloor`): the same members
    /// and DELIVERs, sent by a thread of this process with nothing settled or kept.
    func floorRun(against alone: Measured, round: String = "") async throws -> Measured {
        let deliveries = FloorDeliveries(total: total)
        let start = cpu()
        let (fed, acked) = try await batchedTransportFloor(
            broker: broker.endpoints, deliveries: deliveries, perProducer: perProducer, members: 4, credit: 256, batch: 64, round: round)
        row(
            "ingest while 4 members take 64 per DELIVER from no broker (floor)", Bench.rate(fed),
            String(format: "%.2f× of ingest alone, %d of %d acked; ", fed.perSecond / alone.perSecond, acked, total)
                + cpuNote(since: start, events: total))
        return fed
    }
    _ = try await floorRun(against: alone)

    // `--floor`: rounds of ingest alone, the batched group and its floor, one after the other,
    // so each round's three figures come from the same minute of this noisy machine.
    if floorRounds > 0 {
        print("")
        for round in 1...floorRounds {
            let start = cpu()
            let again = try await ingest(
                broker: broker.endpoints, producers: 4, perProducer: perProducer, window: 1000, prefix: "r\(round)-")
            row("round \(round): ingest alone", Bench.rate(again), cpuNote(since: start, events: total))
            let group = try await consuming(members: 4, credit: 256, batched: true, batch: 64, against: again, round: "r\(round)-")
            let floorIngest = try await floorRun(against: again, round: "r\(round)-")
            row(
                "round \(round): the group ÷ its floor", String(format: "%.2f", group.perSecond / floorIngest.perSecond),
                String(
                    format: "group %.2f×, floor %.2f× of ingest alone", group.perSecond / again.perSecond,
                    floorIngest.perSecond / again.perSecond))
        }
    }

    if sustainedOnly {
        await adminIO.shutdown()
        await broker.stop()
        return
    }
    // A member holding 100 deliveries dies (its connection drops, as with kill -9): how long
    // until another member has all 100 again.
    let context = try Context()
    let held = Mutex<(count: Int, socket: Socket?)>((0, nil))
    let holder = Thread {
        do {
            let result = try benchMember(context: context, endpoint: endpoint, group: "failover", credit: 100, total: 100, hold: true)
            held.withLock { $0 = (result.count, result.socket) }
        } catch {
            print("the holding member failed: \(error)")
        }
    }
    holder.start()
    try await Task.sleep(for: .milliseconds(500))
    _ = try await ingest(broker: broker.endpoints, producers: 1, perProducer: 100, window: 100, prefix: "fail")
    let holding = ContinuousClock.now
    while held.withLock({ $0.socket == nil }), holding.duration(to: .now) < .seconds(30) { try await Task.sleep(for: .milliseconds(5)) }
    let holding100 = held.withLock { $0.socket != nil }
    guard holding100 else {
        print("the holding member did not get 100 deliveries within 30 s")
        await context.terminate()
        await adminIO.shutdown()
        await broker.stop()
        return
    }
    let redelivered = AckedSet()
    let taker = Thread {
        _ = try? benchMember(
            context: context, endpoint: endpoint, group: "failover", credit: 100, total: 100, quiet: .seconds(10), acked: redelivered)
    }
    taker.start()
    try await Task.sleep(for: .milliseconds(500))
    let killed = ContinuousClock.now
    held.withLock { $0.socket?.close() }
    while redelivered.count < 100, killed.duration(to: .now) < .seconds(30) { try await Task.sleep(for: .milliseconds(1)) }
    let took = killed.duration(to: .now)
    row(
        "a member holding 100 drops: all 100 at another member after", String(format: "%.0f ms", Double(took.wholeMilliseconds)),
        "heartbeat 1 s, member liveness 3 s (\(redelivered.count) of 100)")
    try await Task.sleep(for: .milliseconds(200))
    await context.terminate()
    await adminIO.shutdown()
    await broker.stop()
}

/// The floor under a group taking `batch` deliveries per DELIVER: while 4 producers feed the
/// broker, a thread of this process (not the broker) sends every event they have seen acked,
/// in DELIVERs of up to `batch` with each delivery's four frames as the broker writes them
/// (built before the run), to `members` bench members with `credit` each, and reads their
/// ACKS with the broker's parse. Nothing is settled, journaled or kept: this is only what
/// moving each event to a member and its ACK back costs, so a group that does it through the
/// broker cannot cost ingest less. Returns ingest and the events acked.
func batchedTransportFloor(
    broker: BrokerEndpointsFile, deliveries: FloorDeliveries, perProducer: Int, members: Int, credit: Int, batch: Int, round: String = ""
) async throws -> (Measured, Int) {
    let total = perProducer * 4
    precondition(deliveries.frames.count >= total, "the floor needs a delivery per event")
    let context = try Context()
    let progress = IngestProgress()
    let acked = AckedSet()
    let bound = DispatchSemaphore(value: 0)
    let endpoint = Mutex<String?>(nil)
    let joined = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)
    let sender = Thread {
        defer { finished.signal() }
        do {
            let router = try context.socket(.router, linger: 0)
            defer { router.close() }
            try router.set([.receiveHighWaterMark(100_000), .sendHighWaterMark(100_000), .receiveTimeout(milliseconds: 200)])
            try router.bind("tcp://127.0.0.1:*")
            endpoint.withLock { $0 = try? router.lastEndpoint() }
            bound.signal()
            var identities: [Data: Int] = [:]
            var routes: [Data] = []
            let joining = ContinuousClock.now
            while routes.count < members {
                guard joining.duration(to: .now) < .seconds(10) else { return }
                guard let message = try receiveOrTimeout(router) else { continue }
                guard message.frames.count > 2, message.frames[2] == Data("JOIN".utf8), identities[message.frames[0]] == nil else {
                    continue
                }
                identities[message.frames[0]] = routes.count
                routes.append(message.frames[0])
            }
            joined.signal()
            let version = Envelope.versionFrame(.deliverBatches)
            var inFlight = [Int](repeating: 0, count: members)
            var next = 0
            var settled = 0
            var turn = 0
            let poller = Poller()
            _ = poller.add(router, events: .readable)
            let start = ContinuousClock.now
            while settled < total, start.duration(to: .now) < .seconds(120) {
                let available = min(total, progress.count)
                var moved = false
                for _ in 0..<members where next < available {
                    let member = turn
                    turn = (turn + 1) % members
                    let count = min(credit - inFlight[member], batch, available - next)
                    guard count > 0 else { continue }
                    var frames = [routes[member], version, Envelope.deliverCommandFrame]
                    frames.reserveCapacity(3 + 4 * count)
                    for delivery in deliveries.frames[next..<(next + count)] { frames.append(contentsOf: delivery) }
                    try router.send(frames)
                    inFlight[member] += count
                    next += count
                    moved = true
                }
                while let message = try router.receive(dontWait: true) {
                    moved = true
                    guard let member = identities[message.frames[0]],
                        let envelope = try? Envelope.check(message.frames.dropFirst(), minimumVersion: .memberAcks, limits: .groups),
                        let acks = GroupAcks.plain(envelope)
                    else { continue }
                    inFlight[member] -= acks.deliveries.count
                    settled += acks.deliveries.count
                }
                // Nothing to send or read: wait for an ACKS, or 1 ms for the producers' progress.
                if !moved { try poller.poll(timeout: 1) }
            }
        } catch {
            print("the floor's sender failed: \(error)")
            // Before binding, the caller still waits to hear of it.
            if endpoint.withLock({ $0 == nil }) { bound.signal() }
        }
    }
    sender.start()
    bound.wait()
    guard let endpoint = endpoint.withLock({ $0 }) else { throw BenchError("the floor's sender could not bind") }
    let membersDone = DispatchSemaphore(value: 0)
    let memberThreads = (0..<members).map { _ in
        Thread {
            defer { membersDone.signal() }
            do {
                _ = try benchMember(
                    context: context, endpoint: endpoint, group: "floor", credit: credit, total: total, acked: acked, batch: batch)
            } catch {
                print("a member of the floor failed: \(error)")
            }
        }
    }
    for thread in memberThreads { thread.start() }
    guard joined.wait(timeout: .now() + 10) == .success else {
        throw BenchError("the floor's members did not join within 10 s")
    }
    let fed = try await ingest(
        broker: broker, producers: 4, perProducer: perProducer, window: 1000, prefix: "floor\(round)\(batch)-", progress: progress)
    let waiting = ContinuousClock.now
    while acked.count < total, waiting.duration(to: .now) < .seconds(30) { try await Task.sleep(for: .milliseconds(5)) }
    // The sender ends once every event is settled (or after 120 s) and closes its socket.
    // Members see the total within a receive time-out (200 ms) and close their sockets.
    while finished.wait(timeout: .now()) == .timedOut { try await Task.sleep(for: .milliseconds(20)) }
    for _ in 0..<members {
        while membersDone.wait(timeout: .now()) == .timedOut { try await Task.sleep(for: .milliseconds(20)) }
    }
    await context.terminate()
    return (fed, acked.count)
}

/// Each delivery's four frames as the broker writes them (its DELIVER header, the event's
/// journaled header, metadata and content), built before a floor run so that building them is
/// not part of it.
struct FloorDeliveries: Sendable {
    let frames: [[Data]]

    init(total: Int) {
        let headers = DeliverHeaderFrames(group: "floor", deadline: "2026-11-29T16:00:30.000Z", ackWaitMilliseconds: 30_000)
        frames = (1...total).map { busSeq in
            let event = Sample.event(producer: "floor\(busSeq % 4)", seq: Int64(busSeq))
            let journaled = Data("{\"bus_seq\":\(busSeq),".utf8) + event[2].dropFirst()
            return [headers.header(busSeq: Int64(busSeq), attempt: 1, first: true), journaled, event[4], event[5]]
        }
    }
}
