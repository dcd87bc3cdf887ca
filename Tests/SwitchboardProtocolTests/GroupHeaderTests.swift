import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// The consumer-group header vectors (`protocol/vectors/groups`, protocol/README.md section 15)
/// against the Swift codec: the verdict `check_vectors.py` holds the JSON Schemas to, and an
/// error that names the field.
@Suite("Consumer group headers")
struct GroupHeaderTests {
    /// Reads `vector.header` as the broker (member → broker commands) or a member (JOINED,
    /// DELIVER) does.
    static func read(_ vector: Vectors.GroupHeader) throws(ProtocolError) {
        func fields() throws(ProtocolError) -> [String: JSONValue] {
            guard case .object(let fields)? = JSONValue.parse(vector.header) else {
                throw ProtocolError(.invalidJSON, "header frame must be a JSON object")
            }
            return fields
        }
        switch vector.command {
        case "JOIN": _ = try JoinHeader(wire: fields())
        case "HEARTBEAT": _ = try HeartbeatHeader(wire: fields())
        case "ACK": _ = try SettleHeader(.ack, wire: fields())
        case "ACKS": _ = try GroupAcks(wire: fields())
        case "NACK": _ = try SettleHeader(.nack, wire: fields())
        case "TERM": _ = try SettleHeader(.term, wire: fields())
        case "PROGRESS": _ = try SettleHeader(.progress, wire: fields())
        case "LEAVE":
            let leave = try WireJSON.decode(LeaveHeader.self, from: vector.header, frame: "header", code: .invalidHeader)
            // The broker reads LEAVE with the decoder and looks the name up (an unknown name is
            // `not-member`); the rule of section 15.2 is the group-name rule.
            guard GroupName.isValid(leave.group) else {
                throw ProtocolError(
                    .invalidHeader, "header: field 'group' must be 1–64 of a–z 0–9 _ - starting with a letter, got '\(leave.group)'")
            }
        case "JOINED":
            let joined = try WireJSON.decode(JoinedHeader.self, from: vector.header, frame: "header", code: .invalidHeader)
            guard GroupName.isValid(joined.group) else { throw ProtocolError(.invalidHeader, "header: field 'group' is no group name") }
        case "DELIVER":
            let deliver = try WireJSON.decode(DeliverHeader.self, from: vector.header, frame: "header", code: .invalidHeader)
            guard GroupName.isValid(deliver.group) else { throw ProtocolError(.invalidHeader, "header: field 'group' is no group name") }
            guard Timestamp.parse(deliver.deadline) != nil else {
                throw ProtocolError(.invalidHeader, "header: field 'deadline' is no RFC 3339 date-time")
            }
        default:
            throw ProtocolError(.unknownCommand, "the vector names no consumer-group command: '\(vector.command)'")
        }
    }

    @Test("every consumer-group header vector gets the documented verdict, naming the field", arguments: try Vectors.groupHeaders())
    func headerVector(_ vector: Vectors.GroupHeader) {
        do {
            try Self.read(vector)
            #expect(vector.valid, "\(vector.name) was accepted")
        } catch {
            #expect(!vector.valid, "\(vector.name) was refused: \(error)")
            #expect(error.code == .invalidHeader, "\(vector.name): \(error)")
            if let field = vector.field {
                #expect(error.message.contains("'\(field)'"), "\(vector.name): '\(error.message)' does not name \(field)")
            }
        }
    }

    @Test("the vectors cover every member command with valid and invalid headers")
    func coverage() throws {
        let vectors = try Vectors.groupHeaders()
        for command in ["JOIN", "ACK", "ACKS", "NACK", "TERM", "PROGRESS", "LEAVE", "HEARTBEAT"] {
            #expect(vectors.contains { $0.command == command && $0.valid }, "no valid \(command) vector")
            #expect(vectors.contains { $0.command == command && !$0.valid }, "no invalid \(command) vector")
        }
        #expect(vectors.allSatisfy { $0.valid || $0.field != nil }, "every invalid vector names its field")
    }

    @Test("a JOIN and each settle round-trip through their wire JSON")
    func roundTrip() throws {
        let join = JoinHeader(group: "filemaker", topics: ["person."], credit: 8, member: "worker-2", start: .sequence(42))
        guard case .object(let joinFields)? = JSONValue.parse(join.wireJSON()) else {
            Issue.record("JOIN wire JSON is not an object")
            return
        }
        #expect(try JoinHeader(wire: joinFields) == join)
        let rejoin = JoinHeader(
            group: "filemaker", topics: ["person."], credit: 8,
            holding: [HeldDelivery(busSeq: 7, attempt: 2), HeldDelivery(busSeq: 9, attempt: 1)])
        guard case .object(var rejoinFields)? = JSONValue.parse(rejoin.wireJSON()) else {
            Issue.record("JOIN wire JSON is not an object")
            return
        }
        #expect(try JoinHeader(wire: rejoinFields) == rejoin)
        // A bus_seq named twice counts once, with its first attempt.
        rejoinFields["holding"] = .array([
            .object(["bus_seq": .integer(7), "attempt": .integer(2)]), .object(["bus_seq": .integer(7), "attempt": .integer(5)]),
        ])
        #expect(try JoinHeader(wire: rejoinFields).holding == [HeldDelivery(busSeq: 7, attempt: 2)])
        for outcome in [SettleHeader.Outcome.ack, .nack, .term, .progress] {
            let settle = SettleHeader(
                outcome, group: "filemaker", busSeq: 1042, attempt: 2, delayMilliseconds: outcome == .nack ? 5000 : nil,
                code: outcome == .nack || outcome == .term ? "filemaker-busy" : nil,
                message: outcome == .nack || outcome == .term ? "busy" : nil)
            guard case .object(let fields)? = JSONValue.parse(settle.wireJSON()) else {
                Issue.record("\(outcome) wire JSON is not an object")
                continue
            }
            #expect(try SettleHeader(outcome, wire: fields) == settle)
            #expect(settle.command.rawValue == outcome.rawValue)
        }
    }

    @Test("DELIVER's header, written by hand for the broker's hot path, is the sorted compact JSON of its fields")
    func deliverHeaderBytes() throws {
        for (group, seq, attempt) in [("filemaker", Int64(1), 1), ("eto-2", Int64.max, 100), ("a", Int64(42), 3)] {
            let header = DeliverHeader(
                group: group, busSeq: seq, attempt: attempt, deadline: "2026-11-24T05:00:00.123Z", ackWaitMilliseconds: 30_000)
            let expected = JSONValue.object([
                "group": .string(group), "bus_seq": .integer(seq), "attempt": .integer(Int64(attempt)),
                "deadline": .string("2026-11-24T05:00:00.123Z"), "ack_wait_ms": .integer(30_000),
            ]).compactData
            #expect(header.wireJSON() == expected, "\(String(decoding: header.wireJSON(), as: UTF8.self))")
            #expect(try WireJSON.decode(DeliverHeader.self, from: header.wireJSON(), frame: "header", code: .invalidHeader) == header)
        }
    }
}
