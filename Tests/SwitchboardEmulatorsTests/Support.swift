import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import SwitchboardTesting
import Testing

/// A plain HTTP client for the contract tests: what a request sent and what came back, with no
/// interpretation, so the tests check the wire itself.
struct Wire {
    let base: String
    var client: HTTPClient = .shared

    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        /// The body as JSON (objects as dictionaries); fails the test when it is not JSON.
        var json: Any {
            get throws { try JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) }
        }
        var object: [String: Any] {
            get throws {
                guard let object = try json as? [String: Any] else { throw Mismatch("body is not a JSON object: \(text)") }
                return object
            }
        }
        /// FileMaker's `messages[0].code`.
        var code: String? {
            ((try? object)?["messages"] as? [[String: Any]])?.first?["code"] as? String
        }
        var response: [String: Any] { ((try? object)?["response"] as? [String: Any]) ?? [:] }
        func header(_ name: String) -> String? { headers.first(name: name) }
    }

    struct Mismatch: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    init(_ emulator: RunningEmulator) { base = emulator.baseURL }
    init(base: String, client: HTTPClient) {
        self.base = base
        self.client = client
    }

    @discardableResult
    func call(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], json: Any? = nil, body: Data? = nil,
        contentType: String? = nil
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.body = .bytes(ByteBuffer(data: try JSONSerialization.data(withJSONObject: json, options: [.fragmentsAllowed])))
            request.headers.replaceOrAdd(name: "Content-Type", value: contentType ?? "application/json")
        } else if let body {
            request.body = .bytes(ByteBuffer(data: body))
            if let contentType { request.headers.replaceOrAdd(name: "Content-Type", value: contentType) }
        } else if let contentType {
            request.headers.replaceOrAdd(name: "Content-Type", value: contentType)
        }
        let response = try await client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 32 << 20)
        return Answer(status: Int(response.status.code), headers: response.headers, body: Data(buffer: bytes))
    }

    /// A GET of an absolute URL an answer gave (a container's streaming URL), exactly as given.
    func fetch(_ url: String, headers: [(String, String)] = []) async throws -> Answer {
        try await Wire(base: "", client: client).call(.GET, url, headers: headers)
    }

    static func basic(_ user: String, _ password: String) -> (String, String) {
        ("Authorization", "Basic " + Data("\(user):\(password)".utf8).base64EncodedString())
    }

    static func bearer(_ token: String) -> (String, String) { ("Authorization", "Bearer \(token)") }

    /// Adds a fault through the control API.
    func fault(_ rule: [String: Any]) async throws {
        let answer = try await call(.POST, "/_emulator/faults", json: rule)
        #expect(answer.status == 201, "fault not accepted: \(answer.text)")
    }

    /// The request log entries (after sequence `after`).
    func requests(api: String? = nil, after: Int = 0) async throws -> [[String: Any]] {
        let query = api.map { "?api=\($0)&after=\(after)" } ?? "?after=\(after)"
        return try await call(.GET, "/_emulator/requests" + query).json as? [[String: Any]] ?? []
    }

    func advanceClock(seconds: Double) async throws {
        let answer = try await call(.POST, "/_emulator/clock", json: ["advance_seconds": seconds])
        #expect(answer.status == 200)
    }
}

/// FileMaker helpers shared by several suites.
extension Wire {
    static let fm = "/fmi/data/vLatest/databases/Shelter"

    func fileMakerLogIn(user: String = "switchboard", password: String = "fm-demo-Passw0rd!") async throws -> String {
        let answer = try await call(.POST, Self.fm + "/sessions", headers: [Self.basic(user, password)], json: [String: Any]())
        guard answer.status == 200, let token = answer.response["token"] as? String else {
            throw Mismatch("FileMaker log-in failed: \(answer.status) \(answer.text)")
        }
        return token
    }
}
