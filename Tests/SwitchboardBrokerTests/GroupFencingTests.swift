import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardTesting
import Synchronization
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// Two members of one group must never work on one event at once: for ETO, which cannot refuse
/// a second response, that is a duplicate. The broker keeps a dropped connection's deliveries
/// for its member's liveness, and a member asks `mayAct` before an effect (protocol section
/// 15.3, **Fencing**). Real broker, real allow-list, real CURVE sockets; the revocations are
/// the ones `BrokerService.watch` makes (the allow-list loses a key, every connection drops).
@Suite("Consumer group fencing")
struct GroupFencingTests {
    static let quiet = Logger(label: "test.fencing") { _ in SwiftLogNoOpLogHandler() }

    /// A broker on fixed ports (dropping connections binds its endpoints again).
    static func broker(liveness: Duration? = nil) async throws -> (SecureBroker, BrokerSecurity) {
        let port = try freePort(count: 5)
        let secure = try await SecureBroker.start(
            principals: [
                ("eto-1", .worker(service: "eto"), nil), ("eto-2", .worker(service: "eto"), nil), ("riverside-1", .kiosk, nil),
                ("riverside-2", .kiosk, nil), ("ops", .admin, nil),
            ]
        ) { configuration in
            configuration.ingestEndpoint = "tcp://127.0.0.1:\(port)"
            configuration.fanoutEndpoint = "tcp://127.0.0.1:\(port + 1)"
            configuration.replayEndpoint = "tcp://127.0.0.1:\(port + 2)"
            configuration.serviceEndpoint = "tcp://127.0.0.1:\(port + 3)"
            configuration.groupsEndpoint = "tcp://127.0.0.1:\(port + 4)"
            if let liveness { configuration.groupLiveness = liveness }
        }
        return (secure, try #require(secure.fixture.broker.security))
    }

    static func certificate(_ secure: SecureBroker, _ name: String) -> String {
        (secure.certificates as NSString).appendingPathComponent("\(name).cert")
    }

    static func member(_ secure: SecureBroker, _ principal: String, name: String, endpoint: String? = nil) throws -> GroupConsumer {
        let settings = GroupConsumer.Settings(
            group: "eto", topics: [CheckIn.type], credit: 8, member: name, socketOptions: try secure.clientOptions(principal),
            joinTimeout: .seconds(2))
        return GroupConsumer(
            io: secure.fixture.io, endpoint: endpoint ?? secure.fixture.endpoints.groups, settings: settings, logger: quiet)
    }

    /// Four check-ins of four people (all four may be in flight at once), journaled.
    static func publish(_ secure: SecureBroker, count: Int = 4) async throws {
        let directory = try TemporaryDirectory("fencing-outbox")
        defer { directory.remove() }
        let outbox = try Outbox(path: directory.path("outbox.sqlite"), producer: "riverside-1")
        try await outbox.enqueue(
            (0..<count).map { i in
                .init(type: CheckIn.type, schema: CheckIn.schema, content: Events.checkIn(index: i), key: "person-\(i)")
            })
        var settings = OutboxSender.Settings()
        settings.socketOptions = try secure.clientOptions("riverside-1")
        let sender = OutboxSender(
            outbox: outbox, io: secure.fixture.io, endpoint: secure.fixture.endpoints.ingest, settings: settings, logger: quiet)
        #expect(try await sender.deliver(until: .now + .seconds(60)).delivered == count)
    }

    /// Takes `count` deliveries from a member and keeps them unsettled.
    static func take(_ count: Int, from consumer: GroupConsumer) async -> [GroupDelivery] {
        var taken: [GroupDelivery] = []
        for await delivery in consumer.deliveries {
            taken.append(delivery)
            if taken.count == count { break }
        }
        return taken
    }

    /// Moves a certificate out of the allow-list and reloads it, dropping every connection.
    static func revoke(_ secure: SecureBroker, _ security: BrokerSecurity, _ name: String) throws -> String {
        let held = certificate(secure, name) + ".held"
        try FileManager.default.moveItem(atPath: certificate(secure, name), toPath: held)
        #expect(security.reload(reason: "test").map(\.name) == [name])
        secure.fixture.broker.dropAllConnections()
        return held
    }

    /// Each member leaves and its run ends, the readers end with the deliveries, then the broker stops.
    static func finish(
        _ secure: SecureBroker, members: [(GroupConsumer, Task<Void, any Error>)], readers: [Task<Void, Never>] = []
    ) async throws {
        for (member, _) in members { member.leave() }
        for (_, run) in members { try await run.value }
        for reader in readers { await reader.value }
        await secure.stop()
    }

    /// Matching events journaled and not settled, as `groups.list` tells an admin.
    static func lag(_ secure: SecureBroker) async throws -> Int64? {
        let admin = secure.fixture.groupsClient(socketOptions: try secure.clientOptions("ops"))
        return try await admin.groups().first { $0.name == "eto" }?.lag
    }

    @Test(
        "connections dropped by a revocation of someone else: the member's deliveries wait for it, it claims them back and may act; the other member gets none"
    )
    func droppedConnectionKeepsDeliveries() async throws {
        // A liveness the member's rejoin fits in even on a loaded machine: the promise is "within
        // the liveness", and this test is about what happens inside it.
        let (secure, security) = try await Self.broker(liveness: .seconds(20))
        let first = try Self.member(secure, "eto-1", name: "eto:w1")
        let firstRun = Task { try await first.run() }
        try await Self.publish(secure)
        let held = await Self.take(4, from: first)
        #expect(held.count == 4)
        for delivery in held { #expect(await first.mayAct(on: delivery)) }

        let second = try Self.member(secure, "eto-2", name: "eto:w2")
        let secondRun = Task { try await second.run() }
        let gotByOther = Mutex<[Int64]>([])
        let otherReader = Task {
            for await delivery in second.deliveries {
                gotByOther.withLock { $0.append(delivery.busSeq) }
                try? await delivery.ack()
            }
        }
        try await waitUntil("the second member joins", timeout: .seconds(30)) { second.isJoined }

        // A kiosk key revoked: every connection drops, both members join again on new ones.
        _ = try Self.revoke(secure, security, "riverside-2")
        var rejoined = first.notices.makeAsyncIterator()
        var sawRejoin = false
        while let notice = await rejoined.next() {
            if case .rejoining = notice { sawRejoin = true }
            if case .joined(let joined) = notice, sawRejoin {
                #expect(Set(joined.held ?? []) == Set(held.map(\.busSeq)))
                break
            }
        }
        for delivery in held {
            #expect(await first.mayAct(on: delivery))
            try await delivery.ack()
        }
        try await waitUntil("every check-in is settled", timeout: .seconds(30)) { try await Self.lag(secure) == 0 }
        #expect(gotByOther.withLock { $0 }.isEmpty)

        try await Self.finish(secure, members: [(first, firstRun), (second, secondRun)], readers: [otherReader])
    }

    @Test(
        "a member that still hears the broker while its own messages are held up is not held by the time the broker gives its delivery to another member, and mayAct says no"
    )
    func oneWayStallIsFenced() async throws {
        let (secure, _) = try await Self.broker()
        let port = try #require(URL(string: secure.fixture.endpoints.groups.replacingOccurrences(of: "tcp://", with: "http://"))?.port)
        let link = try CuttableLink(to: "127.0.0.1", port: port)
        defer { link.stop() }
        let first = try Self.member(secure, "eto-1", name: "eto:w1", endpoint: "tcp://127.0.0.1:\(link.port)")
        let firstRun = Task { try await first.run() }
        try await Self.publish(secure, count: 1)
        let held = try #require(await Self.take(1, from: first).first)
        #expect(await first.mayAct(on: held))

        // The other member notes what the first one's standing was when the event reached it.
        let second = try Self.member(secure, "eto-2", name: "eto:w2")
        let secondRun = Task { try await second.run() }
        let handedOver = Mutex<[(busSeq: Int64, firstStanding: DeliveryStanding)]>([])
        let otherReader = Task {
            for await delivery in second.deliveries {
                let standing = first.standing(of: held)
                handedOver.withLock { $0.append((delivery.busSeq, standing)) }
                try? await delivery.ack()
            }
        }
        try await waitUntil("the second member joins", timeout: .seconds(30)) { second.isJoined }

        // From now on the broker reads nothing of the first member's, while the first member
        // still hears the broker's HEAD every heartbeat until the broker removes it.
        link.holdRequests()
        try await waitUntil("the broker gives the event to the other member", timeout: .seconds(30)) {
            !handedOver.withLock { $0.isEmpty }
        }
        let handOver = try #require(handedOver.withLock { $0.first })
        #expect(handOver.busSeq == held.busSeq)
        #expect(handOver.firstStanding != .held)
        // Once its messages flow again it joins anew, is not given the event back, and is told so.
        link.releaseRequests()
        #expect(await first.mayAct(on: held) == false)

        try await Self.finish(secure, members: [(first, firstRun), (second, secondRun)], readers: [otherReader])
    }

    @Test(
        "an ACK made while the member is between connections waits for its next JOINED and goes out on the new connection, instead of being lost until the ack wait"
    )
    func settleBetweenConnectionsGoesOut() async throws {
        // The member gives the broker up after its liveness, about when the broker takes the
        // delivery back; with no other member the delivery waits, and the next JOIN claims it.
        let (secure, security) = try await Self.broker(liveness: .seconds(5))
        let first = try Self.member(secure, "eto-1", name: "eto:w1")
        let firstRun = Task { try await first.run() }
        try await Self.publish(secure, count: 1)
        let held = try #require(await Self.take(1, from: first).first)

        // Its own key revoked: the connection drops and every JOIN is refused, so the member
        // gives the broker up and keeps trying; the ACK is made meanwhile.
        var notices = first.notices.makeAsyncIterator()
        let certificate = try Self.revoke(secure, security, "eto-1")
        while let notice = await notices.next() {
            if case .rejoining = notice { break }
        }
        #expect(!first.isJoined)
        let ack = Task { try await held.ack() }
        try FileManager.default.moveItem(atPath: certificate, toPath: Self.certificate(secure, "eto-1"))
        #expect(security.reload(reason: "test").isEmpty)
        try await ack.value
        // The broker gave it back in JOINED and took the ACK: settled long before its ack wait
        // (30 s) would have made it come again.
        try await waitUntil("the check-in is settled", timeout: .seconds(10)) { try await Self.lag(secure) == 0 }

        try await Self.finish(secure, members: [(first, firstRun)])
    }

    @Test(
        "a member refused past its liveness: its deliveries go to the other member, and when it is back mayAct says no for each, so nothing is done twice"
    )
    func refusedMemberIsFenced() async throws {
        let (secure, security) = try await Self.broker()
        let first = try Self.member(secure, "eto-1", name: "eto:w1")
        let firstRun = Task { try await first.run() }
        try await Self.publish(secure)
        let held = await Self.take(4, from: first)
        #expect(held.count == 4)

        let second = try Self.member(secure, "eto-2", name: "eto:w2")
        let secondRun = Task { try await second.run() }
        let doneByOther = Mutex<[Int64]>([])
        let otherReader = Task {
            for await delivery in second.deliveries {
                guard await second.mayAct(on: delivery) else { continue }
                doneByOther.withLock { $0.append(delivery.busSeq) }
                try? await delivery.ack()
            }
        }
        try await waitUntil("the second member joins", timeout: .seconds(30)) { second.isJoined }

        let certificate = try Self.revoke(secure, security, "eto-1")
        try await waitUntil("the other member does all four, after the first one's liveness", timeout: .seconds(60)) {
            doneByOther.withLock { $0.count } == 4
        }
        // The first member's handlers, slow, ask only now before writing: nothing it sent has been
        // read for longer than its liveness less a heartbeat, so the answer waits until
        // it is known, which is when the member is let in again and is not given them back.
        let answers = Task {
            var answers: [Bool] = []
            for delivery in held { answers.append(await first.mayAct(on: delivery)) }
            return answers
        }
        try FileManager.default.moveItem(atPath: certificate, toPath: Self.certificate(secure, "eto-1"))
        #expect(security.reload(reason: "test").isEmpty)
        let answered = await answers.value
        #expect(answered == [false, false, false, false])
        #expect(Set(doneByOther.withLock { $0 }) == Set(held.map(\.busSeq)))
        try await waitUntil("the first member is back", timeout: .seconds(60)) { first.isJoined }
        #expect(try await Self.lag(secure) == 0)

        try await Self.finish(secure, members: [(first, firstRun), (second, secondRun)], readers: [otherReader])
    }
}
