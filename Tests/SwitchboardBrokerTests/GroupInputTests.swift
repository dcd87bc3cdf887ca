import Foundation
import SwitchboardBroker
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

/// A raw member on the groups endpoint: frames in, envelopes out, nothing hidden.
struct RawMember {
    let socket: AsyncSocket

    static func connect(_ fixture: BrokerFixture) async throws -> RawMember {
        RawMember(
            socket: try await fixture.io.open(.dealer, linger: 0) { [endpoints = fixture.endpoints] in try $0.connect(endpoints.groups) })
    }

    func send(_ command: Command, _ header: Data) async throws {
        try await socket.send(Envelope(command: command, header: header).frames())
    }

    /// The next message that is not a HEAD.
    func next(timeout: Duration = .seconds(10)) async throws -> Envelope {
        while true {
            guard let message = try await socket.receive(timeout: timeout) else {
                throw WaitTimedOut(description: "nothing within \(timeout)")
            }
            let envelope = try Envelope.decode(message.frames)
            if envelope.command != .head { return envelope }
        }
    }

    func error(after command: Command, _ header: Data) async throws -> ErrorHeader {
        try await send(command, header)
        let answer = try await next()
        #expect(answer.command == .error, "\(command): \(answer.command)")
        return try answer.decodeHeader(ErrorHeader.self)
    }

    func join(_ group: String, credit: Int) async throws -> JoinedHeader {
        try await send(.join, JoinHeader(group: group, topics: ["checkin."], credit: credit).wireJSON())
        return try await next().decodeHeader(JoinedHeader.self)
    }

    func delivery() async throws -> DeliverHeader {
        let envelope = try await next()
        #expect(envelope.command == .deliver)
        return try envelope.decodeHeader(DeliverHeader.self)
    }
}

@Suite("Consumer groups: bad input")
struct GroupInputTests {
    static func json(_ fields: [String: JSONValue]) -> Data { JSONValue.object(fields).compactData }

    @Test("every new command refuses bad input with the documented ERROR, and the group keeps serving its members")
    func badInput() async throws {
        // Raw members that never heartbeat, in a test that is not about liveness.
        let fixture = try await BrokerFixture.start { $0.groupLiveness = .seconds(120) }
        let producer = try await fixture.producer()
        for seq in 1...3 { #expect(try await Events.exchange(producer, try Events.frames(seq: Int64(seq)).1).command == .ack) }
        let stranger = try await RawMember.connect(fixture)
        let join: (String, JSONValue, String) -> [String: JSONValue] = { group, credit, topic in
            ["group": .string(group), "topics": .array([.string(topic)]), "credit": credit]
        }
        // JOIN
        var error = try await stranger.error(after: .join, Self.json(join("filemaker", .integer(0), "checkin.")))
        #expect(error.code == .invalidHeader && error.message.contains("credit"), "\(error)")
        error = try await stranger.error(after: .join, Self.json(join("filemaker", .integer(1001), "checkin.")))
        #expect(error.code == .invalidHeader && error.message.contains("credit"), "\(error)")
        error = try await stranger.error(after: .join, Self.json(join("FileMaker", .integer(1), "checkin.")))
        #expect(error.code == .invalidHeader && error.message.contains("group"), "\(error)")
        error = try await stranger.error(
            after: .join, Self.json(["group": .string("filemaker"), "topics": .array([]), "credit": .integer(1)]))
        #expect(error.code == .invalidHeader && error.message.contains("topics"), "\(error)")
        var start = join("filemaker", .integer(1), "checkin.")
        start["start"] = .string("tail")
        error = try await stranger.error(after: .join, Self.json(start))
        #expect(error.code == .invalidHeader && error.message.contains("start"), "\(error)")

        // A real member joins and holds bus_seq 1.
        let member = try await RawMember.connect(fixture)
        let joined = try await member.join("filemaker", credit: 1)
        #expect(joined.group == "filemaker" && joined.credit == 1 && joined.cursor == 0)
        let first = try await member.delivery()
        #expect(first.busSeq == 1 && first.attempt == 1)

        error = try await stranger.error(after: .join, Self.json(join("filemaker", .integer(1), "person.")))
        #expect(error.code == .groupConflict, "\(error)")
        // Settles from a connection that is no member, for an unknown group, of an unknown delivery.
        let ack = SettleHeader(.ack, group: "filemaker", busSeq: 1, attempt: 1)
        error = try await stranger.error(after: .ack, ack.wireJSON())
        #expect(error.code == .notMember && error.ref == "filemaker/1", "\(error)")
        error = try await member.error(after: .ack, SettleHeader(.ack, group: "nosuch", busSeq: 1, attempt: 1).wireJSON())
        #expect(error.code == .notMember, "\(error)")
        error = try await member.error(after: .ack, SettleHeader(.ack, group: "filemaker", busSeq: 3, attempt: 1).wireJSON())
        #expect(error.code == .notHeld, "\(error)")
        error = try await member.error(after: .ack, SettleHeader(.ack, group: "filemaker", busSeq: 1, attempt: 2).wireJSON())
        #expect(error.code == .notHeld && error.message.contains("attempt"), "\(error)")
        // Another member may not settle what the first holds.
        let other = try await RawMember.connect(fixture)
        _ = try await other.join("filemaker", credit: 1)
        let second = try await other.delivery()
        #expect(second.busSeq == 2)
        error = try await other.error(after: .ack, ack.wireJSON())
        #expect(error.code == .notHeld, "\(error)")
        // Malformed settles.
        error = try await member.error(
            after: .nack,
            Self.json(["group": .string("filemaker"), "bus_seq": .integer(1), "attempt": .integer(1), "delay_ms": .integer(-1)]))
        #expect(error.code == .invalidHeader && error.message.contains("delay_ms"), "\(error)")
        error = try await member.error(
            after: .term, Self.json(["group": .string("filemaker"), "bus_seq": .integer(1), "attempt": .integer(1)]))
        #expect(error.code == .invalidHeader && error.message.contains("code"), "\(error)")
        error = try await member.error(
            after: .ack, Self.json(["group": .string("filemaker"), "bus_seq": .integer(0), "attempt": .integer(1)]))
        #expect(error.code == .invalidHeader && error.message.contains("bus_seq"), "\(error)")
        error = try await member.error(after: .leave, try WireJSON.encode(LeaveHeader(group: "eto")))
        #expect(error.code == .notMember, "\(error)")
        error = try await member.error(after: .fetch, try WireJSON.encode(FetchHeader(from: 1)))
        #expect(error.code == .unknownCommand && error.command == "FETCH", "\(error)")
        // Operators' requests with bad input.
        func request(_ operation: String, _ content: [String: JSONValue]) async throws -> ReplyHeader {
            try await stranger.socket.send(
                ServiceBody.requestBody(RequestHeader(operation: operation, timeoutMilliseconds: 5000), content: Self.json(content)))
            return try await stranger.next().decodeHeader(ReplyHeader.self)
        }
        var reply = try await request("groups.drop", [:])
        #expect(reply.status == 404 && reply.error?.code == "unknown-operation")
        reply = try await request("groups.create", ["group": .string("eto"), "topics": .string("checkin.")])
        #expect(reply.status == 422 && reply.error?.message.contains("topics") == true, "\(reply)")
        reply = try await request("dlq.show", ["group": .string("nosuch"), "bus_seq": .integer(1)])
        #expect(reply.status == 404, "\(reply)")
        reply = try await request("dlq.replay", ["group": .string("filemaker")])
        #expect(reply.status == 422 && reply.error?.message.contains("bus_seq") == true, "\(reply)")

        // Nobody was harmed: both members settle what they hold and get the rest.
        // (`other` still holds 2 with credit 1, so 3 can only go to `member`.)
        try await member.send(.ack, ack.wireJSON())
        let third = try await member.delivery()
        #expect(third.busSeq == 3)
        try await other.send(.ack, SettleHeader(.ack, group: "filemaker", busSeq: 2, attempt: 1).wireJSON())
        try await member.send(.ack, SettleHeader(.ack, group: "filemaker", busSeq: 3, attempt: 1).wireJSON())
        // (The cursor passes events the group does not take, such as the audit of its creation.)
        try await waitUntil("the group's cursor passes 3") {
            (try JournalFile.groupCursor(at: fixture.directory.path("broker/journal.sqlite"), group: "filemaker") ?? 0) >= 3
        }
        await fixture.stop()
    }

    @Test(
        "ACKS settles every pair it names as its own ACK would: one not-held ERROR per pair not held, the rest settled, the credit refilled; bad or 1.0 ACKS refused"
    )
    func memberAcks() async throws {
        let fixture = try await BrokerFixture.start { $0.groupLiveness = .seconds(120) }
        let journal = fixture.directory.path("broker/journal.sqlite")
        let producer = try await fixture.producer()
        for seq in 1...6 { #expect(try await Events.exchange(producer, try Events.frames(seq: Int64(seq)).1).command == .ack) }
        let member = try await RawMember.connect(fixture)
        let joined = try await member.join("filemaker", credit: 4)
        #expect(joined.takesAcks == true)
        var held: [Int64] = []
        for _ in 1...4 { held.append(try await member.delivery().busSeq) }
        #expect(held == [1, 2, 3, 4])
        func acks(_ pairs: [(Int64, Int)], on socket: RawMember) async throws {
            let acks = GroupAcks(group: "filemaker", deliveries: pairs.map { HeldDelivery(busSeq: $0.0, attempt: $0.1) })
            try await socket.socket.send(acks.envelope().frames())
        }
        // 99 was never delivered and 3 is held under attempt 1: both refused, 1, 2 and 4 settled.
        try await acks([(1, 1), (2, 1), (99, 1), (3, 2), (4, 1)], on: member)
        var deliveries: [Int64] = []
        var refused: [String: ErrorHeader] = [:]
        for _ in 1...4 {
            let envelope = try await member.next()
            switch envelope.command {
            case .deliver: deliveries.append(try envelope.decodeHeader(DeliverHeader.self).busSeq)
            case .error:
                let error = try envelope.decodeHeader(ErrorHeader.self)
                refused[error.ref ?? "-"] = error
            default: Issue.record("unexpected \(envelope.command)")
            }
        }
        #expect(deliveries == [5, 6], "the three settled free three credits; two events are left")
        #expect(refused["filemaker/99"]?.code == .notHeld && refused["filemaker/99"]?.command == "ACKS", "\(refused)")
        #expect(refused["filemaker/3"]?.code == .notHeld && refused["filemaker/3"]?.message.contains("attempt") == true, "\(refused)")

        // Refused whole: a 1.0 ACKS, a bad header, a connection that is no member.
        let pairs = GroupAcks(group: "filemaker", deliveries: [HeldDelivery(busSeq: 3, attempt: 1)])
        try await member.socket.send(Envelope(command: .acks, header: pairs.wireJSON()).frames())
        var error = try await member.next().decodeHeader(ErrorHeader.self)
        #expect(error.code == .unknownCommand && error.message.contains("1.2"), "\(error)")
        try await member.socket.send(
            Envelope(command: .acks, header: Data(#"{"group":"filemaker","acks":[]}"#.utf8), version: .memberAcks).frames())
        error = try await member.next().decodeHeader(ErrorHeader.self)
        #expect(error.code == .invalidHeader && error.message.contains("'acks'"), "\(error)")
        try await member.socket.send(
            Envelope(command: .acks, header: Data(#"{"acks":[[3, 1]],"group":"filemaker","note":"x"}"#.utf8), version: .memberAcks)
                .frames())
        let stranger = try await RawMember.connect(fixture)
        try await acks([(3, 1)], on: stranger)
        error = try await stranger.next().decodeHeader(ErrorHeader.self)
        #expect(error.code == .notMember && error.ref == "filemaker", "\(error)")

        // The spaced ACKS above (read by the general parse) settled 3; 5 and 6 now, then nothing
        // is held: an ACK of 1 again is the next answer, not-held.
        try await acks([(5, 1), (6, 1)], on: member)
        error = try await member.error(after: .ack, SettleHeader(.ack, group: "filemaker", busSeq: 1, attempt: 1).wireJSON())
        #expect(error.code == .notHeld && error.ref == "filemaker/1", "\(error)")
        try await waitUntil("the group's cursor passes 6") {
            (try JournalFile.groupCursor(at: journal, group: "filemaker") ?? 0) >= 6
        }
        await fixture.stop()
    }

    @Test("settling waits at most groups.commit_interval for its commit; a clean stop commits what still waits")
    func commitInterval() async throws {
        // 1 s, the most allowed: the stop below comes well inside it.
        let fixture = try await BrokerFixture.start {
            $0.groupCommitInterval = .seconds(1)
            $0.groupLiveness = .seconds(120)
        }
        let journal = fixture.directory.path("broker/journal.sqlite")
        let producer = try await fixture.producer()
        for seq in 1...3 { #expect(try await Events.exchange(producer, try Events.frames(seq: Int64(seq)).1).command == .ack) }
        let member = try await RawMember.connect(fixture)
        _ = try await member.join("filemaker", credit: 3)
        for _ in 1...3 {
            let delivery = try await member.delivery()
            try await member.send(.ack, SettleHeader(.ack, group: "filemaker", busSeq: delivery.busSeq, attempt: 1).wireJSON())
        }
        // A HEARTBEAT after the ACKs on the same connection: its HEAD means the broker read them.
        try await member.send(.heartbeat, Envelope.emptyObject)
        while try #require(try await member.socket.receive(timeout: .seconds(10))).frames[1] != Data("HEAD".utf8) {}
        await fixture.stop(remove: false)
        #expect((try JournalFile.groupCursor(at: journal, group: "filemaker") ?? 0) >= 3)

        // Restarted: the acked events never come again; the next one does.
        let again = try await BrokerFixture.start(directory: fixture.directory) { $0.groupCommitInterval = .milliseconds(50) }
        let producer2 = try await again.producer()
        let member2 = try await RawMember.connect(again)
        _ = try await member2.join("filemaker", credit: 3)
        let (_, fourth) = try Events.frames(seq: 4)
        #expect(try await Events.exchange(producer2, fourth).command == .ack)
        let delivery = try await member2.delivery()
        #expect(delivery.busSeq > 3 && delivery.attempt == 1, "\(delivery)")
        // Without a stop, the interval's own commit puts the ACK on disk.
        try await member2.send(.ack, SettleHeader(.ack, group: "filemaker", busSeq: delivery.busSeq, attempt: 1).wireJSON())
        try await waitUntil("the ACK of bus_seq \(delivery.busSeq) is committed") {
            (try JournalFile.groupCursor(at: journal, group: "filemaker") ?? 0) >= delivery.busSeq
        }
        await again.stop()
    }

    @Test("groups.commit_interval outside 0ms–1s is refused, naming the key")
    func commitIntervalBounds() throws {
        var configuration = BrokerConfiguration()
        configuration.insecure = true
        configuration.groupCommitInterval = .milliseconds(1001)
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
        do {
            try configuration.validate()
        } catch {
            #expect("\(error)".contains("groups.commit_interval"), "\(error)")
        }
        configuration.groupCommitInterval = .zero
        try configuration.validate()
    }
}
