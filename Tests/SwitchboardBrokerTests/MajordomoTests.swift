import Foundation
import SwitchboardBroker
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

/// Conformance of the service plane over a real ROUTER, built from the RFC frame layouts with
/// raw sockets (not through our own client and worker): RFC 7 (MDP/0.1), RFC 18 (MDP/0.2), and
/// the time-driven rules once on a real clock. Every dispatch rule (LRU, hand-over, expiry,
/// queue limits, MMI, the conformance vectors) is tested without sockets in
/// `ServiceDispatcherTests`; these only show the socket carries them out.
@Suite("Majordomo broker (raw frames)")
struct MajordomoTests {
    static func text(_ frames: [Data]) -> [String] {
        frames.map { frame in
            frame.count == 1 && frame[frame.startIndex] < 0x20
                ? String(format: "0x%02x", frame[frame.startIndex]) : String(decoding: frame, as: UTF8.self)
        }
    }

    static func frames(_ items: [Any]) -> [Data] {
        items.map { item in
            switch item {
            case let byte as UInt8: Data([byte])
            case let data as Data: data
            case let text as String: Data(text.utf8)
            default: Data()
            }
        }
    }

    /// For the tests that are not about liveness (25 s instead of 7.5 s): these raw workers never heartbeat, so a
    /// broker with the default liveness (7.5 s) would drop them whenever a loaded machine delays
    /// the test by that much (seen in full-suite runs on two cores).
    static func patient(_ configuration: inout BrokerConfiguration) {
        configuration.serviceLiveness = 10
    }

    /// Waits until `mmi.service` says `service` has (or has no) live worker.
    static func waitAlive(_ fixture: BrokerFixture, _ service: String, _ alive: Bool = true) async throws {
        let asker = try await fixture.servicePeer()
        try await waitUntil("mmi.service \(service) == \(alive ? "200" : "404")") {
            try await asker.send(Majordomo.clientRequest(.v02, service: "mmi.service", body: [Data(service.utf8)]))
            guard let answer = try await asker.receive(timeout: .seconds(5)) else { return false }
            return answer.frames.last == Data((alive ? "200" : "404").utf8)
        }
        await asker.close()
    }

    /// The next message, skipping the broker's worker heartbeats unless a HEARTBEAT is what the
    /// caller waits for: on a loaded machine one can always arrive first.
    static func receive(_ socket: AsyncSocket, _ what: String) async throws -> [Data] {
        while true {
            guard let message = try await socket.receive(timeout: .seconds(10)) else {
                throw WaitTimedOut(description: "nothing received: \(what)")
            }
            let heartbeat = message.frames == Majordomo.worker(.v01, .heartbeat) || message.frames == Majordomo.worker(.v02, .heartbeat)
            if heartbeat && !what.contains("HEARTBEAT") { continue }
            return message.frames
        }
    }

    /// A message the test goes on to index: at least `frames` frames, or a clear failure naming
    /// what came instead (on a loaded machine that can be a DISCONNECT) rather than a trap.
    static func receive(_ socket: AsyncSocket, _ what: String, frames: Int) async throws -> [Data] {
        let message = try await receive(socket, what)
        try #require(message.count >= frames, "\(what): expected at least \(frames) frames, got \(text(message))")
        return message
    }

    @Test("RFC 7: an MDP/0.1 client on a REQ socket and an MDP/0.1 worker, frame by frame")
    func mdp01() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let worker = try await fixture.servicePeer()
        try await worker.send(Self.frames(["", "MDPW01", UInt8(0x01), "echo"]))
        try await Self.waitAlive(fixture, "echo")
        let client = try await fixture.io.open(.request, linger: 0) { [endpoint = fixture.endpoints.service] in
            try $0.connect(endpoint)
        }
        // REQ puts the empty delimiter in front by itself.
        try await client.send(Self.frames(["MDPC01", "echo", "hello", "second body frame"]))
        let request = try await Self.receive(worker, "REQUEST")
        try #require(request.count == 7, "\(Self.text(request))")
        #expect(Self.text(Array(request[0..<3])) == ["", "MDPW01", "0x02"])
        let address = request[3]
        #expect(!address.isEmpty)
        #expect(Array(request[4...]) == Self.frames(["", "hello", "second body frame"]))
        try await worker.send(Self.frames(["", "MDPW01", UInt8(0x03), address, "", "world"]))
        let reply = try await Self.receive(client, "the reply")
        #expect(Self.text(reply) == ["MDPC01", "echo", "world"])
        await fixture.stop()
    }

    @Test("RFC 18: an MDP/0.2 client gets two PARTIALs then the FINAL, in order")
    func mdp02() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let worker = try await fixture.servicePeer()
        try await worker.send(Self.frames(["MDPW02", UInt8(0x01), "report"]))
        try await Self.waitAlive(fixture, "report")
        let client = try await fixture.servicePeer()
        try await client.send(Self.frames(["MDPC02", UInt8(0x01), "report", "q"]))
        let request = try await Self.receive(worker, "REQUEST", frames: 5)
        #expect(Self.text(Array(request[0..<2])) == ["MDPW02", "0x02"])
        #expect(request[3].isEmpty && request[4] == Data("q".utf8))
        let address = request[2]
        for part in ["one", "two"] {
            try await worker.send(Self.frames(["MDPW02", UInt8(0x03), address, "", part]))
        }
        try await worker.send(Self.frames(["MDPW02", UInt8(0x04), address, "", "done"]))
        #expect(Self.text(try await Self.receive(client, "partial 1")) == ["MDPC02", "0x02", "report", "one"])
        #expect(Self.text(try await Self.receive(client, "partial 2")) == ["MDPC02", "0x02", "report", "two"])
        #expect(Self.text(try await Self.receive(client, "final")) == ["MDPC02", "0x03", "report", "done"])
        await fixture.stop()
    }

    @Test("versions mix: an MDP/0.1 client gets only the FINAL of an MDP/0.2 worker; an MDP/0.2 client gets an MDP/0.1 REPLY as FINAL")
    func mixedVersions() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let newWorker = try await fixture.servicePeer()
        try await newWorker.send(Self.frames(["MDPW02", UInt8(0x01), "new"]))
        let oldWorker = try await fixture.servicePeer()
        try await oldWorker.send(Self.frames(["", "MDPW01", UInt8(0x01), "old"]))
        try await Self.waitAlive(fixture, "new")
        try await Self.waitAlive(fixture, "old")

        let oldClient = try await fixture.servicePeer()
        try await oldClient.send(Self.frames(["", "MDPC01", "new", "x"]))
        let request = try await Self.receive(newWorker, "REQUEST", frames: 3)
        try await newWorker.send(Self.frames(["MDPW02", UInt8(0x03), request[2], "", "partial"]))
        try await newWorker.send(Self.frames(["MDPW02", UInt8(0x04), request[2], "", "final"]))
        #expect(Self.text(try await Self.receive(oldClient, "reply")) == ["", "MDPC01", "new", "final"])

        let newClient = try await fixture.servicePeer()
        try await newClient.send(Self.frames(["MDPC02", UInt8(0x01), "old", "y"]))
        let oldRequest = try await Self.receive(oldWorker, "REQUEST", frames: 4)
        try await oldWorker.send(Self.frames(["", "MDPW01", UInt8(0x03), oldRequest[3], "", "answer"]))
        #expect(Self.text(try await Self.receive(newClient, "final")) == ["MDPC02", "0x03", "old", "answer"])
        await fixture.stop()
    }

    @Test("the broker heartbeats each worker and removes one that falls silent, with DISCONNECT")
    func heartbeats() async throws {
        let fixture = try await BrokerFixture.start { configuration in
            configuration.serviceHeartbeat = .milliseconds(100)
            configuration.serviceLiveness = 3
        }
        let worker = try await fixture.servicePeer()
        try await worker.send(Majordomo.worker(.v02, .ready, service: "quiet"))
        #expect(Self.text(try await Self.receive(worker, "HEARTBEAT")) == ["MDPW02", "0x05"])
        // The worker never answers: after 3 intervals it is gone, and told so.
        var last: [Data] = []
        while last != Majordomo.worker(.v02, .disconnect) {
            last = try await Self.receive(worker, "DISCONNECT after silence")
        }
        try await Self.waitAlive(fixture, "quiet", false)
        try await waitUntil("one expiry counted") { fixture.broker.services.statistics.expiredWorkers == 1 }
        await fixture.stop()
    }

    @Test("a request for a service with no worker waits service.wait, then gets 503 no-worker with its request_id")
    func noWorker() async throws {
        let fixture = try await BrokerFixture.start { configuration in
            configuration.serviceWait = .milliseconds(300)
        }
        let client = try await fixture.servicePeer()
        let header = RequestHeader(operation: "programs.list", timeoutMilliseconds: 5000)
        let body = try ServiceBody.requestBody(header, content: Data(#"{"site_id":12}"#.utf8))
        let sent = ContinuousClock.now
        try await client.send(Majordomo.clientRequest(.v02, service: "eto.sites", body: body))
        let answer = try await Self.receive(client, "the broker's error reply")
        let waited = ContinuousClock.now - sent
        #expect(waited >= .milliseconds(250), "answered after \(waited)")
        #expect(Self.text(Array(answer[0..<3])) == ["MDPC02", "0x03", "eto.sites"])
        let (reply, envelope) = try ServiceBody.reply(Array(answer[3...]))
        #expect(reply.status == 503)
        #expect(reply.error?.code == "no-worker")
        #expect(reply.error?.message.contains("eto.sites") == true)
        #expect(reply.requestID == header.requestID)
        #expect(envelope.parent == body[2], "the parent header is the request's header")
        await fixture.stop()
    }

    @Test("a stopping broker says DISCONNECT to its workers")
    func shutdownDisconnects() async throws {
        let fixture = try await BrokerFixture.start(Self.patient)
        let worker = try await fixture.servicePeer()
        try await worker.send(Majordomo.worker(.v01, .ready, service: "bye"))
        try await Self.waitAlive(fixture, "bye")
        await fixture.broker.stop()
        var last: [Data] = []
        while last != Majordomo.worker(.v01, .disconnect) { last = try await Self.receive(worker, "DISCONNECT at shutdown") }
        await fixture.stop()
    }
}
