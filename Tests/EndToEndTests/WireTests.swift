import Foundation
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

/// The wire as a stranger's client meets it: a release-like broker process, fed every envelope
/// vector (the timestamp forms that once stopped the broker among them) over a plain DEALER.
@Suite("The broker process on the wire")
struct WireTests {
    @Test("a broker process answers every envelope vector as documented and keeps serving; what it journals is normalised")
    func everyVectorAgainstAProcess() async throws {
        let directory = try TemporaryDirectory("wire")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        let context = try Context()
        let io = try IOThread(context: context)
        // A minimum of 1.1 is a setting of the receiver: those vectors are not for this broker.
        for vector in try Vectors.envelopes() where vector.minimum == nil {
            let socket = try await io.open(.dealer, linger: 0) { try $0.connect(endpoints.ingest) }
            let answer = try await Events.exchange(socket, vector.frames, timeout: .seconds(10))
            #expect(answer.command.rawValue == vector.reply, "\(vector.name)")
            if let code = vector.code {
                let error = try answer.decodeHeader(ErrorHeader.self)
                #expect(error.code.rawValue == code, "\(vector.name): \(error.message)")
                if let word = vector.mentions { #expect(error.message.contains(word), "\(vector.name): \(error.message)") }
                if let command = vector.command { #expect(error.command == command, "\(vector.name)") }
            }
            await socket.close()
            #expect(broker.isRunning, "the broker process stopped after \(vector.name): \(programs.read("broker.log"))")
        }
        // Still serving: a producer that did nothing wrong is acknowledged.
        let good = try await io.open(.dealer, linger: 0) { try $0.connect(endpoints.ingest) }
        let ack = try await Events.exchange(good, try Events.frames(producer: "after-vectors", seq: 1).1, timeout: .seconds(10))
        #expect(ack.command == .ack)
        await good.close()

        // What subscribers will read: `producer_seq` 54.0 as 54, and the broker's own `bus_seq`.
        let headers = try JournalFile.headers(at: directory.path("broker/journal.sqlite")).map { text in
            try #require(JSONValue.parse(Data(text.utf8))?.object, "\(text)")
        }
        let floatVector = try #require(headers.first { $0["producer"] == .string("vector-seq-1") })
        #expect(floatVector["producer_seq"] == .integer(54))
        let rows = try JournalFile.rows(at: directory.path("broker/journal.sqlite"))
        let replaced = try #require(headers.first { $0["producer"] == .string("vector-bus-2") })
        let replacedRow = try #require(rows.first { $0.producer == "vector-bus-2" })
        #expect(replaced["bus_seq"] == .integer(replacedRow.busSeq) && replacedRow.busSeq != 7)
        let maximum = try #require(rows.first { $0.producer == "vector-seq-2" })
        #expect(maximum.producerSeq == Int64.max)
        #expect(!rows.contains { $0.producer == "vector-reserved-1" }, "a peer's security.* event is never journaled")

        await io.shutdown()
        await context.terminate()
        #expect(await broker.stop() == 0)
    }
}
