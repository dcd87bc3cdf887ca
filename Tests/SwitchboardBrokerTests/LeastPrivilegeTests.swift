import Foundation
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// What a stolen kiosk key, or a worker's, can no longer do (issue 26): state the Directory's
/// facts, ask the Directory for changes or reads, publish the broker's own event families, or
/// get another back end's tokens from `auth`. Real CURVE sockets against a secure broker.
@Suite("Least privilege: facts, the Directory and tokens by principal")
struct LeastPrivilegeTests {
    static let principals: [(String, Role, Date?)] = [
        ("riverside-1", .kiosk, nil), ("directory-1", .worker(service: "directory"), nil),
        ("filemaker-1", .worker(service: "filemaker"), nil), ("eto-1", .worker(service: "eto"), nil),
        ("reports-1", .worker(service: "reports"), nil), ("auth-1", .auth, nil),
    ]

    static func person(_ producer: String, type: String, content: String) throws -> [Data] {
        try Events.frames(producer: producer, seq: 1, type: type, schema: "\(type)/1", content: Data(content.utf8)).1
    }

    @Test("only worker:directory publishes person.*: a kiosk's forged fact and request and another worker's are refused as forbidden")
    func directoryFacts() async throws {
        let secure = try await SecureBroker.start(principals: Self.principals)
        let ingest = secure.fixture.endpoints.ingest
        let fact = #"{"person_id":1,"name":"Dana Staff","office":"North","source":"directory"}"#
        let request = #"{"name":"Fake Person","office":"North","source":"kiosk"}"#
        let kiosk = try await secure.dealer("riverside-1", ingest)
        for (type, content) in [("person.deleted", fact), ("person.created", fact), ("person.created", request)] {
            let answer = try await Events.exchange(
                kiosk, try Self.person("riverside-1", type: type, content: content), timeout: .seconds(10))
            #expect(answer.command == .error, "\(type)")
            let error = try answer.decodeHeader(ErrorHeader.self)
            #expect(error.code == .forbidden && error.message.contains("checkin.*"), "\(error.message)")
        }
        let filemaker = try await secure.dealer("filemaker-1", ingest)
        let forged = try await Events.exchange(
            filemaker, try Self.person("filemaker-1", type: "person.deleted", content: fact), timeout: .seconds(10))
        #expect(forged.command == .error)
        let directory = try await secure.dealer("directory-1", ingest)
        let stated = try await Events.exchange(
            directory, try Self.person("directory-1", type: "person.created", content: fact), timeout: .seconds(10))
        #expect(stated.command == .ack, "the syncer states the Directory's facts")
        let rows = try secure.fixture.journalRows()
        #expect(rows.filter { $0.producer != "broker" }.map(\.producer) == ["directory-1"], "nothing refused was journaled")
        await secure.stop()
    }

    @Test("no role publishes the broker's families (dlq.*, security.*, groups.*), and no worker may be named after another family")
    func brokerFamilies() async throws {
        let secure = try await SecureBroker.start(principals: Self.principals)
        let worker = try await secure.dealer("reports-1", secure.fixture.endpoints.ingest)
        for type in ["dlq.eto", "security.refused", "groups.changed"] {
            let answer = try await Events.exchange(worker, try Self.person("reports-1", type: type, content: "{}"), timeout: .seconds(10))
            #expect(answer.command == .error, "\(type)")
            #expect(try answer.decodeHeader(ErrorHeader.self).message.contains("only the broker"), "\(type)")
        }
        for service in ["dlq", "checkin", "person", "security", "groups", "auth"] {
            #expect(Role("worker:\(service)") == nil, "worker:\(service)")
        }
        await secure.stop()
    }

    /// Sends `operation` of service `service` from `client` and returns the REPLY's status, or
    /// nil when `auth-1` (serving `auth`) received it instead.
    static func call(
        _ client: AsyncSocket, service: String, operation: String, content: String, auth: AsyncSocket? = nil
    ) async throws -> Int? {
        let body = try ServiceBody.requestBody(RequestHeader(operation: operation, timeoutMilliseconds: 2000), content: Data(content.utf8))
        try await client.send(Majordomo.clientRequest(.v02, service: service, body: body))
        if let auth {
            // The request either reaches auth (allowed) or comes back refused.
            while true {
                if let refused = try await client.receive(timeout: .milliseconds(50)) {
                    return try ServiceBody.reply(Array(refused.frames[3...])).0.status
                }
                if let delivered = try await auth.receive(timeout: .milliseconds(50)), delivered.frames.count > 4,
                    delivered.frames[1] == Data([0x02])
                {
                    // Answer, so auth is free for the next request.
                    let (header, _) = try ServiceBody.request(Array(delivered.frames[4...]))
                    let reply = ServiceBody.replyBody(ReplyHeader(requestID: header.requestID, status: 200))
                    try await auth.send(Majordomo.worker(.v02, .final, client: delivered.frames[2], body: reply))
                    _ = try await client.receive(timeout: .seconds(10))
                    return nil
                }
            }
        }
        let reply = try #require(try await client.receive(timeout: .seconds(10)))
        return try ServiceBody.reply(Array(reply.frames[3...])).0.status
    }

    @Test("a kiosk may call only eto's reads: the Directory is refused, reads and writes alike")
    func kioskServices() async throws {
        let secure = try await SecureBroker.start(principals: Self.principals)
        let kiosk = try await secure.dealer("riverside-1", secure.fixture.endpoints.service)
        #expect(try await Self.call(kiosk, service: "directory", operation: "people.list", content: "{}") == 403)
        #expect(try await Self.call(kiosk, service: "directory", operation: "people.delete", content: #"{"person_id":1}"#) == 403)
        #expect(try await Self.call(kiosk, service: "auth", operation: "token.get", content: #"{"backend":"eto","account":"a"}"#) == 403)
        await secure.stop()
    }

    @Test("token.get: a worker gets tokens of its own back end only, or of those its certificate lists; token.invalidate likewise")
    func tokensByPrincipal() async throws {
        // A long service liveness: the test's auth heartbeats only before each call, and with
        // the whole suite running a call took longer than the default 7.5 s (the broker then
        // answered 503 itself, and the expectations below saw a status where auth should have).
        let secure = try await SecureBroker.start(principals: Self.principals, backends: ["reports-1": ["eto", "filemaker"]]) {
            $0.serviceLiveness = 10
        }
        let service = secure.fixture.endpoints.service
        let auth = try await secure.dealer("auth-1", service)
        try await auth.send(Majordomo.worker(.v02, .ready, service: "auth"))
        try await waitUntil("auth-1 serves auth") { secure.fixture.broker.services.statistics.workers == 1 }
        func token(_ principal: String, _ backend: String, operation: String = "token.get") async throws -> Int? {
            // The test's auth answers no heartbeats of its own: one now keeps the broker from
            // counting it dead when the whole suite makes this test slow.
            try await auth.send(Majordomo.worker(.v02, .heartbeat))
            let client = try await secure.dealer(principal, service)
            let status = try await Self.call(
                client, service: "auth", operation: operation,
                content: #"{"backend":"\#(backend)","account":"svc","fingerprint":"00000000"}"#, auth: auth)
            await client.close()
            return status
        }
        #expect(try await token("filemaker-1", "filemaker") == nil, "its own back end reaches auth")
        #expect(try await token("filemaker-1", "eto") == 403)
        #expect(try await token("filemaker-1", "eto", operation: "token.invalidate") == 403)
        #expect(try await token("directory-1", "sap") == 403)
        #expect(try await token("eto-1", "eto") == nil)
        #expect(try await token("reports-1", "filemaker") == nil, "a certificate's backends widen its own")
        #expect(try await token("reports-1", "eto") == nil)
        #expect(try await token("reports-1", "reports") == 403, "and replace the service's name")
        // A duplicated key cannot smuggle another back end past the broker: auth reads the
        // content through the same parser the broker checked.
        try await auth.send(Majordomo.worker(.v02, .heartbeat))
        let client = try await secure.dealer("filemaker-1", service)
        let smuggled = try await Self.call(
            client, service: "auth", operation: "token.get", content: #"{"backend":"eto","account":"svc","backend":"filemaker"}"#,
            auth: auth)
        let checked = JSONValue.parse(Data(#"{"backend":"eto","backend":"filemaker"}"#.utf8))?.object?["backend"]
        #expect((smuggled == 403) == (checked == .string("eto")))
        await secure.stop()
    }
}
