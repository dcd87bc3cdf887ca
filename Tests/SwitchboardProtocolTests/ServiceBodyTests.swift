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

    @Test(
        "reading a body gives each header vector the same verdict as JSONDecoder, and plain headers (read without it) the same value",
        arguments: try Vectors.serviceHeaders())
    func bodyAgreesWithDecoder(_ vector: Vectors.ServiceHeader) throws {
        let frame0 = try ServiceBody.requestBody(RequestHeader(operation: "ping", timeoutMilliseconds: 1), content: Data("{}".utf8))[0]
        func body(_ header: Data) -> [Data] {
            [
                frame0, Data((vector.kind == "request" ? "REQUEST" : "REPLY").utf8), header, Data("{}".utf8), Data("{}".utf8),
                Data("{}".utf8),
            ]
        }
        // The vector itself, then variants with a repeated key and with an unknown field.
        var texts = [vector.header]
        if let text = String(data: vector.header, encoding: .utf8), text.hasPrefix("{"), text.count > 2 {
            texts.append(Data(("{\"x_unknown\":[1,{\"a\":null}]," + text.dropFirst()).utf8))
        }
        for text in texts {
            if vector.kind == "request" {
                let slow = Result { () throws(ProtocolError) in
                    let header = try WireJSON.decode(RequestHeader.self, from: text, frame: "header", code: .invalidHeader)
                    try header.validate()
                    return header
                }
                let fast = Result { () throws(ProtocolError) in try ServiceBody.request(body(text)).0 }
                #expect(fast == slow, "\(vector.name)")
            } else {
                let slow = Result { () throws(ProtocolError) in
                    let header = try WireJSON.decode(ReplyHeader.self, from: text, frame: "header", code: .invalidHeader)
                    try header.validate()
                    return header
                }
                let fast = Result { () throws(ProtocolError) in try ServiceBody.reply(body(text)).0 }
                #expect(fast == slow, "\(vector.name)")
            }
        }
    }

    @Test("request and reply bodies carry the header bytes JSONEncoder writes (sorted keys, nil left out), plain or not")
    func headerBytes() throws {
        let id = UUIDv7.string()
        let requests = [
            RequestHeader(requestID: id, operation: "programs.list", timeoutMilliseconds: 5000),
            RequestHeader(requestID: id, operation: "ping", timeoutMilliseconds: 1, idempotent: true),
            RequestHeader(requestID: id, operation: "token.get", timeoutMilliseconds: 3_600_000, idempotent: false),
            RequestHeader(requestID: "not \"plain\" / é", operation: "a/b\n", timeoutMilliseconds: -3),
        ]
        for header in requests {
            #expect(try ServiceBody.requestBody(header, content: Data("{}".utf8))[2] == WireJSON.encode(header))
        }
        let replies = [
            ReplyHeader(requestID: id),
            ReplyHeader(requestID: nil, status: 503, error: ServiceFailure(code: "no-worker", message: "no worker for 'eto'")),
            ReplyHeader(requestID: id, status: 404, error: ServiceFailure(code: "not-found", message: "no site 12", retryable: false)),
            ReplyHeader(requestID: id, status: 504, error: ServiceFailure(code: "x", message: "ran out", retryable: true)),
            ReplyHeader(requestID: id, status: 500, error: ServiceFailure(code: "internal", message: "a \"quote\", a \\ and\tmore é")),
            ReplyHeader(requestID: nil, status: 200),
        ]
        for header in replies {
            #expect(ServiceBody.replyBody(header)[2] == (try WireJSON.encode(header)))
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
