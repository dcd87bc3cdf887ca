// Operators' requests on the broker's groups endpoint (protocol/README.md, 12.3 and 15.6): one
// REQUEST envelope sent as it is on a DEALER (no Majordomo framing, no empty delimiter: the
// groups endpoint is the broker's own ROUTER, not the service plane), answered by one REPLY
// with the same `request_id`.
//
// Each request gets a socket of its own, closed when it ends. Operators ask rarely, and a fresh
// socket means a REPLY that comes after its request timed out can never be taken for the answer
// to the next one. Members speak on the same endpoint, so anything that is not our REPLY (HEAD,
// a stray message) is skipped rather than treated as an answer.

public import Foundation
public import SwitchboardProtocol
import SwitchboardRuntime
public import ZeroMQ

/// Why a request on the groups endpoint did not succeed.
public struct GroupAdminError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure; more may be added.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case refused, timeout, protocolViolation = "protocol-violation", connection
        }

        private let base: Base

        /// The broker answered with an error status; `status`, `code` and `message` say which.
        public static let refused = Kind(base: .refused)
        /// No answer in time: no broker at the endpoint, or it refused the CURVE handshake
        /// (wrong keys, a principal not on its allow-list).
        public static let timeout = Kind(base: .timeout)
        /// The answer breaks the protocol, or the broker could not read the request (an ERROR).
        public static let protocolViolation = Kind(base: .protocolViolation)
        /// No socket: the endpoint is not a valid address, or the I/O thread has stopped.
        public static let connection = Kind(base: .connection)

        public var description: String { base.rawValue }
    }

    public var kind: Kind
    /// The operation asked for (`groups.create`).
    public var operation: String
    /// The REPLY's status, when the broker answered (403, 404, …).
    public var status: Int?
    /// The REPLY's error code, when the broker answered (`not-found`, `forbidden`, …).
    public var code: String?
    /// For people: what went wrong, as the broker said it or as this client saw it.
    public var message: String

    public init(_ kind: Kind, operation: String, status: Int? = nil, code: String? = nil, message: String) {
        self.kind = kind
        self.operation = operation
        self.status = status
        self.code = code
        self.message = message
    }

    /// `group 'x' not found (404 not-found)`.
    public var description: String {
        guard let status else { return message }
        return "\(message) (\(status)\(code.map { " \($0)" } ?? ""))"
    }
}

/// Sends operators' requests to the broker's consumer-group endpoint: groups to list, create,
/// reset and delete, dead letters to list, show, replay and drop.
///
/// Safe to use from any task; requests may run concurrently (each has its own socket).
public final class GroupAdminClient: Sendable {
    public struct Settings: Sendable {
        /// How long a request waits for its REPLY, unless the call gives its own time.
        public var timeout: Duration = .seconds(5)
        /// Set on every socket before it connects: CURVE client keys for a secure broker.
        public var socketOptions: [SocketOption] = []

        public init(timeout: Duration = .seconds(5), socketOptions: [SocketOption] = []) {
            self.timeout = timeout
            self.socketOptions = socketOptions
        }
    }

    public let endpoint: String
    private let io: IOThread
    private let settings: Settings

    public init(io: IOThread, endpoint: String, settings: Settings = Settings()) {
        self.io = io
        self.endpoint = endpoint
        self.settings = settings
    }

    // MARK: Any operation

    /// Sends `operation` with `content` and returns the REPLY's content (raw JSON) when its
    /// status is 2xx.
    /// - Throws: `GroupAdminError`: `.refused` with the status, code and message of any other
    ///   REPLY; `.timeout` if no REPLY with this request's `request_id` comes within `timeout`.
    public func request(
        _ operation: String, _ content: JSONValue = .object([:]), timeout: Duration? = nil
    )
        async throws(GroupAdminError) -> Data
    {
        let wait = timeout ?? settings.timeout
        let header = RequestHeader(operation: operation, timeoutMilliseconds: min(max(1, wait.wholeMilliseconds), 3_600_000))
        do {
            try header.validate()
        } catch {
            throw GroupAdminError(.protocolViolation, operation: operation, message: "the request is not valid: \(error.message)")
        }
        let frames: [Data]
        do {
            frames = Envelope(command: .request, header: try WireJSON.encode(header), content: content.compactData).frames()
        } catch {
            throw GroupAdminError(.protocolViolation, operation: operation, message: "the request could not be encoded: \(error)")
        }
        // One broker at a time, each with its share of the time: a request goes to the next only
        // when this one took it not at all or answered nothing in its share. Of a broker pair
        // only the active one listens, so an operation that changes something runs at most once.
        let deadline = ContinuousClock.now + wait
        let brokers = BrokerRotation(endpoint).endpoints
        for (index, broker) in brokers.enumerated() {
            let socket: AsyncSocket
            do {
                socket = try await io.open(.dealer, linger: 0, inboxCapacity: 64) { [options = settings.socketOptions] in
                    try $0.set([.maxMessageSize(1 << 20)] + options)
                    try $0.connect(broker)
                }
            } catch {
                throw GroupAdminError(
                    .connection, operation: operation, message: "cannot connect to the groups endpoint '\(broker)': \(error)")
            }
            let share = ContinuousClock.now.duration(to: deadline) / (brokers.count - index)
            let taken: Bool
            do {
                taken = try await socket.send(frames, timeout: share)
            } catch {
                await socket.close()
                throw GroupAdminError(.connection, operation: operation, message: "the request could not be sent to '\(broker)': \(error)")
            }
            guard taken else {
                await socket.close()
                continue
            }
            let last = index == brokers.count - 1
            let result = await exchange(
                on: socket, header: header, deadline: last ? deadline : ContinuousClock.now + share, wait: wait)
            await socket.close()
            if case .failure(let error) = result, error.kind == .timeout, !last { continue }
            return try result.get()
        }
        throw GroupAdminError(
            .timeout, operation: operation,
            message: "no answer to '\(operation)' from the broker's groups endpoint \(endpoint) within \(DurationText.format(wait))")
    }

    /// Waits for the REPLY to the request already sent on `socket`.
    private func exchange(
        on socket: AsyncSocket, header: RequestHeader, deadline: ContinuousClock.Instant, wait: Duration
    )
        async -> Result<Data, GroupAdminError>
    {
        let operation = header.operation
        func failure(_ kind: GroupAdminError.Kind, _ message: String) -> Result<Data, GroupAdminError> {
            .failure(GroupAdminError(kind, operation: operation, message: message))
        }
        do {
            while true {
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard remaining > .zero, let message = try await socket.receive(timeout: remaining) else {
                    return failure(
                        .timeout,
                        "no answer to '\(operation)' from the broker's groups endpoint \(endpoint) within \(DurationText.format(wait))")
                }
                guard let envelope = try? Envelope.decode(message.frames, limits: .groups) else { continue }
                switch envelope.command {
                case .reply:
                    guard let reply = try? envelope.decodeHeader(ReplyHeader.self) else { continue }
                    // No request_id: the broker could not read our header; ours is the only request on this socket.
                    guard reply.requestID == nil || reply.requestID == header.requestID else { continue }
                    do {
                        try reply.validate()
                    } catch {
                        return failure(.protocolViolation, "the REPLY to '\(operation)' is not valid: \(error.message)")
                    }
                    if (200...299).contains(reply.status) { return .success(envelope.content) }
                    let error = reply.error ?? ServiceFailure(code: "unknown", message: "status \(reply.status)")
                    return .failure(
                        GroupAdminError(.refused, operation: operation, status: reply.status, code: error.code, message: error.message))
                case .error:
                    guard let error = try? envelope.decodeHeader(ErrorHeader.self) else { continue }
                    guard error.ref == nil || error.ref == header.requestID else { continue }
                    return failure(
                        .protocolViolation, "the broker refused the request '\(operation)': \(error.code.rawValue): \(error.message)")
                default:
                    continue  // HEAD, or a member's traffic that is not ours to read
                }
            }
        } catch {
            return failure(.connection, "the socket to \(endpoint) failed: \(error)")
        }
    }

    /// Sends `request` and decodes the REPLY's content as `T`.
    private func send<T: Decodable>(_ request: GroupAdminRequest, as type: T.Type) async throws(GroupAdminError) -> T {
        let operation = request.operation.rawValue
        let data = try await self.request(operation, request.content)
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw GroupAdminError(
                .protocolViolation, operation: operation, message: "the answer to '\(operation)' does not decode: \(error)")
        }
    }

    // MARK: Groups

    /// `groups.list`: every group, by name.
    public func groups() async throws(GroupAdminError) -> [GroupInfo] {
        try await send(.listGroups, as: GroupList.self).groups
    }

    /// `groups.create`: makes `name` reading `topics` from `start` (the broker's default:
    /// earliest). Creating a group that exists with the same topics returns it unchanged; with
    /// other topics it is refused (409 `conflict`).
    public func createGroup(_ name: String, topics: [String], start: GroupStart? = nil) async throws(GroupAdminError) -> GroupInfo {
        try await send(.createGroup(group: name, topics: topics, start: start), as: GroupInfo.self)
    }

    /// `groups.reset`: starts the group again at `start` (the broker's default: earliest),
    /// forgetting what it settled and holds; its members stay.
    public func resetGroup(_ name: String, start: GroupStart? = nil) async throws(GroupAdminError) -> GroupInfo {
        try await send(.resetGroup(group: name, start: start), as: GroupInfo.self)
    }

    /// `groups.delete`: removes the group with its cursor and its dead letters' records (the
    /// `dlq.<group>` events stay journaled).
    public func deleteGroup(_ name: String) async throws(GroupAdminError) {
        _ = try await send(.deleteGroup(group: name), as: GroupDeleted.self)
    }

    // MARK: Producers

    /// `producers.list`: what the broker knows of each producer (kiosks, workers' outboxes):
    /// when it was last heard, its last event, and the outbox depth and last ACK it reported.
    public func producers() async throws(GroupAdminError) -> [ProducerInfo] {
        try await send(.listProducers, as: ProducerList.self).producers
    }

    // MARK: Dead letters

    /// `dlq.list`, one page: at most `limit` dead letters of `group` (every group when nil) in
    /// `state` (every state when nil), oldest first or newest first, after `after` (a page's
    /// `next`), with the counts of every page. No payloads: `deadLetter(group:busSeq:)` has the
    /// event.
    public func deadLetterPage(
        group: String? = nil, state: DeadLetterInfo.State? = .dead, newest: Bool = false, limit: Int = 100, after: String? = nil
    ) async throws(GroupAdminError) -> DeadLetterPage {
        let query = DeadLetterQuery(group: group, state: state, limit: limit, newest: newest, after: after)
        return try await send(.listDeadLetters(query), as: DeadLetterPage.self)
    }

    /// Every dead letter `deadLetterPage` selects, page by page (`onPage` hears of each), oldest
    /// first.
    public func deadLetters(
        group: String? = nil, state: DeadLetterInfo.State? = .dead, pageSize: Int = 500,
        onPage: (_ page: DeadLetterPage) -> Void = { _ in }
    ) async throws(GroupAdminError) -> [DeadLetterInfo] {
        var letters: [DeadLetterInfo] = []
        var after: String?
        repeat {
            let page = try await deadLetterPage(group: group, state: state, limit: pageSize, after: after)
            onPage(page)
            letters += page.deadLetters
            after = page.next
        } while after != nil
        return letters
    }

    /// `dlq.show`: one dead letter with the event it names (admin only: the event holds personal data).
    public func deadLetter(group: String, busSeq: Int64) async throws(GroupAdminError) -> DeadLetterDetail {
        try await send(.showDeadLetter(group: group, busSeq: busSeq), as: DeadLetterDetail.self)
    }

    /// `dlq.replay`: delivers dead letters to their group again, from attempt 1.
    /// - Returns: the `bus_seq`s replayed.
    public func replay(group: String, _ selection: DeadLetterSelection) async throws(GroupAdminError) -> [Int64] {
        try await send(.replayDeadLetters(group: group, selection), as: DeadLetterSettled.self).replayed ?? []
    }

    /// `dlq.drop`: the group will not see these dead letters again.
    /// - Returns: the `bus_seq`s dropped.
    public func drop(group: String, _ selection: DeadLetterSelection) async throws(GroupAdminError) -> [Int64] {
        try await send(.dropDeadLetters(group: group, selection), as: DeadLetterSettled.self).dropped ?? []
    }

    /// `dlq.replay` (`replay` true) or `dlq.drop` of every waiting dead letter of `group` that
    /// `code` and `before` select (nil: any), `step` at a time, calling `progress` with how many
    /// are done and how many remain after each step. Dead letters that become dead again while
    /// this runs are left for the next run: without `before`, the moment it started is used.
    /// - Returns: the `bus_seq`s acted on, each once.
    public func settleAll(
        replay: Bool, group: String, code: String? = nil, before: Date? = nil, step: Int = 500,
        progress: (_ done: Int, _ remaining: Int) -> Void = { _, _ in }
    ) async throws(GroupAdminError) -> [Int64] {
        let selection = DeadLetterSelection.matching(code: code, before: Timestamp.format(before ?? Date()), limit: step)
        let request: GroupAdminRequest = replay ? .replayDeadLetters(group: group, selection) : .dropDeadLetters(group: group, selection)
        var done: [Int64] = []
        while true {
            let answer: DeadLetterSettled
            do {
                answer = try await send(request, as: DeadLetterSettled.self)
            } catch let error where error.status == 404 && !done.isEmpty {
                break  // the last step took the last ones
            }
            done += answer.replayed ?? answer.dropped ?? []
            progress(done.count, answer.remaining ?? 0)
            if (answer.remaining ?? 0) == 0 { break }
        }
        return done
    }
}
