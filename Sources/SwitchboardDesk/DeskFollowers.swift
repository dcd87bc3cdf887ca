// The desk's two loops against the broker, each a Service of the desk's group:
//
// DeskJourney reads what became of this kiosk's events. A kiosk may not read the fan-out (every
// check-in passes there); it may FETCH from the replay endpoint, which gives it only the events of
// the families dlq., filemaker.record. and eto.response. whose content's bus_seq names an event it
// published (protocol 13.3). So the journey polls: FETCH from the last bus_seq it has covered,
// apply what came, remember END's `through` on disk, wait a second, again. A restart continues
// from the remembered number; a broker that does not answer makes the desk say "offline".
//
// DeskRoster keeps the site's participants: `participants.list` of the `eto` service, page by
// page, then with the last `mark` as `since`. While the operation is missing or ETO is down the
// refresh fails softly: logged once per run of failures (never a name), shown on the page.

public import Foundation
public import Logging
public import ServiceLifecycle
public import SwitchboardBus
import SwitchboardProtocol
import Synchronization
public import ZeroMQ

/// What the page shows about the desk's links, read by the server.
public final class DeskStatus: Sendable {
    struct State {
        var journeyReachable: Bool?
        var rosterProblem: String?
        var rosterUpdated: Date?
        var changes = 0
        /// Page streams waiting for the next change, by a number of their own.
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Whether the replay endpoint answered the last FETCH (nil: not asked yet).
    public var journeyReachable: Bool? { state.withLock { $0.journeyReachable } }
    /// Why the last roster refresh failed, if it did.
    public var rosterProblem: String? { state.withLock { $0.rosterProblem } }
    /// Bumped whenever something the page shows may have changed.
    public var changes: Int { state.withLock { $0.changes } }

    func journey(reachable: Bool) { state.withLock { $0.journeyReachable = reachable } }
    func roster(problem: String?) { state.withLock { $0.rosterProblem = problem } }
    public func changed() {
        let waiting = state.withLock { state in
            state.changes += 1
            defer { state.waiters = [:] }
            return state.waiters
        }
        for waiter in waiting.values { waiter.resume() }
    }

    /// Returns when `changes` passes `seen`, or after `limit`, whichever is first (a page
    /// stream shows a new outcome at once rather than at its next tick).
    public func change(after seen: Int, within limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: limit) }
            group.addTask { await self.change(after: seen) }
            await group.next()
            group.cancelAll()
        }
    }

    private func change(after seen: Int) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.changes != seen || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}

/// Polls the replay endpoint for the outcomes of this kiosk's events.
public struct DeskJourney: Service {
    public static let topics = ["dlq.", "filemaker.record.", "eto.response."]
    static let cursorSetting = "journey_through"

    let io: IOThread
    let endpoint: String
    let socketOptions: [SocketOption]
    let store: DeskStore
    let status: DeskStatus
    let interval: Duration
    let logger: Logger

    public init(
        io: IOThread, replay endpoint: String, socketOptions: [SocketOption], store: DeskStore, status: DeskStatus,
        interval: Duration = .milliseconds(250), logger: Logger
    ) {
        self.io = io
        self.endpoint = endpoint
        self.socketOptions = socketOptions
        self.store = store
        self.status = status
        self.interval = interval
        self.logger = logger
    }

    /// What an outcome event says, by its type and content; nil for anything else.
    public static func outcome(type: String, content: Data) -> DeskStore.Outcome? {
        guard let object = try? JSONSerialization.jsonObject(with: content) as? [String: Any] else { return nil }
        let eventID = object["event_id"] as? String
        let checkIn = object["checkin_event_id"] as? String
        switch type {
        case "filemaker.record.written": return eventID.map { .inFileMaker(checkIn: $0) }
        case "eto.response.recorded": return eventID.map { .inETO(checkIn: $0) }
        case "filemaker.record.voided": return checkIn.map { .voidedInFileMaker(checkIn: $0) }
        case "eto.response.voided": return checkIn.map { .voidedInETO(checkIn: $0) }
        default:
            guard type.hasPrefix("dlq."), let eventID, let code = object["code"] as? String else { return nil }
            return .problem(eventID: eventID, code: code)
        }
    }

    public func run() async throws {
        var through = Int64(try await store.setting(Self.cursorSetting) ?? "0") ?? 0
        var socket: AsyncSocket?
        var failing = false
        // Several brokers: one at a time, the next after a FETCH that went unanswered.
        let brokers = BrokerRotation(endpoint)
        var connected = brokers.current
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            if socket == nil {
                connected = brokers.current
                socket = try? await io.open(.dealer, linger: 0, inboxCapacity: 2048, sendTimeout: .seconds(3)) {
                    [endpoint = connected, socketOptions] socket in
                    try socket.set([.receiveHighWaterMark(10_000), .reconnectIntervalMax(milliseconds: 2000), .maxMessageSize(1 << 20)])
                    try socket.set(socketOptions)
                    try socket.connect(endpoint)
                }
            }
            var more = false
            if let open = socket {
                let from = through + 1
                let fetched =
                    (try? await cancelWhenGracefulShutdown { () async throws -> Fetched in await fetch(open, from: from) })
                    ?? .failed("stopping")
                if Task.isShuttingDownGracefully || Task.isCancelled { break }
                switch fetched {
                case .answered(let end, let outcomes):
                    var changed = false
                    for outcome in outcomes where (try? await store.apply(outcome)) == true { changed = true }
                    if end.head < through {
                        // A new journal behind the endpoint: its numbers start over.
                        through = 0
                    } else {
                        through = max(through, end.through)
                    }
                    try? await store.set(Self.cursorSetting, String(through))
                    if failing || status.journeyReachable != true { changed = true }
                    if failing { logger.info("journey: the broker's replay answers again") }
                    failing = false
                    status.journey(reachable: true)
                    if changed { status.changed() }
                    more = end.more
                case .failed(let reason):
                    if !failing { logger.warning("journey: the broker's replay does not answer", metadata: ["reason": "\(reason)"]) }
                    failing = true
                    // The next round asks on a fresh socket: a late answer to this FETCH cannot be
                    // taken for the next one's, and a connection the broker refused (libzmq never
                    // reconnects it) is left behind.
                    await open.close()
                    socket = nil
                    brokers.failed(connected)
                    if status.journeyReachable != false { status.changed() }
                    status.journey(reachable: false)
                }
            }
            if !more {
                try? await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
            }
        }
        await socket?.close()
    }

    enum Fetched {
        case answered(EndHeader, [DeskStore.Outcome])
        case failed(String)
    }

    func fetch(_ socket: AsyncSocket, from: Int64) async -> Fetched {
        let fetch = FetchHeader(from: max(1, from), topics: Self.topics, limit: 500)
        do {
            try await socket.send(try Envelope(command: .fetch, header: fetch).frames())
            var outcomes: [DeskStore.Outcome] = []
            while true {
                guard let answer = try await socket.receive(timeout: .seconds(3)) else { return .failed("no answer within 3 s") }
                guard let envelope = try? Envelope.decode(answer.frames) else { continue }
                switch envelope.command {
                case .event:
                    guard let header = try? envelope.decodeHeader(EventHeader.self) else { continue }
                    if let outcome = Self.outcome(type: header.type, content: envelope.content) { outcomes.append(outcome) }
                case .end:
                    guard let end = try? envelope.decodeHeader(EndHeader.self), end.requestID == fetch.requestID else { continue }
                    return .answered(end, outcomes)
                case .error:
                    let error = try? envelope.decodeHeader(ErrorHeader.self)
                    return .failed(error.map { "\($0.code.rawValue)" } ?? "refused")
                default:
                    continue
                }
            }
        } catch {
            return .failed("\(error)")
        }
    }
}

/// Keeps the roster: `participants.list` of the `eto` service every `interval`.
public struct DeskRoster: Service {
    static let markSetting = "roster_mark"
    static let updatedSetting = "roster_updated"

    let client: ServiceClient
    let store: DeskStore
    let status: DeskStatus
    let siteID: Int64
    let programID: Int64
    let interval: Duration
    let logger: Logger

    public init(
        client: ServiceClient, store: DeskStore, status: DeskStatus, siteID: Int64, programID: Int64, interval: Duration, logger: Logger
    ) {
        self.client = client
        self.store = store
        self.status = status
        self.siteID = siteID
        self.programID = programID
        self.interval = interval
        self.logger = logger
    }

    struct ListRequest: Encodable {
        var siteID: Int64
        var programID: Int64?
        var since: String?
        var after: String?
        var limit: Int
        enum CodingKeys: String, CodingKey {
            case siteID = "site_id", programID = "program_id", since, after, limit
        }
    }

    /// A mark or page cursor: the contract leaves its form to the service (a string or a number).
    struct Token: Decodable {
        var text: String
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                self.text = text
            } else {
                self.text = String(try container.decode(Int64.self))
            }
        }
    }

    /// One refresh: every page since the last mark. Returns how many people came.
    public func refresh(timeout: Duration = .seconds(10)) async throws -> Int {
        let since = try await store.setting(Self.markSetting)
        var after: String?
        var count = 0
        var mark: String?
        repeat {
            let request = ListRequest(siteID: siteID, programID: programID, since: since, after: after, limit: 500)
            let reply = try await client.request(
                service: ETOServiceContent.service, operation: "participants.list", content: try WireJSON.encode(request), timeout: timeout,
                idempotent: true)
            guard reply.status == ServiceStatus.ok else {
                throw RosterFailure(description: "eto participants.list: \(reply.status) \(reply.header.error?.code ?? "refused")")
            }
            let page: Page
            do {
                page = try JSONDecoder().decode(Page.self, from: reply.content)
            } catch {
                throw RosterFailure(description: "eto participants.list: the answer cannot be read")
            }
            try await store.upsert(page.participants)
            count += page.participants.count
            after = page.next?.text
            if let next = page.mark?.text { mark = next }
        } while after != nil && !Task.isCancelled
        if let mark { try await store.set(Self.markSetting, mark) }
        try await store.set(Self.updatedSetting, String(Date().timeIntervalSince1970))
        return count
    }

    struct Page: Decodable {
        var participants: [RosterPerson]
        var next: Token?
        var mark: Token?
    }

    struct RosterFailure: Error, CustomStringConvertible {
        var description: String
    }

    public func run() async throws {
        var failing = false
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                // A refresh waits for the eto service up to its time-out; shutdown need not.
                let count = try await cancelWhenGracefulShutdown { try await refresh() }
                if failing { logger.info("roster: refreshed again", metadata: ["people": "\(count)"]) }
                failing = false
                status.roster(problem: nil)
                status.changed()
            } catch {
                let reason = (error as? RosterFailure)?.description ?? "the eto service did not answer"
                if !failing { logger.warning("roster: refresh failed; searching the kept roster", metadata: ["reason": "\(reason)"]) }
                failing = true
                status.roster(problem: reason)
                status.changed()
            }
            try? await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
        }
    }
}
