// The `eto` service from a caller's side (protocol/README.md section 16.2): typed calls over a
// `ServiceClient`, for kiosks that look a person up before they record a check-in. Every call
// only reads, so each may be retried on a fresh socket (Lazy Pirate).

import Foundation
public import SwitchboardBus
public import SwitchboardProtocol

public struct ETOLookup: Sendable {
    /// A call that did not give an answer: the service refused it, failed, or did not answer in
    /// time. The message names the operation and the reason.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var status: Int?
        public var description: String
    }

    public let client: ServiceClient

    public init(client: ServiceClient) { self.client = client }

    public func sites(timeout: Duration) async throws(Failure) -> [ETOServiceContent.Site] {
        try await call("sites.list", Data("{}".utf8), timeout: timeout, as: ETOServiceContent.Sites.self).sites
    }

    public func programs(site: Int, timeout: Duration) async throws(Failure) -> [ETOServiceContent.Program] {
        try await call(
            "programs.list", encode(ETOServiceContent.SiteQuery(siteID: site)), timeout: timeout, as: ETOServiceContent.Programs.self
        )
        .programs
    }

    /// The participants of the program at the site with exactly these names (and this date of
    /// birth, when given).
    public func search(_ query: ETOServiceContent.SearchQuery, timeout: Duration) async throws(Failure) -> [ETOServiceContent.Participant] {
        try await call("participants.search", encode(query), timeout: timeout, as: ETOServiceContent.Participants.self).participants
    }

    func encode(_ value: some Encodable) throws(Failure) -> Data {
        do { return try WireJSON.encode(value) } catch { throw Failure(status: nil, description: "cannot encode the request: \(error)") }
    }

    func call<T: Decodable>(_ operation: String, _ content: Data, timeout: Duration, as type: T.Type) async throws(Failure) -> T {
        let reply: ServiceReply
        do {
            reply = try await client.request(
                service: ETOServiceContent.service, operation: operation, content: content, timeout: timeout, idempotent: true)
        } catch {
            throw Failure(status: nil, description: "eto \(operation): no answer (\(error))")
        }
        guard reply.status == ServiceStatus.ok else {
            throw Failure(
                status: reply.status, description: "eto \(operation): \(reply.status) \(reply.header.error?.message ?? "refused")")
        }
        do {
            return try JSONDecoder().decode(T.self, from: reply.content)
        } catch {
            throw Failure(status: reply.status, description: "eto \(operation): the answer cannot be read")
        }
    }
}
