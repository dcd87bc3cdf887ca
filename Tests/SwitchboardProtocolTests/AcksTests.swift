import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite("ACKS (protocol 1.1)")
struct AcksTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var header: Data
        var content: Data
        var valid: Bool
        var field: String?
        var testDescription: String { name }
    }

    static func vectors() throws -> [Vector] {
        let directory = Vectors.directory.appendingPathComponent("acks")
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".json") }.sorted().map { name in
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent(name))) as! [String: Any]
            let expect = object["expect"] as! [String: Any]
            return Vector(
                name: name, header: try JSONSerialization.data(withJSONObject: object["header"]!),
                content: try JSONSerialization.data(withJSONObject: object["content"]!), valid: expect["valid"] as! Bool,
                field: expect["field"] as? String)
        }
    }

    @Test("every ACKS vector gets its verdict, and an invalid one names its field", arguments: try vectors())
    func vector(_ vector: Vector) {
        let envelope = Envelope(command: .acks, header: vector.header, content: vector.content, version: .batchedAcks)
        do {
            let acks = try Acks(Envelope.parse(envelope.frames()))
            #expect(vector.valid, "\(vector.name) was read: \(acks)")
        } catch {
            #expect(!vector.valid, "\(vector.name): \(error)")
            if let field = vector.field { #expect(error.message.contains(field), "\(vector.name): \(error.message)") }
        }
    }

    @Test("what the broker writes reads back the same, in order, duplicates apart")
    func roundTrip() throws {
        let entries: [Acknowledgement] = (1...300).map { (n: Int) -> Acknowledgement in
            Acknowledgement(producerSeq: Int64(n), busSeq: Int64(1000 + n * 2), duplicate: n % 7 == 0)
        }
        let acks = Acks(producer: "riverside-1", entries: entries)
        let frames = acks.envelope().frames()
        #expect(frames[0] == Envelope.versionFrame(.batchedAcks))
        let read = try Acks(Envelope.parse(frames))
        #expect(read.producer == "riverside-1")
        #expect(read.entries.filter { !$0.duplicate } == entries.filter { !$0.duplicate })
        #expect(read.entries.filter { $0.duplicate } == entries.filter { $0.duplicate })
        // Empty lists are written, not left out (the schema requires both).
        let none = Acks(producer: "p", entries: [])
        #expect(String(decoding: none.contentJSON(), as: UTF8.self) == #"{"acks":[],"duplicates":[]}"#)
    }
}
