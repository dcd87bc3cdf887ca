import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite("Service plane frames and bodies")
struct ServiceBodyTests {
    @Test("every REQUEST/REPLY header vector gets the documented verdict, naming the field", arguments: try Vectors.serviceHeaders())
    func headerVector(_ vector: Vectors.ServiceHeader) throws {
        do {
            if vector.kind == "request" {
                try WireJSON.decode(RequestHeader.self, from: vector.header, frame: "header", code: .invalidHeader).validate()
            } else {
                try WireJSON.decode(ReplyHeader.self, from: vector.header, frame: "header", code: .invalidHeader).validate()
            }
            #expect(vector.valid, "\(vector.name) was accepted")
        } catch {
            #expect(!vector.valid, "\(vector.name) was refused: \(error)")
            if let field = vector.field {
                #expect(error.message.contains("'\(field)'"), "\(vector.name): '\(error.message)' does not name \(field)")
            }
        }
    }

    @Test("a REQUEST and its REPLY round-trip through their bodies")
    func roundTrip() throws {
        let header = RequestHeader(operation: "programs.list", timeoutMilliseconds: 5000, idempotent: true)
        let body = try ServiceBody.requestBody(header, content: Data(#"{"site_id":12}"#.utf8))
        #expect(body.count == 6)
        let (decoded, envelope) = try ServiceBody.request(body)
        #expect(decoded == header)
        #expect(envelope.content == Data(#"{"site_id":12}"#.utf8))

        let failure = ServiceFailure(code: "not-found", message: "no site 12", retryable: false)
        let reply = ServiceBody.replyBody(ReplyHeader(requestID: header.requestID, status: 404, error: failure), parent: body[2])
        let (replyHeader, replyEnvelope) = try ServiceBody.reply(reply)
        #expect(replyHeader.status == 404 && replyHeader.error == failure && replyHeader.requestID == header.requestID)
        #expect(replyEnvelope.parent == body[2])
        #expect(ServiceBody.peekRequest(body).requestID == header.requestID)
        #expect(ServiceBody.peekRequest([Data("junk".utf8)]).requestID == nil)
    }

    @Test("an event-plane envelope is not a request body")
    func wrongCommand() throws {
        let (_, frames) = try Events.frames(seq: 1)
        #expect(throws: ProtocolError.self) { try ServiceBody.request(frames) }
    }

    @Test("Majordomo frames are built and parsed as RFC 7 and RFC 18 lay them out")
    func majordomoFrames() throws {
        let v1 = Majordomo.clientRequest(.v01, service: "echo", body: [Data("a".utf8)])
        #expect(v1 == [Data(), Data("MDPC01".utf8), Data("echo".utf8), Data("a".utf8)])
        let v2 = Majordomo.worker(.v02, .final, client: Data([1, 2]), body: [Data("b".utf8)])
        #expect(v2 == [Data("MDPW02".utf8), Data([0x04]), Data([1, 2]), Data(), Data("b".utf8)])
        guard case .worker(let parsed) = try Majordomo.parse(v2[...]) else {
            Issue.record("parsed as a client message")
            return
        }
        #expect(parsed.command == .final && parsed.client == Data([1, 2]) && parsed.body == [Data("b".utf8)])
        #expect(Majordomo.WorkerCommand(byte: 0x03, version: .v01) == .final)
        #expect(Majordomo.WorkerCommand(byte: 0x03, version: .v02) == .partial)
        #expect(Majordomo.WorkerCommand(byte: 0x06, version: .v01) == nil)
        #expect(throws: Majordomo.Malformed.self) { try Majordomo.parse([Data("MDPC01".utf8), Data("echo".utf8)][...]) }
    }
}
