import Foundation
import SwitchboardProtocol
import Testing

/// Protocol 1.3 (section 15.2): a JOIN's `batch`, and how a member reads a DELIVER of several
/// deliveries.
@Suite("DELIVERs of several deliveries")
struct DeliverBatchTests {
    static func delivery(_ busSeq: Int64, content: Data = Data(#"{"n":1}"#.utf8)) -> [Data] {
        let header = DeliverHeader(
            group: "eto", busSeq: busSeq, attempt: 1, deadline: "2026-11-29T08:00:10.812Z", ackWaitMilliseconds: 30_000)
        return [header.wireJSON(), Data(#"{"bus_seq":\#(busSeq),"type":"checkin.recorded"}"#.utf8), Envelope.emptyObject, content]
    }

    static func message(_ seqs: [Int64], version: ProtocolVersion = .deliverBatches) -> [Data] {
        [Envelope.versionFrame(version), Data("DELIVER".utf8)] + seqs.flatMap { delivery($0) }
    }

    /// What `decodeDeliveries` refuses `frames` with (nil: read).
    static func code(_ frames: [Data]) -> ProtocolError.Code? {
        do {
            _ = try Envelope.decodeDeliveries(frames)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("a 1.3 DELIVER of three deliveries reads as the three DELIVERs it carries, in order; any other message as decode reads it")
    func reads() throws {
        let envelopes = try Envelope.decodeDeliveries(Self.message([7, 8, 9]))
        #expect(envelopes.count == 3)
        for (index, envelope) in envelopes.enumerated() {
            let single = try Envelope.decode(
                [Envelope.versionFrame(.deliverBatches), Data("DELIVER".utf8)] + Self.delivery(Int64(7 + index)))
            #expect(envelope == single)
            #expect(try DeliverHeader(wire: envelope.header).busSeq == Int64(7 + index))
        }
        let one = Self.message([5])
        #expect(try Envelope.decodeDeliveries(one) == [try Envelope.decode(one, limits: .groups)])
        let head = Envelope(command: .head, header: Data(#"{"head":3}"#.utf8)).frames()
        #expect(try Envelope.decodeDeliveries(head).map(\.command) == [.head])
    }

    @Test("refused whole: a frame count that is no 2 + 4n, a version below 1.3, a bad delivery inside, more than the message limit")
    func refusals() {
        #expect(Self.code(Array(Self.message([1, 2]).dropLast())) == .malformed, "9 frames")
        #expect(
            Self.code(Self.message([1, 2]) + [Data("{}".utf8), Data("{}".utf8)]) == .malformed, "12 frames, the last delivery cut short")
        #expect(Self.code(Self.message([1, 2], version: .memberAcks)) == .malformed, "1.2")
        var broken = Self.message([1, 2, 3])
        broken[2 + 4 + 1] = Data("{not json".utf8)
        #expect(Self.code(broken) == .invalidJSON, "the second delivery's parent frame")
        let big = Data(#"""#.utf8) + Data(repeating: UInt8(ascii: "x"), count: 200 * 1024) + Data(#"""#.utf8)
        let tooMuch = [Envelope.versionFrame(.deliverBatches), Data("DELIVER".utf8)] + (1...3).flatMap { Self.delivery($0, content: big) }
        #expect(Self.code(tooMuch) == .tooLarge, "three of 200 KiB pass 512 KiB")
    }

    @Test("a DELIVER's parent frame past 4096 bytes (bus_seq added to a full producer header) is read, alone or in a batch")
    func longParent() throws {
        let parent =
            Data(#"{"bus_seq":1234567,"type":"checkin.recorded","note":""#.utf8) + Data(repeating: 0x61, count: 4096)
            + Data(#""}"#.utf8)
        var one = Self.message([1])
        one[3] = parent
        #expect(try Envelope.decodeDeliveries(one).first?.parent == parent)
        var three = Self.message([1, 2, 3])
        three[2 + 4 + 1] = parent
        #expect(try Envelope.decodeDeliveries(three)[1].parent == parent)
    }

    @Test("a batch is checked in section 2's order: signature, then major version, before its frame count and size")
    func checkOrder() {
        var unsigned = Self.message([1, 2])
        unsigned[0] = Data([0x58, 0x59, 0x5A, 1, 3])
        #expect(Self.code(unsigned) == .badSignature)
        #expect(Self.code(Self.message([1, 2], version: ProtocolVersion(major: 2, minor: 0))) == .unsupportedVersion)
        #expect(Self.code(Self.message([1, 2])) == nil)
    }

    @Test(
        "JOIN's batch: 1 by default and left out, 1–1000 read and written, anything else refused naming the field; sent as 1.3 only above 1"
    )
    func joinBatch() throws {
        func read(_ json: String) throws(ProtocolError) -> JoinHeader {
            guard case .object(let fields)? = JSONValue.parse(Data(json.utf8)) else { throw ProtocolError(.invalidJSON, "not an object") }
            return try JoinHeader(wire: fields)
        }
        #expect(try read(#"{"group":"eto","topics":["checkin."],"credit":8}"#).batch == 1)
        #expect(try read(#"{"group":"eto","topics":["checkin."],"credit":8,"batch":1000}"#).batch == 1000)
        #expect(try read(#"{"group":"eto","topics":["checkin."],"credit":8,"batch":16.0}"#).batch == 16)
        for bad in ["0", "1001", "\"8\"", "null", "2.5"] {
            #expect(throws: ProtocolError.self, "\(bad)") {
                try read(#"{"group":"eto","topics":["checkin."],"credit":8,"batch":"# + bad + "}")
            }
            do {
                _ = try read(#"{"group":"eto","topics":["checkin."],"credit":8,"batch":"# + bad + "}")
            } catch {
                #expect(error.code == .invalidHeader && error.message.contains("'batch'"), "\(error)")
            }
        }
        let single = JoinHeader(group: "eto", topics: ["checkin."], credit: 8)
        #expect(!String(decoding: single.wireJSON(), as: UTF8.self).contains("batch"))
        #expect(single.envelope().version == .current)
        let batched = JoinHeader(group: "eto", topics: ["checkin."], credit: 8, batch: 8)
        #expect(try read(String(decoding: batched.wireJSON(), as: UTF8.self)) == batched)
        #expect(batched.envelope().version == .deliverBatches)
    }
}
