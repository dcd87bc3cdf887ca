import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

/// The Majordomo broker's rules driven by hand: frames in, actions out, a manual clock (`at(ms)`),
/// no socket and no sleep. `MajordomoTests` keeps the few tests that need the real ROUTER.
@Suite("Service dispatcher")
struct ServiceDispatcherTests {
    typealias Instant = ContinuousClock.Instant
    typealias Action = ServiceDispatcher.Action

    static let t0 = ContinuousClock.now
    func at(_ milliseconds: Int) -> Instant { Self.t0 + .milliseconds(milliseconds) }

    /// Heartbeat 1 s, liveness 3 (a worker unheard of for 3 s is gone), wait 5 s.
    static func dispatcher(
        wait: Duration = .seconds(5), queueLimit: Int = 100, maxAttempts: Int = 3
    ) -> ServiceDispatcher {
        var settings = ServiceBroker.Settings()
        settings.heartbeat = .seconds(1)
        settings.liveness = 3
        settings.wait = wait
        settings.queueLimit = queueLimit
        settings.maxAttempts = maxAttempts
        return ServiceDispatcher(settings: .init(settings, curve: false), now: t0)
    }

    static func id(_ name: String) -> Data { Data(name.utf8) }
    static let client = id("client")

    /// Frames as the ROUTER reads them: the sender's routing frame first.
    static func from(_ sender: Data, _ frames: [Data]) -> [Data] { [sender] + frames }

    /// What each action sends, as (to, frames), in order; notes and silent actions left out.
    static func sent(_ actions: [Action]) -> [(to: Data, frames: [Data])] { actions.compactMap(\.frames) }

    /// The frames sent to `peer`.
    static func sent(_ actions: [Action], to peer: Data) -> [[Data]] { sent(actions).filter { $0.to == peer }.map(\.frames) }

    static func ready(_ dispatcher: inout ServiceDispatcher, _ worker: String, service: String, at now: Instant) {
        let actions = dispatcher.receive(from(id(worker), Majordomo.worker(.v02, .ready, service: service)), at: now)
        #expect(actions.contains(.note(.workerReady(service: service, worker: id(worker), version: .v02))))
    }

    static func request(_ service: String, _ text: String, body: [Data]? = nil, from sender: Data = client) -> [Data] {
        from(sender, Majordomo.clientRequest(.v02, service: service, body: body ?? [Data(text.utf8)]))
    }

    static func final(_ worker: String, _ text: String, to sender: Data = client) -> [Data] {
        from(id(worker), Majordomo.worker(.v02, .final, client: sender, body: [Data(text.utf8)]))
    }

    /// The single REQUEST among `actions`: which worker got it and its body.
    static func dispatched(_ actions: [Action]) -> [(worker: Data, body: [Data])] {
        actions.compactMap { action in
            guard case .request(let peer, let request) = action else { return nil }
            return (peer.identity, request.body)
        }
    }

    /// The broker's own error reply among `actions`: status and code.
    static func failure(_ actions: [Action]) throws -> (status: Int, code: String, message: String, reply: ReplyHeader) {
        for action in actions {
            guard case .reply(_, let body, true, let status?) = action, status >= 400 else { continue }
            let (reply, _) = try ServiceBody.reply(body)
            return (status, reply.error?.code ?? "", reply.error?.message ?? "", reply)
        }
        throw WaitTimedOut(description: "no error reply among \(actions)")
    }

    // MARK: - Conformance vectors

    @Test("each Majordomo vector gets its documented reaction from the rules alone", arguments: try Vectors.majordomo())
    func vector(_ vector: Vectors.MajordomoCase) throws {
        var dispatcher = Self.dispatcher()
        let peer = Self.id("peer")
        switch vector.setup {
        case "ready": _ = dispatcher.receive(Self.from(peer, Majordomo.worker(.v02, .ready, service: "echo")), at: at(0))
        case "other-worker": _ = dispatcher.receive(Self.from(Self.id("other"), Majordomo.worker(.v02, .ready, service: "echo")), at: at(0))
        default: break
        }
        let before = dispatcher.statistics
        let actions = dispatcher.receive(Self.from(peer, vector.frames), at: at(10))
        let answers = Self.sent(actions, to: peer)
        switch vector.reaction {
        case "dropped":
            #expect(answers.isEmpty, "\(vector.name): a malformed message is never answered")
            #expect(dispatcher.statistics.malformed == before.malformed + 1, "\(vector.name)")
            #expect(actions.contains { if case .note(.dropped) = $0 { true } else { false } }, "\(vector.name)")
        case "disconnect":
            #expect(answers == [vector.answer], "\(vector.name)")
            #expect(dispatcher.statistics.disconnects == before.disconnects + 1, "\(vector.name)")
        default:
            #expect(answers.first == vector.answer, "\(vector.name)")
        }
        // The sender is still served afterwards: MMI answers it.
        let mmi = dispatcher.receive(Self.request("mmi.nothing", "", body: [], from: peer), at: at(20))
        #expect(
            Self.sent(mmi, to: peer) == [
                Majordomo.clientReply(.v02, delimited: false, final: true, service: "mmi.nothing", body: [Data("501".utf8)])
            ])
    }

    // MARK: - Dispatch

    @Test("the least recently used idle worker gets the next request")
    func leastRecentlyUsed() {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "first", service: "lru", at: at(0))
        Self.ready(&dispatcher, "second", service: "lru", at: at(1))
        let one = dispatcher.receive(Self.request("lru", "1"), at: at(2))
        #expect(Self.dispatched(one).map(\.worker) == [Self.id("first")])
        let reply = dispatcher.receive(Self.final("first", "a"), at: at(3))
        #expect(
            Self.sent(reply, to: Self.client) == [
                Majordomo.clientReply(.v02, delimited: false, final: true, service: "lru", body: [Data("a".utf8)])
            ])
        // first answered and went to the back: second has been idle longer.
        let two = dispatcher.receive(Self.request("lru", "2"), at: at(4))
        #expect(Self.dispatched(two).map(\.worker) == [Self.id("second")])
        let three = dispatcher.receive(Self.request("lru", "3"), at: at(5))
        #expect(Self.dispatched(three).map(\.worker) == [Self.id("first")])
        #expect(dispatcher.statistics.dispatched == 3 && dispatcher.statistics.replies == 1)
    }

    @Test("requests queue in arrival order while every worker is busy, and each FINAL frees its worker for the next")
    func queueOrder() {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "w", service: "s", at: at(0))
        #expect(Self.dispatched(dispatcher.receive(Self.request("s", "1"), at: at(1))).map(\.body) == [[Data("1".utf8)]])
        #expect(Self.dispatched(dispatcher.receive(Self.request("s", "2"), at: at(2))).isEmpty)
        #expect(Self.dispatched(dispatcher.receive(Self.request("s", "3"), at: at(3))).isEmpty)
        #expect(Self.dispatched(dispatcher.receive(Self.final("w", "r1"), at: at(4))).map(\.body) == [[Data("2".utf8)]])
        #expect(Self.dispatched(dispatcher.receive(Self.final("w", "r2"), at: at(5))).map(\.body) == [[Data("3".utf8)]])
    }

    @Test("an MDP/0.2 client gets each PARTIAL then the FINAL; an MDP/0.1 client gets only the FINAL")
    func partials() {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "w", service: "s", at: at(0))
        let old = Self.id("old-client")
        _ = dispatcher.receive(Self.from(old, Majordomo.clientRequest(.v01, service: "s", body: [Data("q".utf8)])), at: at(1))
        let partial = dispatcher.receive(
            Self.from(Self.id("w"), Majordomo.worker(.v02, .partial, client: old, body: [Data("p".utf8)])), at: at(2))
        #expect(Self.sent(partial).isEmpty, "MDP/0.1 has no partial replies")
        let final = dispatcher.receive(Self.final("w", "f", to: old), at: at(3))
        #expect(
            Self.sent(final, to: old) == [Majordomo.clientReply(.v01, delimited: true, final: true, service: "s", body: [Data("f".utf8)])])

        _ = dispatcher.receive(Self.request("s", "q2"), at: at(4))
        let partial2 = dispatcher.receive(
            Self.from(Self.id("w"), Majordomo.worker(.v02, .partial, client: Self.client, body: [Data("p".utf8)])), at: at(5))
        #expect(
            Self.sent(partial2, to: Self.client) == [
                Majordomo.clientReply(.v02, delimited: false, final: false, service: "s", body: [Data("p".utf8)])
            ])
        #expect(dispatcher.statistics.replies == 1, "a PARTIAL is not a reply")
    }

    // MARK: - Heartbeats and liveness

    @Test("each heartbeat interval every live worker gets HEARTBEAT; one unheard of for liveness intervals is removed with DISCONNECT")
    func heartbeatAndExpiry() throws {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "quiet", service: "s", at: at(0))
        Self.ready(&dispatcher, "steady", service: "s", at: at(0))
        #expect(dispatcher.nextDeadline() == at(1000))
        var removedAt: Int?
        for second in 1...4 {
            let now = at(second * 1000)
            _ = dispatcher.receive(Self.from(Self.id("steady"), Majordomo.worker(.v02, .heartbeat)), at: now)
            let actions = dispatcher.heartbeat(at: now)
            #expect(dispatcher.nextHeartbeat == now + .seconds(1))
            #expect(Self.sent(actions, to: Self.id("steady")) == [Majordomo.worker(.v02, .heartbeat)])
            let toQuiet = Self.sent(actions, to: Self.id("quiet"))
            if toQuiet == [Majordomo.worker(.v02, .disconnect)] {
                removedAt = second
                #expect(actions.contains(.note(.workerRemoved(service: "s", worker: Self.id("quiet"), reason: "no heartbeat for 3s"))))
            } else if removedAt == nil {
                #expect(toQuiet == [Majordomo.worker(.v02, .heartbeat)])
            } else {
                #expect(toQuiet.isEmpty, "a removed worker gets nothing more")
            }
        }
        #expect(removedAt == 3, "expired at liveness × heartbeat after its last sign of life")
        #expect(dispatcher.statistics.expiredWorkers == 1)
        #expect(dispatcher.workerCounts == ["s": 1])
        let mmi = dispatcher.receive(Self.request("mmi.service", "s"), at: at(4001))
        #expect(Self.sent(mmi, to: Self.client).first?.last == Data("200".utf8))
    }

    @Test("any message from a registered worker is a sign of life, not only HEARTBEAT")
    func anyMessageKeepsAlive() {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "busy", service: "s", at: at(0))
        for second in 1...10 {
            _ = dispatcher.receive(Self.request("s", "\(second)"), at: at(second * 1000 - 500))
            _ = dispatcher.receive(Self.final("busy", "r"), at: at(second * 1000 - 400))
            let actions = dispatcher.heartbeat(at: at(second * 1000))
            #expect(Self.sent(actions, to: Self.id("busy")) == [Majordomo.worker(.v02, .heartbeat)])
        }
        #expect(dispatcher.statistics.expiredWorkers == 0)
    }

    @Test("services nobody serves or waits for are forgotten at the next heartbeat")
    func forgetsEmptyServices() {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "w", service: "gone", at: at(0))
        _ = dispatcher.receive(Self.from(Self.id("w"), Majordomo.worker(.v02, .disconnect)), at: at(10))
        #expect(dispatcher.services["gone"] != nil)
        _ = dispatcher.heartbeat(at: at(1000))
        #expect(dispatcher.services.isEmpty)
    }

    // MARK: - A lost worker's request goes to the next worker

    @Test("a worker that falls silent mid-request: its request goes to the next worker, and that worker's FINAL reaches the client")
    func crashMidRequest() throws {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "doomed", service: "fragile", at: at(0))
        Self.ready(&dispatcher, "survivor", service: "fragile", at: at(0))
        // doomed has been idle longest: the job is its.
        let taken = dispatcher.receive(Self.request("fragile", "job"), at: at(1))
        #expect(Self.dispatched(taken).map(\.worker) == [Self.id("doomed")])
        // survivor keeps heartbeating; doomed says nothing more.
        for second in 1...2 {
            _ = dispatcher.receive(Self.from(Self.id("survivor"), Majordomo.worker(.v02, .heartbeat)), at: at(second * 1000 - 500))
            #expect(Self.dispatched(dispatcher.heartbeat(at: at(second * 1000))).isEmpty)
        }
        _ = dispatcher.receive(Self.from(Self.id("survivor"), Majordomo.worker(.v02, .heartbeat)), at: at(2500))
        let expiry = dispatcher.heartbeat(at: at(3000))
        #expect(Self.sent(expiry, to: Self.id("doomed")) == [Majordomo.worker(.v02, .disconnect)])
        let handed = Self.dispatched(expiry)
        #expect(handed.map(\.worker) == [Self.id("survivor")])
        #expect(handed.first?.body == [Data("job".utf8)])
        #expect(dispatcher.statistics.handedOver == 1)
        let reply = dispatcher.receive(Self.final("survivor", "done"), at: at(3001))
        #expect(Self.sent(reply, to: Self.client).first?.last == Data("done".utf8))
    }

    @Test("a worker that sends DISCONNECT mid-request hands the request over at once, ahead of later requests")
    func disconnectMidRequest() {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "leaving", service: "svc", at: at(0))
        _ = dispatcher.receive(Self.request("svc", "job"), at: at(1))
        _ = dispatcher.receive(Self.request("svc", "later"), at: at(2))
        let bye = dispatcher.receive(Self.from(Self.id("leaving"), Majordomo.worker(.v02, .disconnect)), at: at(3))
        #expect(Self.sent(bye).isEmpty, "no worker left to take it yet")
        #expect(dispatcher.services["svc"]?.queue.map(\.body) == [[Data("job".utf8)], [Data("later".utf8)]])
        let next = dispatcher.receive(Self.from(Self.id("next"), Majordomo.worker(.v02, .ready, service: "svc")), at: at(4))
        #expect(Self.dispatched(next).map(\.body) == [[Data("job".utf8)]])
        // It waits `wait` again from the hand-over, not from its arrival.
        #expect(dispatcher.services["svc"]?.queue.first?.queued == at(2))
    }

    @Test("a request that kills every worker it reaches stops after maxAttempts with 502 worker-lost")
    func maxAttempts() throws {
        var dispatcher = Self.dispatcher(maxAttempts: 3)
        let body = try ServiceBody.requestBody(RequestHeader(operation: "poison", timeoutMilliseconds: 5000), content: Data("{}".utf8))
        _ = dispatcher.receive(Self.request("s", "", body: body), at: at(0))
        var last: [Action] = []
        for attempt in 1...3 {
            Self.ready(&dispatcher, "w\(attempt)", service: "s", at: at(attempt * 10))
            last = dispatcher.receive(Self.from(Self.id("w\(attempt)"), Majordomo.worker(.v02, .disconnect)), at: at(attempt * 10 + 1))
        }
        let failure = try Self.failure(last)
        #expect(failure.status == 502 && failure.code == "worker-lost")
        #expect(failure.message == "the request was lost with 3 workers of 's' in turn")
        #expect(dispatcher.statistics.handedOver == 2)
        #expect(dispatcher.services["s"]?.queue.isEmpty ?? true)
    }

    @Test("a worker lost after a PARTIAL reached the client: 502 worker-lost, never a second worker (the partials cannot be taken back)")
    func lostAfterPartial() throws {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "w", service: "s", at: at(0))
        Self.ready(&dispatcher, "spare", service: "s", at: at(0))
        _ = dispatcher.receive(Self.request("s", "q"), at: at(1))
        _ = dispatcher.receive(
            Self.from(Self.id("w"), Majordomo.worker(.v02, .partial, client: Self.client, body: [Data("p".utf8)])), at: at(2))
        let lost = dispatcher.receive(Self.from(Self.id("w"), Majordomo.worker(.v02, .disconnect)), at: at(3))
        #expect(Self.dispatched(lost).isEmpty)
        let failure = try Self.failure(lost)
        #expect(failure.status == 502 && failure.message.contains("after sending partial replies"))
    }

    @Test("a FINAL for a client the worker was not given: DISCONNECT, and the request it held goes to the next worker")
    func finalForWrongClient() {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "liar", service: "s", at: at(0))
        _ = dispatcher.receive(Self.request("s", "q"), at: at(1))
        Self.ready(&dispatcher, "honest", service: "s", at: at(2))
        let actions = dispatcher.receive(Self.final("liar", "x", to: Self.id("someone-else")), at: at(3))
        #expect(Self.sent(actions, to: Self.id("liar")) == [Majordomo.worker(.v02, .disconnect)])
        #expect(Self.dispatched(actions).map(\.worker) == [Self.id("honest")])
        #expect(Self.sent(actions, to: Self.id("someone-else")).isEmpty)
    }

    // MARK: - Waiting for a worker

    @Test("a request for a service with no worker waits service.wait, then gets 503 no-worker naming its request_id and parent")
    func noWorker() throws {
        var dispatcher = Self.dispatcher(wait: .milliseconds(300))
        let header = RequestHeader(operation: "programs.list", timeoutMilliseconds: 5000)
        let body = try ServiceBody.requestBody(header, content: Data(#"{"site_id":12}"#.utf8))
        _ = dispatcher.receive(Self.request("eto.sites", "", body: body), at: at(0))
        #expect(dispatcher.nextDeadline() == at(300))
        #expect(dispatcher.expireRequests(at: at(299)).isEmpty)
        let expired = dispatcher.expireRequests(at: at(300))
        let frames = try #require(Self.sent(expired, to: Self.client).first)
        let (reply, envelope) = try ServiceBody.reply(Array(frames[3...]))
        #expect(reply.status == 503 && reply.error?.code == "no-worker")
        #expect(reply.error?.message == "no worker for service 'eto.sites' within 300ms")
        #expect(reply.requestID == header.requestID)
        #expect(envelope.parent == body[2], "the parent header is the request's header")
        #expect(dispatcher.statistics.brokerErrors == 1)
    }

    @Test("a worker that arrives within service.wait gets the queued request; requests of a served service never expire")
    func lateWorker() {
        var dispatcher = Self.dispatcher(wait: .seconds(30))
        _ = dispatcher.receive(Self.request("late", "early"), at: at(0))
        let taken = dispatcher.receive(Self.from(Self.id("w"), Majordomo.worker(.v02, .ready, service: "late")), at: at(29_000))
        #expect(Self.dispatched(taken).map(\.body) == [[Data("early".utf8)]])
        _ = dispatcher.receive(Self.request("late", "queued behind"), at: at(29_001))
        #expect(dispatcher.expireRequests(at: at(120_000)).isEmpty, "the service has a worker: the request waits for it")
    }

    @Test("beyond service.queue_limit a request gets 503 queue-full at once")
    func queueFull() throws {
        var dispatcher = Self.dispatcher(queueLimit: 2)
        for index in 0..<2 {
            #expect(Self.sent(dispatcher.receive(Self.request("busy", "\(index)"), at: at(index)), to: Self.client).isEmpty)
        }
        let third = dispatcher.receive(Self.request("busy", "2"), at: at(2))
        let failure = try Self.failure(third)
        #expect(failure.status == 503 && failure.code == "queue-full")
        #expect(failure.reply.error?.retryable == true)
    }

    // MARK: - Refusals, MMI

    @Test("a refused request gets 403 forbidden with the reason; a refused READY gets DISCONNECT and registers nothing")
    func refusals() throws {
        var dispatcher = Self.dispatcher()
        let request = dispatcher.receive(Self.request("filemaker", "q"), at: at(0)) { _ in "role kiosk may not call filemaker" }
        let failure = try Self.failure(request)
        #expect(failure.status == 403 && failure.code == "forbidden" && failure.message == "role kiosk may not call filemaker")
        let ready = dispatcher.receive(Self.from(Self.id("w"), Majordomo.worker(.v02, .ready, service: "eto")), at: at(1)) { _ in "no" }
        #expect(Self.sent(ready, to: Self.id("w")) == [Majordomo.worker(.v02, .disconnect)])
        #expect(dispatcher.workers.isEmpty && dispatcher.statistics.requests == 0)
    }

    @Test("mmi.service answers 200 or 404, mmi.workers lists each service with workers, idle, busy, queue and protocols")
    func mmi() throws {
        var dispatcher = Self.dispatcher()
        Self.ready(&dispatcher, "a", service: "alpha", at: at(0))
        _ = dispatcher.receive(Self.from(Self.id("b"), Majordomo.worker(.v01, .ready, service: "alpha")), at: at(0))
        _ = dispatcher.receive(Self.request("alpha", "x"), at: at(1))
        _ = dispatcher.receive(Self.request("waiting", "y"), at: at(2))
        #expect(
            Self.sent(dispatcher.receive(Self.request("mmi.service", "alpha"), at: at(3)), to: Self.client).first?.last == Data("200".utf8))
        #expect(
            Self.sent(dispatcher.receive(Self.request("mmi.service", "none"), at: at(3)), to: Self.client).first?.last == Data("404".utf8))
        let answer = try #require(Self.sent(dispatcher.receive(Self.request("mmi.workers", ""), at: at(502)), to: Self.client).first)
        #expect(answer[3] == Data("200".utf8))
        let report = try #require(JSONValue.parse(answer[4]))
        #expect(
            report
                == .object([
                    "services": .array([
                        .object([
                            "name": .string("alpha"), "workers": .integer(2), "idle": .integer(1), "busy": .integer(1),
                            "queued": .integer(0),
                            "oldest_queued_ms": .integer(0), "protocols": .array([.string("MDP/0.1"), .string("MDP/0.2")]),
                        ]),
                        .object([
                            "name": .string("waiting"), "workers": .integer(0), "idle": .integer(0), "busy": .integer(0),
                            "queued": .integer(1),
                            "oldest_queued_ms": .integer(500), "protocols": .array([]),
                        ]),
                    ]),
                    "workers": .integer(2), "heartbeat_ms": .integer(1000), "liveness": .integer(3), "curve": .bool(false),
                ]))
    }
}
