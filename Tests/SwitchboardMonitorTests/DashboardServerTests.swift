import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import SwitchboardBus
import SwitchboardMonitor
import SwitchboardObservability
import Testing
import ZeroMQ

/// The dashboard's routes on a real server: one token check for the page and the API, the
/// entry that turns the token into a cookie, and the headers on every answer, errors included.
@Suite struct DashboardServerTests {
    static let token = "dashboard-token-0123456789"

    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var text: String
    }

    /// Serves a dashboard (its broker client points nowhere: these routes never call it).
    private func withDashboard(_ body: @Sendable (String) async throws -> Void) async throws {
        let context = try Context()
        let io = try IOThread(context: context)
        let admin = GroupAdminClient(io: io, endpoint: "tcp://127.0.0.1:1", settings: .init(timeout: .milliseconds(100)))
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "dashboard-test")
        logger.logLevel = .critical
        let server = DashboardServer(
            address: AdminAddress(host: "127.0.0.1", port: 0), token: Self.token, state: DashboardState(), admin: admin, logger: logger
        ) { port in continuation.yield(port) }
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            do {
                try await body("http://127.0.0.1:\(port)")
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await io.shutdown()
        await context.terminate()
    }

    /// A GET that does not follow redirects: the entry's own answer is what is tested.
    private func get(_ url: String, headers: [(String, String)] = []) async throws -> Answer {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        do {
            let response = try await client.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 20)
            try await client.shutdown()
            return Answer(status: Int(response.status.code), headers: response.headers, text: String(buffer: body))
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    @Test func everyRouteNeedsTheTokenAndTheAddressOnlyOpensThePage() async throws {
        try await withDashboard { base in
            let page = try await get(base + "/")
            #expect(page.status == 401)
            #expect(page.text.contains("needs its token"))
            #expect(try await get(base + "/?token=wrong-token-0123456789").status == 401)
            let entry = try await get(base + "/?token=\(Self.token)")
            #expect(entry.status == 303)
            #expect(entry.headers["Location"] == ["/"])
            #expect(entry.headers["Set-Cookie"].first?.hasPrefix("switchboard_dashboard=\(Self.token); HttpOnly; SameSite=Strict") == true)
            let cookie = ("Cookie", "switchboard_dashboard=\(Self.token)")
            let opened = try await get(base + "/", headers: [cookie])
            #expect(opened.status == 200)
            #expect(opened.text.contains("<html"))
            let api = try await get(base + "/api/snapshot?token=\(Self.token)")
            #expect(api.status == 401, "the API never reads the query")
            #expect(api.text == "token required\n")
            let snapshot = try await get(base + "/api/snapshot", headers: [("Authorization", "Bearer \(Self.token)")])
            #expect(snapshot.status == 200)
            #expect(snapshot.headers["Content-Type"] == ["application/json"])
            let missing = try await get(base + "/nothing", headers: [cookie])
            #expect(missing.status == 404)
            for answer in [page, entry, opened, api, snapshot, missing] {
                #expect(answer.headers["Referrer-Policy"] == ["no-referrer"])
                #expect(answer.headers["Cache-Control"] == ["no-store"])
                #expect(answer.headers["X-Frame-Options"] == ["DENY"])
            }
        }
    }
}
