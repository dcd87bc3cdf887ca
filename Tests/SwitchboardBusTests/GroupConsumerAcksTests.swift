import Foundation
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardTesting
import Testing
import ZeroMQ

/// How `GroupConsumer` settles with ACKS (protocol 1.2, section 15.2), seen from a broker's
/// ROUTER socket played by hand: what goes on the wire, not what a broker makes of it.
@Suite("Consumer groups: a member's ACKS")
struct GroupConsumerAcksTests {
    /// Joins a consumer to a hand-played broker that says `takesAcks`, delivers `count` events,
    /// has a task per delivery ack it at once, and returns every settle message the broker read.
    static func settles(count: Int, takesAcks: Bool?) async throws -> [Envelope] {
        let io = try IOThread()
        let port = try freePort()
        let broker = try await io.open(.router, linger: 0) { try $0.bind("tcp://127.0.0.1:\(port)") }
        let consumer = GroupConsumer(
            io: io, endpoint: "tcp://127.0.0.1:\(port)", settings: .init(group: "filemaker", topics: ["checkin."], credit: count),
            logger: quietLogger())
        let running = Task { try await consumer.run() }
        let handlers = Task {
            await withTaskGroup(of: Void.self) { group in
                for await delivery in consumer.deliveries { group.addTask { try? await delivery.ack() } }
            }
        }
        // JOIN, then JOINED and the deliveries.
        let join = try #require(try await broker.receive(timeout: .seconds(10)))
        let member = join.frames[0]
        #expect(try Envelope.decode(join.frames.dropFirst(), limits: .groups).command == .join)
        let joined = JoinedHeader(
            group: "filemaker", member: "m", credit: count, ackWaitMilliseconds: 30_000, heartbeatMilliseconds: 1000,
            livenessMilliseconds: 30_000, maxDeliver: 5, backoffMilliseconds: [1000], cursor: 0, head: Int64(count), held: [],
            echoes: true, takesAcks: takesAcks)
        try await broker.send([member] + Envelope(command: .joined, header: try WireJSON.encode(joined)).frames())
        for seq in 1...count {
            var header = try Events.frames(seq: Int64(seq)).0
            header.busSeq = Int64(seq)
            let deliver = DeliverHeader(
                group: "filemaker", busSeq: Int64(seq), attempt: 1, deadline: Timestamp.now(), ackWaitMilliseconds: 30_000, first: true)
            try await broker.send(
                [member] + Envelope(command: .deliver, header: deliver.wireJSON(), parent: try WireJSON.encode(header)).frames())
        }
        // Every settle until each delivery is named once (HEARTBEATs aside).
        var settles: [Envelope] = []
        var named: [Int64] = []
        while named.count < count {
            let message = try #require(try await broker.receive(timeout: .seconds(10)), "\(named.count) of \(count) settled")
            let envelope = try Envelope.decode(message.frames.dropFirst(), limits: .groups)
            switch envelope.command {
            case .ack:
                settles.append(envelope)
                guard case .object(let fields)? = JSONValue.parse(envelope.header) else { continue }
                named.append(try SettleHeader(.ack, wire: fields).busSeq)
            case .acks:
                settles.append(envelope)
                guard case .object(let fields)? = JSONValue.parse(envelope.header) else { continue }
                let acks = try GroupAcks(wire: fields)
                #expect(acks.group == "filemaker" && envelope.version == .memberAcks)
                named += acks.deliveries.map(\.busSeq)
            case .heartbeat:
                // Answered as a broker answers: a consumer that hears nothing for its liveness
                // (30 s) joins again, and the ACKs of the old connection are never sent (on a
                // loaded CI machine, 179 of 200 had gone out by then).
                guard case .object(let fields)? = JSONValue.parse(envelope.header) else { continue }
                let echo = try HeartbeatHeader(wire: fields).echo
                let head = HeadHeader(head: Int64(count), first: 1, broker: "hand-played", echo: echo)
                try await broker.send([member] + Envelope(command: .head, header: try WireJSON.encode(head)).frames())
            default: continue
            }
        }
        #expect(named.sorted() == Array(1...Int64(count)), "every delivery acked once")
        consumer.leave()
        _ = try? await running.value
        handlers.cancel()
        await handlers.value
        await broker.close()
        await io.shutdown()
        return settles
    }

    @Test("200 ACKs made at once go out in fewer messages, as ACKS of 1.2 and each delivery once, to a broker that takes ACKS")
    func batched() async throws {
        let settles = try await Self.settles(count: 200, takesAcks: true)
        #expect(settles.contains { $0.command == .acks }, "no ACKS among \(settles.count) messages")
        #expect(settles.count < 200, "\(settles.count) messages for 200 ACKs")
    }

    @Test("to a broker without takes_acks (older than 1.2) every ACK goes alone")
    func olderBroker() async throws {
        for takesAcks in [nil, false] as [Bool?] {
            let settles = try await Self.settles(count: 50, takesAcks: takesAcks)
            #expect(settles.count == 50 && settles.allSatisfy { $0.command == .ack }, "\(settles.map(\.command))")
        }
    }
}
