import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// Every decoder that reads bytes from the network, fed random and mutated input: none may trap
/// (a trap in the broker takes every peer down). Each answers with a value or a `ProtocolError`
/// (or Majordomo's `Malformed`); these tests only need them to return.
@Suite("Decoders never trap on hostile input")
struct RobustnessTests {
    /// Frames of every envelope vector: valid messages and near-misses, the best seeds.
    static func seedMessages() throws -> [[Data]] { try Vectors.envelopes().map(\.frames) }

    static func mutate(_ data: Data, using random: inout SeededGenerator) -> Data {
        var bytes = [UInt8](data)
        let interesting: [UInt8] = Array("0123456789.-+eE\"\\{}[]:,tfn \u{7F}".utf8) + [0, 0xC3, 0xA9, 0xFF, 0x80]
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = Int.random(in: 0...bytes.count, using: &random)
            switch Int.random(in: 0..<4, using: &random) {
            case 0: bytes.insert(interesting.randomElement(using: &random)!, at: position)
            case 1 where position < bytes.count: bytes.remove(at: position)
            case 2 where position < bytes.count: bytes[position] = interesting.randomElement(using: &random)!
            default: bytes = Array(bytes.prefix(position))
            }
        }
        return Data(bytes)
    }

    static func mutateFrames(_ frames: [Data], using random: inout SeededGenerator) -> [Data] {
        var frames = frames
        switch Int.random(in: 0..<6, using: &random) {
        case 0 where !frames.isEmpty: frames.remove(at: Int.random(in: 0..<frames.count, using: &random))
        case 1 where !frames.isEmpty: frames.append(frames.randomElement(using: &random)!)
        default:
            if !frames.isEmpty {
                let index = Int.random(in: 0..<frames.count, using: &random)
                frames[index] = mutate(frames[index], using: &random)
            }
        }
        return frames
    }

    @Test("the envelope, EVENT header and check-in checks return on 30 000 mutated messages")
    func envelopes() async throws {
        var random = SeededGenerator(seed: 21)
        let seeds = try Self.seedMessages()
        var outcomes: [String: Int] = [:]
        for round in 0..<30_000 {
            await yieldNowAndThen(round)
            let frames = Self.mutateFrames(seeds.randomElement(using: &random)!, using: &random)
            _ = Envelope.readableCommand(frames)
            // The broker's quick check runs first on ingest: it must return too, and accept
            // nothing the general check refuses or reads otherwise.
            var quick: EventHeader?
            do {
                let envelope = try Envelope.check(frames)
                quick = envelope.quickPublishedEvent()
                var reference: String?
                let parsed = try envelope.parsed(reference: &reference)
                let header = try parsed.checkedPublishedEvent()
                if let quick {
                    #expect(quick == header, "round \(round)")
                    outcomes["quick", default: 0] += 1
                }
                outcomes["accepted", default: 0] += 1
            } catch {
                #expect(quick == nil, "round \(round): the quick check accepted what the general check refuses: \(error)")
                outcomes[error.code.rawValue, default: 0] += 1
            }
        }
        // The mutations reach deep: past the envelope into header and content rules.
        #expect(outcomes["accepted", default: 0] > 100)
        #expect(outcomes["quick", default: 0] > 50)
        #expect(outcomes["invalid-header", default: 0] > 100)
        #expect(outcomes["invalid-json", default: 0] > 100)
    }

    @Test("the JSON parser returns on 50 000 random and mutated documents")
    func json() async throws {
        var random = SeededGenerator(seed: 22)
        let seeds = try Self.seedMessages().flatMap { $0.dropFirst(2) }
        var parsed = 0
        for round in 0..<50_000 {
            await yieldNowAndThen(round)
            let data: Data
            if round % 5 == 0 {
                data = Data((0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
            } else {
                data = Self.mutate(seeds.randomElement(using: &random)!, using: &random)
            }
            if JSONValue.parse(data) != nil { parsed += 1 }
        }
        #expect(parsed > 1_000)
        // Deep nesting is refused, not a stack overflow.
        #expect(JSONValue.parse(Data((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)) == nil)
    }

    @Test("Majordomo frames and service bodies return on 30 000 mutated messages")
    func majordomo() async throws {
        var random = SeededGenerator(seed: 23)
        let seeds = try Vectors.majordomo().map(\.frames)
        let body = try ServiceBody.requestBody(
            RequestHeader(operation: "programs.list", timeoutMilliseconds: 5000), content: Data(#"{"site_id":12}"#.utf8))
        for round in 0..<30_000 {
            await yieldNowAndThen(round)
            let frames = Self.mutateFrames(seeds.randomElement(using: &random)!, using: &random)
            _ = try? Majordomo.parse(frames[...])
            let mutated = Self.mutateFrames(body, using: &random)
            _ = try? ServiceBody.request(mutated)
            _ = try? ServiceBody.reply(mutated)
            _ = ServiceBody.peekOperation(mutated)
            _ = ServiceBody.peekRequest(mutated)
        }
    }

    @Test("identifier, topic, schema and date checks return on 50 000 random strings")
    func identifiers() async {
        var random = SeededGenerator(seed: 24)
        let alphabet = Array("0123456789abcdefABCDEF-./:_$ 7é\u{0}")
        for round in 0..<50_000 {
            await yieldNowAndThen(round)
            let text = String((0..<Int.random(in: 0...40, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
            _ = UUIDv7.isValid(text)
            _ = UUIDv7.milliseconds(of: text)
            _ = Topic.isValidEventType(text)
            _ = Schema.isValidReference(text)
            _ = Timestamp.parseDate(text)
            _ = Producer.isValid(text)
            _ = Operation.isValid(text)
        }
    }
}
