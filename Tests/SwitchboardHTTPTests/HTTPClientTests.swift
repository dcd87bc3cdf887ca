import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import SwitchboardHTTP
import SwitchboardTesting
import Synchronization
import Testing

/// Live tests: a Hummingbird server on 127.0.0.1 answers the way the back ends do.
@Suite(.timeLimit(.minutes(1)))
struct HTTPClientTests {
    static let fileMakerNoRecord = #"{"response":{},"messages":[{"code":"101","message":"Record is missing"}]}"#
    static let fileMakerInvalidToken = #"{"response":{},"messages":[{"code":"952","message":"Invalid FileMaker Data API token (*)"}]}"#

    func base(_ port: Int, tls: Bool = false) -> String { tls ? "https://localhost:\(port)" : "http://127.0.0.1:\(port)" }

    @Test func retriesIdempotentRequestOn503UntilSuccess() async throws {
        let counter = Counter()
        let router = Router()
        router.get("flaky") { _, _ -> Response in
            counter.next("flaky") <= 2 ? .text(.serviceUnavailable, "{}") : .text(.ok, #"{"ok":true}"#)
        }
        try await withServer(router) { port in
            try await withClient { client, recorder in
                struct OK: Decodable { var ok: Bool }
                let request = OutRequest(.get, base(port), path: ["flaky"], api: .generic("test"), operation: "flaky")
                let response = try await client.execute(request)
                #expect(response.attempts == 3)
                #expect(try response.decode(OK.self).ok)
                #expect(counter.count("flaky") == 3)
                #expect(recorder.recorded.count == 2)
                #expect(recorder.recorded.allSatisfy { $0 <= .milliseconds(5) })
            }
        }
    }

    @Test func neverRetriesNonIdempotentRequest() async throws {
        let counter = Counter()
        let router = Router()
        router.post("flaky") { _, _ -> Response in
            counter.next("flaky")
            return .text(.serviceUnavailable, #"{"status":503,"error":"Service Unavailable","message":"busy"}"#)
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let request = OutRequest(
                    .post, base(port), path: ["flaky"], body: .json(Data("{}".utf8)), api: .directory, operation: "add")
                let error = try await #require(throws: OutError.self) { try await client.execute(request) }
                #expect(error.code == .vendor)
                #expect(error.status == 503)
                #expect(error.vendorCode == "Service Unavailable")
                #expect(error.vendorMessage == "busy")
                #expect(error.attempts == 1)
                #expect(counter.count("flaky") == 1)
            }
        }
    }

    @Test func honoursRetryAfterCappedByMaximum() async throws {
        let counter = Counter()
        let router = Router()
        router.get("limited") { _, _ -> Response in
            counter.next("limited") == 1 ? .text(.tooManyRequests, "{}", headers: [.retryAfter: "1"]) : .text(.ok, "{}")
        }
        router.get("slow-down") { _, _ -> Response in
            counter.next("slow") == 1 ? .text(.serviceUnavailable, "{}", headers: [.retryAfter: "120"]) : .text(.ok, "{}")
        }
        try await withServer(router) { port in
            try await withClient(maxRetryAfter: .seconds(2)) { client, recorder in
                _ = try await client.execute(OutRequest(.get, base(port), path: ["limited"], api: .generic("t"), operation: "limited"))
                #expect(recorder.recorded == [.seconds(1)])
                _ = try await client.execute(OutRequest(.get, base(port), path: ["slow-down"], api: .generic("t"), operation: "slow"))
                #expect(recorder.recorded == [.seconds(1), .seconds(2)])
            }
        }
    }

    @Test func fileMakerErrorWithCodeIsNeverRetried() async throws {
        let counter = Counter()
        let router = Router()
        router.get("fm500") { _, _ -> Response in
            counter.next("500")
            return .text(.internalServerError, Self.fileMakerNoRecord)
        }
        router.get("fm502coded") { _, _ -> Response in
            counter.next("502coded")
            return .text(.badGateway, Self.fileMakerNoRecord)
        }
        router.get("fm502") { _, _ -> Response in
            counter.next("502")
            return .text(.badGateway, "<html>Bad gateway</html>", contentType: "text/html")
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let error = try await #require(throws: OutError.self) {
                    try await client.execute(OutRequest(.get, base(port), path: ["fm500"], api: .fileMaker, operation: "records.get"))
                }
                #expect(error.code == .vendor)
                #expect(error.status == 500)
                #expect(error.vendorCode == "101")
                #expect(error.vendorMessage == "Record is missing")
                #expect(counter.count("500") == 1)

                let coded = try await #require(throws: OutError.self) {
                    try await client.execute(OutRequest(.get, base(port), path: ["fm502coded"], api: .fileMaker, operation: "records.get"))
                }
                #expect(coded.attempts == 1)
                #expect(counter.count("502coded") == 1)

                let gateway = try await #require(throws: OutError.self) {
                    try await client.execute(OutRequest(.get, base(port), path: ["fm502"], api: .fileMaker, operation: "records.get"))
                }
                #expect(gateway.code == .httpStatus)
                #expect(gateway.attempts == 3)
                #expect(counter.count("502") == 3)
            }
        }
    }

    @Test func connectionClosedMidResponseIsRetriedOnlyWhenIdempotent() async throws {
        struct Dropped: Error {}
        let counter = Counter()
        let router = Router()
        let handler: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            if counter.next("\(request.method) \(request.uri.path)") == 1 {
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: ResponseBody { writer in
                        try await writer.write(ByteBuffer(string: #"{"partial":"#))
                        throw Dropped()
                    })
            }
            return .text(.ok, #"{"partial":false}"#)
        }
        router.get("drop", use: handler)
        router.post("drop", use: handler)
        try await withServer(router) { port in
            try await withClient { client, _ in
                let response = try await client.execute(OutRequest(.get, base(port), path: ["drop"], api: .generic("t"), operation: "get"))
                #expect(response.attempts == 2)
                #expect(response.text == #"{"partial":false}"#)

                let error = try await #require(throws: OutError.self) {
                    try await client.execute(OutRequest(.post, base(port), path: ["drop"], api: .generic("t"), operation: "post"))
                }
                #expect(error.code == .connectionFailed)
                #expect(error.attempts == 1)
            }
        }
    }

    @Test func connectionRefusedIsRetriedThenTyped() async throws {
        // A port bound and held, never listening: connecting is refused, and no other test's
        // server can take it meanwhile.
        let refusing = try RefusingPort()
        let port = refusing.port
        try await withClient { client, recorder in
            let error = try await #require(throws: OutError.self) {
                try await client.execute(OutRequest(.get, base(port), path: ["x"], api: .generic("t"), operation: "refused"))
            }
            #expect(error.code == .connectionFailed)
            #expect(error.status == nil)
            #expect(error.attempts == 3)
            #expect(recorder.recorded.count == 2)
        }
        withExtendedLifetime(refusing) {}
    }

    @Test func attemptTimeoutIsTyped() async throws {
        let (gate, open) = AsyncStream<Void>.makeStream()
        let router = Router()
        router.post("hang") { _, _ -> Response in
            for await _ in gate {}
            return .text(.ok, "{}")
        }
        try await withServer(router) { port in
            try await withClient(timeout: .milliseconds(300)) { client, _ in
                let error = try await #require(throws: OutError.self) {
                    try await client.execute(OutRequest(.post, base(port), path: ["hang"], api: .generic("t"), operation: "hang"))
                }
                #expect(error.code == .timeout)
                #expect(error.attempts == 1)
            }
            open.finish()
        }
    }

    @Test func oversizedResponseIsATypedError() async throws {
        let router = Router()
        router.get("big") { _, _ -> Response in .text(.ok, String(repeating: "x", count: 5000)) }
        router.get("big-chunked") { _, _ -> Response in
            Response(
                status: .ok,
                body: ResponseBody { writer in
                    for _ in 0..<10 { try await writer.write(ByteBuffer(string: String(repeating: "y", count: 500))) }
                    try await writer.finish(nil)
                })
        }
        try await withServer(router) { port in
            try await withClient(maxResponseBytes: 1000) { client, _ in
                for path in ["big", "big-chunked"] {
                    let error = try await #require(throws: OutError.self) {
                        try await client.execute(OutRequest(.get, base(port), path: [.plain(path)], api: .generic("t"), operation: path))
                    }
                    #expect(error.code == .responseTooLarge)
                    #expect(error.attempts == 1)
                }
            }
        }
    }

    @Test func queryPathFormAndMultipartArriveIntact() async throws {
        let received = Locked<[String: String]>([:])
        let router = Router()
        router.get("users") { request, _ -> Response in
            received.withLock {
                $0["user"] = request.uri.queryParameters["user"].map(String.init)
                $0["password"] = request.uri.queryParameters["password"].map(String.init)
                $0["path"] = request.uri.path
            }
            return .text(.ok, "key-123", contentType: "text/plain")
        }
        router.post("form") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 16)
            received.withLock {
                $0["form"] = String(buffer: body)
                $0["formType"] = request.headers[.contentType]
            }
            return .text(.ok, "{}")
        }
        router.post("upload") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 16)
            received.withLock {
                $0["multipart"] = String(buffer: body)
                $0["multipartType"] = request.headers[.contentType]
            }
            return .text(.ok, #"{"response":{"modId":"3"},"messages":[{"code":"0","message":"OK"}]}"#)
        }
        let password = "p&ss #+ wörd=1%"
        try await withServer(router) { port in
            try await withClient { client, _ in
                let login = OutRequest(
                    .get, base(port), path: ["users"], query: [("user", "Ana María"), ("password", password)], api: .directory,
                    operation: "login", secrets: [password])
                #expect(try await client.execute(login).text == "key-123")
                #expect(received.withLock { $0["user"] } == "Ana María")
                #expect(received.withLock { $0["password"] } == password)

                let form = OutRequest(
                    .post, base(port), path: ["form"], body: .form([("a b", "c&d"), ("e", "+")]), api: .generic("t"), operation: "form")
                _ = try await client.execute(form)
                #expect(received.withLock { $0["form"] } == "a%20b=c%26d&e=%2B")
                #expect(received.withLock { $0["formType"] } == "application/x-www-form-urlencoded")

                let upload = OutRequest(
                    .post, base(port), path: ["upload"],
                    body: .multipart([
                        .init(name: "upload", filename: "photo.jpg", contentType: "image/jpeg", data: Data([0xFF, 0xD8, 0x41]))
                    ]),
                    api: .fileMaker, operation: "container.upload")
                _ = try await client.execute(upload)
                let type = try #require(received.withLock { $0["multipartType"] })
                #expect(type.hasPrefix("multipart/form-data; boundary="))
                let boundary = String(type.dropFirst("multipart/form-data; boundary=".count))
                let body = try #require(received.withLock { $0["multipart"] })
                #expect(body.hasPrefix("--\(boundary)\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"photo.jpg\"\r\n"))
                #expect(body.contains("Content-Type: image/jpeg\r\n\r\n"))
                #expect(body.hasSuffix("\r\n--\(boundary)--\r\n"))
            }
        }
        let request = OutRequest(.get, "https://h/base/", path: ["a/b c", "Connections('x')", 7], api: .generic("t"), operation: "o")
        #expect(request.url == "https://h/base/a%2Fb%20c/Connections('x')/7")
    }

    @Test func decodesWCFDatesFileMakerIDsAndReportsFieldPath() async throws {
        let router = Router()
        router.get("records") { _, _ -> Response in
            .text(
                .ok,
                #"{"response":{"data":[{"recordId":"32","modId":5,"created":"\/Date(1571411927090-0500)\/"},{"recordId":null,"modId":"1","created":"\/Date(-1000)\/"}]},"messages":[{"code":"0","message":"OK"}]}"#
            )
        }
        struct Record: Decodable {
            var recordId: FileMakerID
            var modId: FileMakerID
            var created: WCFDate
        }
        struct Envelope: Decodable {
            struct Body: Decodable { var data: [Record] }
            var response: Body
        }
        struct Lenient: Decodable {
            struct Body: Decodable { var data: [Partial] }
            struct Partial: Decodable { var modId: FileMakerID; var created: WCFDate }
            var response: Body
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let request = OutRequest(.get, base(port), path: ["records"], api: .fileMaker, operation: "records.range")
                let error = try await #require(throws: OutError.self) { try await client.execute(request, as: Envelope.self) }
                #expect(error.code == .decoding)
                #expect(error.message.contains("response.data[1].recordId"))

                let lenient = try await client.execute(request, as: Lenient.self)
                #expect(lenient.response.data[0].modId == "5")
                #expect(lenient.response.data[0].created.milliseconds == 1_571_411_927_090)
                #expect(lenient.response.data[0].created.offsetMinutes == -300)
                #expect(lenient.response.data[1].created.milliseconds == -1000)
            }
        }
    }

    @Test func basicCredentialsAreSentOnChallenge() async throws {
        let counter = Counter()
        let expected = "Basic " + Data("ana:s3cret!".utf8).base64EncodedString()
        let router = Router()
        router.post("Connections") { request, _ -> Response in
            counter.next("register")
            guard request.headers[.authorization] == expected else {
                return .text(.unauthorized, "", headers: [.wwwAuthenticate: #"Basic realm="SAP""#])
            }
            return .text(.created, #"{"d":{"ApplicationConnectionId":"conn-1234"}}"#)
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                var request = OutRequest(
                    .post, base(port), path: ["Connections"], body: .json(Data("{}".utf8)), api: .sapMobileServices, operation: "register")
                request.authorizer = BasicAuthorizer(username: "ana", password: "s3cret!", mode: .onChallenge)
                let response = try await client.execute(request)
                #expect(response.status == 201)
                #expect(response.attempts == 2)
                #expect(counter.count("register") == 2)

                request.authorizer = BasicAuthorizer(username: "ana", password: "wrong", mode: .onChallenge)
                let error = try await #require(throws: OutError.self) { try await client.execute(request) }
                #expect(error.status == 401)
                #expect(error.attempts == 2)
                #expect(counter.count("register") == 4)
            }
        }
    }

    @Test func expiredFileMakerTokenTriggersOneReauthentication() async throws {
        let counter = Counter()
        let router = Router()
        router.get("records") { request, _ -> Response in
            counter.next("records")
            return request.headers[.authorization] == "Bearer fresh-token"
                ? .text(.ok, #"{"response":{"data":[]},"messages":[{"code":"0","message":"OK"}]}"#)
                : .text(.unauthorized, Self.fileMakerInvalidToken)
        }
        router.get("never") { _, _ -> Response in
            counter.next("never")
            return .text(.unauthorized, Self.fileMakerInvalidToken)
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let calls = Locked<[String]>([])
                let accepted = Locked<[String]>([])
                let executor = AuthenticatedExecutor<String>(
                    client: client,
                    provider: { forceRefresh, rejected in
                        calls.withLock { $0.append("\(forceRefresh) \(rejected ?? "-")") }
                        return forceRefresh ? "fresh-token" : "stale-token"
                    },
                    authorizer: { BearerAuthorizer(token: $0) },
                    accepted: { token in accepted.withLock { $0.append(token) } })
                let request = OutRequest(.get, base(port), path: ["records"], api: .fileMaker, operation: "records.range")
                let response = try await executor.execute(request)
                #expect(response.status == 200)
                #expect(response.attempts == 2)
                #expect(calls.withLock { $0 } == ["false -", "true stale-token"])
                #expect(counter.count("records") == 2)
                // Only the token the server took is reported as having worked.
                #expect(accepted.withLock { $0 } == ["fresh-token"])

                let error = try await #require(throws: OutError.self) {
                    try await executor.execute(OutRequest(.get, base(port), path: ["never"], api: .fileMaker, operation: "never"))
                }
                #expect(error.code == .credentialRejected)
                #expect(error.vendorCode == "952")
                #expect(error.status == 401)
                #expect(counter.count("never") == 2)
                #expect(calls.withLock { $0.count } == 4)
                #expect(accepted.withLock { $0 } == ["fresh-token"])
                #expect(!error.description.contains("fresh-token") && !error.description.contains("stale-token"))
            }
        }
    }

    @Test func etoLoginPageMeansSessionGone() async throws {
        let router = Router()
        router.get("Actor.svc/participant/:id") { request, _ -> Response in
            guard request.headers[HTTPField.Name("securityToken")!] == "token-2" else {
                return .text(.ok, "<!DOCTYPE html><html><form action=\"login\"></form></html>", contentType: "text/html")
            }
            return .text(.ok, #"{"ID":7,"FirstName":"Ana","DateOfBirth":"\/Date(631152000000)\/"}"#)
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let executor = AuthenticatedExecutor<String>(
                    client: client, provider: { forceRefresh, _ in forceRefresh ? "token-2" : "token-1" },
                    authorizer: { HeaderAuthorizer.eto(enterpriseGuid: "ent-guid", securityToken: $0) })
                struct Participant: Decodable {
                    var ID: Int
                    var DateOfBirth: WCFDate
                }
                let participant = try await executor.execute(
                    OutRequest(.get, base(port), path: ["Actor.svc", "participant", 7], api: .eto, operation: "participant.get"),
                    as: Participant.self)
                #expect(participant.ID == 7)
                #expect(participant.DateOfBirth.milliseconds == 631_152_000_000)
            }
        }
    }

    @Test("an ETO write answered with the log-in page is not sent again blind: the credential is refreshed and the caller told to look")
    func etoWriteAfterLoginPageIsNotResent() async throws {
        let router = Router()
        let posts = Counter()
        router.post("TouchPoint.svc/TouchPointResponseAdd") { _, _ -> Response in
            posts.next("post")
            return .text(.ok, "<!DOCTYPE html><html><form action=\"login\"></form></html>", contentType: "text/html")
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let refreshes = Counter()
                let executor = AuthenticatedExecutor<String>(
                    client: client,
                    provider: { forceRefresh, _ in
                        guard forceRefresh else { return "token-1" }
                        refreshes.next("refresh")
                        return "token-2"
                    },
                    authorizer: { HeaderAuthorizer.eto(enterpriseGuid: "ent-guid", securityToken: $0) })
                let add = OutRequest(
                    .post, base(port), path: ["TouchPoint.svc", "TouchPointResponseAdd"], body: try .json(["TouchPointID": 54]), api: .eto,
                    operation: "touchPoint.add")
                for _ in 0..<2 {
                    do throws(SwitchboardHTTP.HTTPError) {
                        _ = try await executor.execute(add)
                        Issue.record("the log-in page was taken for success")
                    } catch {
                        #expect(error.code == .notResent, "\(error)")
                    }
                }
                #expect(posts.count("post") == 2, "each call sent its write once, never twice")
                #expect(refreshes.count("refresh") == 2)
            }
        }
    }

    @Test("an HTML error page with a 5xx status is a server error, not an expired ETO session")
    func etoHTMLServerErrorIsNotExpiry() async throws {
        let router = Router()
        router.get("Actor.svc/participant/:id") { _, _ -> Response in
            .text(.internalServerError, "<!DOCTYPE html><html><body>Runtime Error</body></html>", contentType: "text/html")
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let refreshes = Counter()
                let executor = AuthenticatedExecutor<String>(
                    client: client,
                    provider: { forceRefresh, _ in
                        if forceRefresh { refreshes.next("refresh") }
                        return "token-1"
                    },
                    authorizer: { HeaderAuthorizer.eto(enterpriseGuid: "ent-guid", securityToken: $0) })
                let get = OutRequest(.get, base(port), path: ["Actor.svc", "participant", 7], api: .eto, operation: "participant.get")
                do throws(SwitchboardHTTP.HTTPError) {
                    _ = try await executor.execute(get)
                    Issue.record("a 500 page was taken for success")
                } catch {
                    #expect(error.status == 500)
                    #expect(error.code != .credentialRejected)
                }
                #expect(refreshes.count("refresh") == 0, "no re-authentication for a server error page")
            }
        }
    }

    @Test func sapConnectionCheck404MeansRegisterAgain() async throws {
        let router = Router()
        router.get("app") { request, _ -> Response in
            request.headers[HTTPField.Name("X-SMP-APPCID")!] == "conn-new" ? .text(.ok, "{}") : .text(.notFound, "")
        }
        try await withServer(router) { port in
            try await withClient { client, _ in
                let registrations = Counter()
                let executor = AuthenticatedExecutor<String>(
                    client: client,
                    provider: { forceRefresh, _ in
                        guard forceRefresh else { return "conn-old" }
                        registrations.next("register")
                        return "conn-new"
                    },
                    authorizer: { HeaderAuthorizer.sapMobileServices(applicationConnectionID: $0) })
                var check = OutRequest(.get, base(port), path: ["app"], api: .sapMobileServices, operation: "connection.check")
                check.expiry = .sapConnectionCheck
                #expect(try await executor.execute(check).status == 200)
                #expect(registrations.count("register") == 1)

                // Without the check's detector a 404 is an ordinary error, not an expiry.
                check.expiry = nil
                let error = try await #require(throws: OutError.self) { try await executor.execute(check) }
                #expect(error.code == .httpStatus)
                #expect(error.status == 404)
                #expect(registrations.count("register") == 1)
            }
        }
    }

    @Test func secretsNeverReachLogsOrErrors() async throws {
        let password = "Pa ss&w#rd+ü"
        let apiKey = "api-key-2f9c7e"
        let bearer = "fm-token-77aa91"
        let router = Router()
        router.get("users") { _, _ -> Response in
            .text(.unauthorized, #"{"status":401,"error":"Unauthorized","message":"bad login","path":"/users"}"#)
        }
        router.get("people/:key") { _, _ -> Response in
            .text(.notFound, #"{"status":404,"error":"Not Found","message":"no key \#(apiKey)"}"#)
        }
        router.post("sessions") { _, _ -> Response in
            // ETO-style echo of the password, FileMaker-style token in header and body.
            .text(
                .internalServerError, #"{"Detail":"failed for Password \#(password)","Password":"\#(password)","token":"\#(bearer)"}"#,
                headers: [HTTPField.Name("X-FM-Data-Access-Token")!: bearer])
        }
        router.get("records") { _, _ -> Response in .text(.serviceUnavailable, "{}") }
        let capture = LogCapture()
        let errors = try await withServer(router) { port in
            try await withClient(logger: capture.logger) { client, _ in
                var errors: [OutError] = []
                let calls: [OutRequest] = [
                    OutRequest(
                        .get, base(port), path: ["users"], query: [("user", "ana"), ("password", password)], api: .directory,
                        operation: "login", secrets: [password]),
                    OutRequest(
                        .get, base(port), path: ["people", .credential], api: .directory, operation: "people.list",
                        authorizer: PathTokenAuthorizer(token: apiKey)),
                    OutRequest(
                        .post, base(port), path: ["sessions"], body: try .json(["Password": password]), api: .eto, operation: "login",
                        secrets: [password], authorizer: BasicAuthorizer(username: "ana", password: password)),
                    OutRequest(
                        .get, base(port), path: ["records"], api: .fileMaker, operation: "records",
                        authorizer: BearerAuthorizer(token: bearer)),
                ]
                for call in calls {
                    do {
                        _ = try await client.execute(call)
                        Issue.record("\(call.operation) should have failed")
                    } catch let error as OutError {
                        errors.append(error)
                    }
                }
                return errors
            }
        }
        #expect(errors.count == 4)
        #expect(errors[2].vendorMessage?.contains("failed for Password") == true)
        let basic = Data("ana:\(password)".utf8).base64EncodedString()
        let forms = [password, apiKey, bearer, basic, "Pa%20ss%26w%23rd%2B%C3%BC", "Pa ss"]
        let texts = capture.all + errors.map(\.description) + errors.compactMap(\.bodyExcerpt) + errors.compactMap(\.vendorMessage)
        #expect(capture.all.count >= 7)
        for text in texts {
            for secret in forms {
                #expect(!text.contains(secret), "secret leaked: \(text)")
            }
        }
        #expect(capture.all.contains { $0.contains("/people/‹redacted›") })
        #expect(capture.all.contains { $0.contains("password=‹redacted›") })
    }

    @Test func tlsVerificationIsOnAndExtraCAIsTrusted() async throws {
        let pki = try TestPKI()
        let directory = try TemporaryDirectory("http-tls")
        defer { directory.remove() }
        let caFile = directory.path("ca.pem")
        try pki.caPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        let router = Router()
        router.get("productInfo") { _, _ -> Response in .text(.ok, #"{"response":{},"messages":[{"code":"0","message":"OK"}]}"#) }
        try await withServer(router, tls: try pki.serverTLS()) { port in
            let request = OutRequest(.get, base(port, tls: true), path: ["productInfo"], api: .fileMaker, operation: "productInfo")
            try await withClient { client, _ in
                let error = try await #require(throws: OutError.self) { try await client.execute(request) }
                #expect(error.code == .tls)
                #expect(error.attempts == 1)
            }
            try await withClient(extraCAFiles: [caFile]) { client, _ in
                let response = try await client.execute(request)
                #expect(response.status == 200)
            }
        }
        #expect(throws: OutError.self) {
            _ = try SwitchboardHTTPClient(configuration: .init(extraCAFiles: [directory.path("missing.pem")]), logger: Logger(label: "t"))
        }
        let noThreads = #expect(throws: OutError.self) {
            _ = try SwitchboardHTTPClient(configuration: .init(eventLoopThreads: 0), logger: Logger(label: "t"))
        }
        #expect(noThreads?.code == .invalidConfiguration)
        #expect(noThreads?.message.contains("eventLoopThreads") == true)
    }
}
