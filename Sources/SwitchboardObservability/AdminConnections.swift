// What keeps the admin server from starving the program it serves. Every program runs one, and a
// peer that opens connections and never finishes a request would otherwise hold a descriptor
// each for as long as it liked: 1,200 half-sent requests held every descriptor of a broker under
// `ulimit -n 1024` for over a minute, and the broker could neither accept a kiosk nor re-read its
// allow-list. Two bounds stop that here:
//
//  - a header time-out: a connection must deliver a whole request head within it of opening (or
//    of its previous response), else it is closed. Hummingbird's idle time-out (also set) counts
//    from the last HTTP part, so a peer trickling a body keeps it alive; this one does not move.
//  - a connection limit, enforced at once: a connection beyond it is closed as soon as it is
//    accepted, not left in the listen queue. Hummingbird's `MaximumAvailableConnections` stops
//    accepting instead; then a supervisor's liveness probe waits behind the flood in the kernel's
//    queue and the supervisor restarts a healthy program. To keep the probe answering, the
//    connection closed is the one that has waited longest for a request head (a half-sent
//    request or an idle keep-alive); only when every connection is busy answering is the newcomer
//    the one closed.
//
// The table is a value-type state machine (no I/O, driven by the handler below); the handler runs
// on each connection's event loop and shares one table per server, behind a mutex.

import NIOCore
import NIOHTTPTypes
import Synchronization

extension AdminServer {
    /// How much of the process the admin server may take. The defaults suit every program:
    ///
    /// - `headerTimeout`: 5 s. A connection that has not delivered a whole request head within
    ///   this long of opening (or of its previous response) is closed. Prometheus and health
    ///   probes send theirs in one packet, well inside it.
    /// - `idleTimeout`: 30 s. Hummingbird's HTTP/1 idle time-out: a connection on which no part
    ///   of a request arrives for this long while one is being read is closed.
    /// - `maximumConnections`: 32. Connections served at once; see `AdminConnections.swift` for
    ///   which one is closed when another arrives. A Prometheus server or two and a supervisor
    ///   use a handful; 32 descriptors are a small share of any program's limit (which
    ///   `Observability.bootstrap` raises to the hard limit), so the admin server can never take
    ///   the descriptors a broker needs for its sockets, its journal and its allow-list reloads.
    public struct Limits: Sendable, Equatable {
        public var headerTimeout: Duration
        public var idleTimeout: Duration
        public var maximumConnections: Int

        public init(headerTimeout: Duration = .seconds(5), idleTimeout: Duration = .seconds(30), maximumConnections: Int = 32) {
            precondition(maximumConnections > 0, "the admin server needs room for at least one connection")
            self.headerTimeout = headerTimeout
            self.idleTimeout = idleTimeout
            self.maximumConnections = maximumConnections
        }
    }
}

/// The open connections of one server, in the order they began waiting for a request head.
/// Promises, whatever the order of calls: at most `limit` connections are admitted at a time; a
/// connection busy with a request is never chosen to make room; `open` always decides at once.
struct AdminConnectionTable<Connection: Sendable>: Sendable {
    struct Entry: Sendable {
        var id: UInt64
        var connection: Connection
        /// When (in this table's own count of events) it began waiting for a request head; nil
        /// while a request is being answered.
        var waitingSince: UInt64?
    }

    enum Admission: Sendable {
        /// Serve it; close `making room` first if given.
        case admitted(id: UInt64, makingRoom: Connection?)
        /// Every admitted connection is answering a request: close the newcomer.
        case refused
    }

    let limit: Int
    private(set) var entries: [Entry] = []
    private var events: UInt64 = 0

    init(limit: Int) { self.limit = limit }

    mutating func open(_ connection: Connection) -> Admission {
        events += 1
        var evicted: Connection?
        if entries.count >= limit {
            let waiting = entries.indices.filter { entries[$0].waitingSince != nil }
            guard let oldest = waiting.min(by: { entries[$0].waitingSince! < entries[$1].waitingSince! }) else { return .refused }
            evicted = entries.remove(at: oldest).connection
        }
        entries.append(Entry(id: events, connection: connection, waitingSince: events))
        return .admitted(id: events, makingRoom: evicted)
    }

    /// A request head arrived: the connection is busy until `waiting(id)`.
    mutating func busy(_ id: UInt64) {
        events += 1
        if let index = entries.firstIndex(where: { $0.id == id }) { entries[index].waitingSince = nil }
    }

    /// Its last response is written: it waits for the next request head.
    mutating func waiting(_ id: UInt64) {
        events += 1
        if let index = entries.firstIndex(where: { $0.id == id }) { entries[index].waitingSince = events }
    }

    /// Closed (by either side); a no-op for a connection already evicted.
    mutating func closed(_ id: UInt64) {
        entries.removeAll { $0.id == id }
    }
}

/// One server's table, shared by the event loops its connections run on.
final class AdminConnections: Sendable {
    let table: Mutex<AdminConnectionTable<any Channel>>
    let headerTimeout: TimeAmount

    init(limits: AdminServer.Limits) {
        table = Mutex(AdminConnectionTable(limit: limits.maximumConnections))
        headerTimeout = TimeAmount(limits.headerTimeout)
    }

    /// A handler for one new connection's pipeline.
    func handler() -> AdminConnectionHandler { AdminConnectionHandler(connections: self) }
}

/// Admits a connection to the table, closes it when its request head is late, and tells the
/// table when it is busy and when it waits. Must be used on its channel's event loop only, as
/// every channel handler.
final class AdminConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let connections: AdminConnections
    private var id: UInt64?
    private var requestsInProgress = 0
    private var headerDeadline: Scheduled<Void>?

    init(connections: AdminConnections) { self.connections = connections }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        headerDeadline?.cancel()
        headerDeadline = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        headerDeadline?.cancel()
        headerDeadline = nil
        if let id { connections.table.withLock { $0.closed(id) } }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            requestsInProgress += 1
            if requestsInProgress == 1, let id {
                headerDeadline?.cancel()
                headerDeadline = nil
                connections.table.withLock { $0.busy(id) }
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            requestsInProgress -= 1
            if requestsInProgress == 0, let id {
                connections.table.withLock { $0.waiting(id) }
                waitForHead(context)
            }
        }
        context.write(data, promise: promise)
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard id == nil else { return }
        let channel = context.channel
        switch connections.table.withLock({ $0.open(channel) }) {
        case .refused:
            context.close(promise: nil)
        case .admitted(let id, let makingRoom):
            self.id = id
            makingRoom?.close(promise: nil)
            waitForHead(context)
        }
    }

    private func waitForHead(_ context: ChannelHandlerContext) {
        headerDeadline?.cancel()
        // The channel, not the context: the task may run after the handler is gone, and closing
        // a channel twice is harmless.
        let channel = context.channel
        headerDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: connections.headerTimeout) {
            channel.close(promise: nil)
        }
    }
}

@available(*, unavailable)
extension AdminConnectionHandler: Sendable {}
