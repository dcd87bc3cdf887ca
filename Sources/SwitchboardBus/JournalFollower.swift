public import Foundation
public import SwitchboardProtocol
public import ZeroMQ

/// One thing a follower yields: an event, or a notice about the stream.
public enum FollowerItem: Sendable, Hashable {
    /// A journaled event, in `bus_seq` order, each exactly once.
    case event(FollowedEvent)
    /// Events in `from...to` that match were missed live and fetched from the journal.
    case gapFilled(from: Int64, to: Int64, fetched: Int)
    /// Events in `from...to` are no longer in the journal (retention removed them).
    case pruned(from: Int64, to: Int64)
    /// Connected to a broker; `head` is its journal head.
    case welcome(broker: String, head: Int64)
    /// The broker's journal identity changed (a new journal): sequence numbers start over.
    case newJournal(broker: String)
    /// The replay endpoint did not answer; live events continue and the gap is retried.
    case replayUnavailable(reason: String)
}

/// A journaled event as a follower delivers it.
public struct FollowedEvent: Sendable, Hashable {
    public var busSeq: Int64
    public var header: EventHeader
    public var content: Data
    /// Whether it came from the live fan-out or from the journal.
    public var fromJournal: Bool
}

/// Follows the bus: live events from the fan-out, with every gap filled from the replay
/// endpoint, so the caller sees each matching event exactly once, in `bus_seq` order.
///
/// `covered` is the heart of it: every matching event with `bus_seq <= covered` has been
/// yielded. A live event at `covered + 1` is yielded at once; one further on first triggers a
/// FETCH of the range between; one at or below `covered` is a duplicate and dropped. HEAD
/// messages reveal gaps at the end of the stream (a quiet topic, a lost last message). Starting
/// `from` a sequence number is the same mechanism: `covered = from - 1`, then catch up.
///
/// Use from one task: call `next()` repeatedly.
public final class JournalFollower {
    public struct Endpoints: Sendable {
        public var fanout: String
        public var replay: String
        /// Set on both sockets before they connect: CURVE client keys for a secure broker.
        public var socketOptions: [SocketOption]

        public init(fanout: String, replay: String, socketOptions: [SocketOption] = []) {
            self.fanout = fanout
            self.replay = replay
            self.socketOptions = socketOptions
        }
    }

    private let io: IOThread
    private let endpoints: Endpoints
    private let topics: [String]
    private var subscriber: AsyncSocket?
    private var replay: AsyncSocket?
    /// The replay endpoints (several brokers: one at a time, the next after a FETCH that went
    /// unanswered) and the one `replay` is connected to.
    private let replayBrokers: BrokerRotation
    private var replayEndpoint = ""
    private var covered: Int64?
    private var broker: String?
    private var ready: [FollowerItem] = []
    private var readyIndex = 0
    private let fetchTimeout: Duration

    /// - Parameters:
    ///   - topics: event-type prefixes; empty follows everything.
    ///   - from: the first `bus_seq` wanted; nil starts at the live head.
    public init(io: IOThread, endpoints: Endpoints, topics: [String] = [], from: Int64? = nil, fetchTimeout: Duration = .seconds(5)) {
        self.io = io
        self.endpoints = endpoints
        self.replayBrokers = BrokerRotation(endpoints.replay)
        self.topics = topics
        self.covered = from.map { max(0, $0 - 1) }
        self.fetchTimeout = fetchTimeout
    }

    /// The next event or notice; suspends until there is one.
    public func next() async throws -> FollowerItem {
        while true {
            if readyIndex < ready.count {
                defer {
                    readyIndex += 1
                    if readyIndex == ready.count {
                        ready.removeAll(keepingCapacity: true)
                        readyIndex = 0
                    }
                }
                return ready[readyIndex]
            }
            let subscriber = try await connect()
            let message = try await subscriber.receive()
            try await handle(message)
        }
    }

    public func close() async {
        await subscriber?.close()
        await replay?.close()
        subscriber = nil
        replay = nil
    }

    private func connect() async throws -> AsyncSocket {
        if let subscriber { return subscriber }
        let prefixes = (topics.isEmpty ? [""] : topics + [Topic.systemPrefix])
        // Every broker's fan-out at once: only the active one publishes (a SUB merges them).
        let fanouts = BrokerRotation(endpoints.fanout).endpoints
        let socket = try await io.open(.subscriber, linger: 0, inboxCapacity: 4096) { [endpoints] socket in
            try socket.set([.receiveHighWaterMark(100_000), .reconnectIntervalMax(milliseconds: 2000), .maxMessageSize(1 << 20)])
            for prefix in prefixes { try socket.set(.subscribe(Data(prefix.utf8))) }
            try socket.set(endpoints.socketOptions)
            for fanout in fanouts { try socket.connect(fanout) }
        }
        do {
            replay = try await openReplay()
        } catch {
            // Both or neither: a follower without replay would silently skip every gap.
            await socket.close()
            throw error
        }
        subscriber = socket
        return socket
    }

    private func handle(_ message: Message) async throws {
        guard let topicFrame = message.frames.first else { return }
        if message.frames.count == 1 {
            if let welcome = try? Welcome.parse(topicFrame) { try await welcomed(welcome) }
            return
        }
        guard let envelope = try? Envelope.decode(message.frames.dropFirst()) else { return }
        switch envelope.command {
        case .head:
            guard let head = try? envelope.decodeHeader(HeadHeader.self) else { return }
            if let broker, broker != head.broker {
                // A different journal behind the same endpoint: its numbers mean something else.
                self.broker = head.broker
                covered = 0
                ready.append(.newJournal(broker: head.broker))
            }
            if let covered, head.head < covered {
                // The same journal id with a lower head cannot happen unless the journal was
                // rebuilt: treat it as new rather than drop everything up to the old numbers.
                self.covered = 0
                ready.append(.newJournal(broker: head.broker))
            }
            if let covered, head.head > covered {
                try await fill(from: covered + 1, to: head.head)
            }
        case .event:
            guard let header = try? envelope.decodeHeader(EventHeader.self), let seq = header.busSeq else { return }
            guard Topic.matches(header.type, prefixes: topics) else { return }
            guard let current = covered else {
                // No welcome yet (it can be overtaken only if we subscribed late): start here.
                covered = seq
                ready.append(.event(FollowedEvent(busSeq: seq, header: header, content: envelope.content, fromJournal: false)))
                return
            }
            if seq <= current { return }
            if seq > current + 1 {
                try await fill(from: current + 1, to: seq - 1)
                guard let after = covered, seq > after else { return }
                if after < seq - 1 { return }  // replay failed; the gap is retried on the next HEAD
            }
            covered = seq
            ready.append(.event(FollowedEvent(busSeq: seq, header: header, content: envelope.content, fromJournal: false)))
        default:
            return
        }
    }

    private func welcomed(_ welcome: Welcome) async throws {
        if let broker, broker != welcome.broker {
            covered = 0
            ready.append(.newJournal(broker: welcome.broker))
        }
        broker = welcome.broker
        ready.append(.welcome(broker: welcome.broker, head: welcome.head))
        if covered == nil {
            covered = welcome.head
        } else if let covered, welcome.head > covered {
            try await fill(from: covered + 1, to: welcome.head)
        }
    }

    /// A replay socket to the current broker. A FETCH that no connection takes fails instead of
    /// waiting forever (a refused key).
    private func openReplay() async throws -> AsyncSocket {
        let endpoint = replayBrokers.current
        replayEndpoint = endpoint
        return try await io.open(.dealer, linger: 0, inboxCapacity: 2048, sendTimeout: fetchTimeout) { [endpoints] socket in
            try socket.set([.receiveHighWaterMark(10_000), .reconnectIntervalMax(milliseconds: 2000), .maxMessageSize(1 << 20)])
            try socket.set(endpoints.socketOptions)
            try socket.connect(endpoint)
        }
    }

    /// After a FETCH went unanswered: the next one asks on a fresh socket (a late answer cannot
    /// be taken for the next one's), of the next broker when there are several.
    private func replaceReplay() async {
        await replay?.close()
        replayBrokers.failed(replayEndpoint)
        replay = try? await openReplay()
    }

    /// Fetches `from...to` from the journal, batch by batch, appending to `ready` and moving
    /// `covered` forward as far as the journal answered.
    private func fill(from: Int64, to: Int64) async throws {
        guard let replay else {
            // The last replacement failed to open: try again for this gap.
            self.replay = try? await openReplay()
            if self.replay != nil { try await fill(from: from, to: to) }
            return
        }
        var next = from
        var fetched = 0
        while next <= to {
            let fetch = FetchHeader(from: next, to: to, topics: topics, limit: 500)
            let sent: Bool
            do {
                try await replay.send(try Envelope(command: .fetch, header: fetch).frames())
                sent = true
            } catch let error as ZMQError where error.isWouldBlock {
                sent = false
            }
            var end: EndHeader?
            while end == nil {
                guard sent, let answer = try await replay.receive(timeout: fetchTimeout) else {
                    ready.append(.replayUnavailable(reason: "no answer from \(replayEndpoint) within \(fetchTimeout)"))
                    if fetched > 0 { ready.append(.gapFilled(from: from, to: covered ?? from, fetched: fetched)) }
                    await replaceReplay()
                    return
                }
                guard let envelope = try? Envelope.decode(answer.frames) else { continue }
                switch envelope.command {
                case .event:
                    guard let header = try? envelope.decodeHeader(EventHeader.self), let seq = header.busSeq,
                        seq >= next, seq <= to
                    else { continue }
                    if let covered, seq <= covered { continue }
                    covered = seq
                    fetched += 1
                    ready.append(.event(FollowedEvent(busSeq: seq, header: header, content: envelope.content, fromJournal: true)))
                case .end:
                    guard let header = try? envelope.decodeHeader(EndHeader.self), header.requestID == fetch.requestID else { continue }
                    end = header
                case .error:
                    let error = try? envelope.decodeHeader(ErrorHeader.self)
                    ready.append(
                        .replayUnavailable(reason: error.map { "\($0.code.rawValue): \($0.message)" } ?? "replay refused the FETCH"))
                    return
                default:
                    continue
                }
            }
            guard let end else { return }
            if end.first > next {
                let gone = min(end.first - 1, to)
                ready.append(.pruned(from: next, to: gone))
            }
            covered = max(covered ?? 0, end.through)
            if !end.more || end.through >= to { break }
            next = end.through + 1
        }
        // Quiet fills (a filtered follower skipping other topics) are not news.
        if fetched > 0 { ready.append(.gapFilled(from: from, to: to, fetched: fetched)) }
    }
}
