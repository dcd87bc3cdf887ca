import Foundation
import Testing
import ZeroMQ

@Suite("Sockets")
struct SocketTests {
    @Test("DEALER to ROUTER over TCP carries multipart messages both ways")
    func dealerRouterMultipart() throws {
        let context = try Context()
        let router = try context.socket(.router, linger: 0)
        try router.set([.routerMandatory(true), .receiveTimeout(milliseconds: 5000)])
        try router.bind("tcp://127.0.0.1:*")
        let endpoint = try router.lastEndpoint()
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))

        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.set([.routingID(Data(frame: "kiosk-1")), .receiveTimeout(milliseconds: 5000)])
        try dealer.connect(endpoint)
        try dealer.send([Data(frame: "hello"), Data(), Data([0, 1, 2, 255])])

        let received = try #require(try router.receive())
        #expect(received.frames == [Data(frame: "kiosk-1"), Data(frame: "hello"), Data(), Data([0, 1, 2, 255])])
        #expect(received.userID == nil)

        try router.send([Data(frame: "kiosk-1"), Data(frame: "reply")])
        let reply = try #require(try dealer.receive())
        #expect(reply.frames == [Data(frame: "reply")])
        dealer.close()
        router.close()
    }

    @Test("ROUTER_MANDATORY turns an unroutable send into EHOSTUNREACH")
    func routerMandatory() throws {
        let context = try Context()
        let router = try context.socket(.router, linger: 0)
        try router.set(.routerMandatory(true))
        try router.bind("inproc://mandatory")
        #expect {
            try router.send([Data(frame: "nobody"), Data(frame: "x")])
        } throws: { error in
            (error as? ZMQError)?.isHostUnreachable == true
        }
    }

    @Test("errors carry errno, libzmq's text and the operation")
    func errorsCarryErrnoAndText() throws {
        let context = try Context()
        let socket = try context.socket(.pair, linger: 0)
        do {
            try socket.bind("nonsense://endpoint")
            Issue.record("bind should have failed")
        } catch {
            #expect(error.errno != 0)
            #expect(error.operation == "bind nonsense://endpoint")
            #expect(!error.message.isEmpty)
            #expect(error.description.contains("errno"))
        }
        socket.close()
        #expect(throws: ZMQError.self) { try socket.send([Data(frame: "x")]) }
    }

    @Test("linger is always finite, and set options read back")
    func lingerAndOptions() throws {
        let context = try Context()
        let socket = try context.socket(.dealer, linger: 250)
        #expect(try socket.linger() == 250)
        try socket.set([
            .sendHighWaterMark(10), .receiveHighWaterMark(10), .immediate(true),
            .heartbeatInterval(milliseconds: 5000), .heartbeatTimeout(milliseconds: 15000),
            .heartbeatTTL(milliseconds: 15000), .reconnectIntervalMax(milliseconds: 32000),
            .maxMessageSize(1 << 20), .tcpKeepalive(1),
        ])
        #expect(try socket.mechanism() == "NULL")
        let publisher = try context.socket(.xpublisher, linger: 0)
        try publisher.set([.xpubNoDrop(true), .xpubWelcomeMessage(Data(frame: "$welcome")), .xpubVerbose(false)])
    }

    @Test("a non-blocking receive on an empty socket returns nil, a blocking one times out")
    func nonBlockingReceive() throws {
        let context = try Context()
        let pull = try context.socket(.pull, linger: 0)
        try pull.bind("inproc://empty")
        #expect(try pull.receive(dontWait: true) == nil)
        try pull.set(.receiveTimeout(milliseconds: 10))
        #expect { try pull.receive() } throws: { ($0 as? ZMQError)?.isWouldBlock == true }
    }

    @Test("a peer sending more than ZMQ_MAXMSGSIZE is disconnected, its message never delivered")
    func maxMessageSize() throws {
        let context = try Context()
        let router = try context.socket(.router, linger: 0)
        try router.set([.maxMessageSize(1024), .receiveTimeout(milliseconds: 300)])
        try router.bind("tcp://127.0.0.1:*")
        let endpoint = try router.lastEndpoint()
        let monitor = try SocketMonitorReader(context: context, socket: router, endpoint: "inproc://mon-maxsize")

        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.connect(endpoint)
        try dealer.send([Data(count: 4096)])
        let event = try monitor.next(until: .disconnected)
        #expect(event.kind == .disconnected)
        #expect(try router.receive(dontWait: true) == nil)
        dealer.close()
        monitor.close()
        router.close()
    }

    @Test("a socket monitor reports the connection life cycle")
    func monitorEvents() throws {
        let context = try Context()
        let router = try context.socket(.router, linger: 0)
        try router.bind("tcp://127.0.0.1:*")
        let endpoint = try router.lastEndpoint()
        let monitor = try SocketMonitorReader(context: context, socket: router, endpoint: "inproc://mon-life")
        let dealer = try context.socket(.dealer, linger: 0)
        try dealer.connect(endpoint)
        #expect(try monitor.next(until: .accepted).kind == .accepted)
        #expect(try monitor.next(until: .handshakeSucceeded).kind == .handshakeSucceeded)
        dealer.close()
        #expect(try monitor.next(until: .disconnected).kind == .disconnected)
        monitor.close()
        router.close()
    }
}

/// Reads a socket's monitor events on the test's thread.
final class SocketMonitorReader {
    let pair: Socket
    let socket: Socket

    init(context: Context, socket: Socket, endpoint: String) throws {
        self.socket = socket
        try socket.startMonitor(endpoint: endpoint)
        pair = try context.socket(.pair, linger: 0)
        try pair.set(.receiveTimeout(milliseconds: 5000))
        try pair.connect(endpoint)
    }

    /// The next event of `kind`, skipping others; throws after 5 s without one.
    func next(until kind: SocketEvent.Kinds) throws -> SocketEvent {
        while true {
            let message = try #require(try pair.receive())
            let event = try SocketEvent(frames: message.frames)
            if event.kind == kind { return event }
        }
    }

    func close() {
        socket.stopMonitor()
        pair.close()
    }
}
