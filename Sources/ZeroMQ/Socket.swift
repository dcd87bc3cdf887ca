import CZeroMQ
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A libzmq socket.
///
/// Threading contract: a socket belongs to the thread that made it for its whole life. Every
/// method must be called on that thread, and `close()` too. That is why `Socket` is not
/// `Sendable`; async code reaches sockets through `IOThread`, which owns them.
///
/// Every socket is made with a finite `ZMQ_LINGER`, so closing it and terminating its context
/// never hang.
public final class Socket {
    public let type: SocketType
    private(set) var handle: UnsafeMutableRawPointer?
    private var monitorEndpoint: String?

    init(context: Context, type: SocketType, linger: Int32) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, type.rawValue) else {
            throw ZMQError.last("zmq_socket \(type)")
        }
        self.type = type
        self.handle = handle
        try set(.linger(milliseconds: max(0, linger)))
    }

    deinit {
        close()
    }

    private func live(_ operation: @autoclosure () -> String) throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else { throw ZMQError(errno: ENOTSOCK, message: "socket is closed", operation: operation()) }
        return handle
    }

    /// Closes the socket. Stops a socket monitor first (libzmq can block otherwise).
    public func close() {
        guard let handle else { return }
        if monitorEndpoint != nil {
            zmq_socket_monitor(handle, nil, 0)
            monitorEndpoint = nil
        }
        zmq_close(handle)
        self.handle = nil
    }

    /// Calls `body` with libzmq's socket handle, for calls this binding does not wrap (tests that
    /// send frames without copying them). The same threading contract holds: the owning thread
    /// only, and the handle must not outlive the call.
    public func withHandle<T>(_ body: (UnsafeMutableRawPointer) throws -> T) throws -> T {
        try body(try live("handle"))
    }

    // MARK: Endpoints

    public func bind(_ endpoint: String) throws(ZMQError) {
        guard zmq_bind(try live("bind"), endpoint) == 0 else { throw ZMQError.last("bind \(endpoint)") }
    }

    public func unbind(_ endpoint: String) throws(ZMQError) {
        guard zmq_unbind(try live("unbind"), endpoint) == 0 else { throw ZMQError.last("unbind \(endpoint)") }
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        guard zmq_connect(try live("connect"), endpoint) == 0 else {
            throw ZMQError.last("connect \(endpoint)")
        }
    }

    public func disconnect(_ endpoint: String) throws(ZMQError) {
        guard zmq_disconnect(try live("disconnect"), endpoint) == 0 else {
            throw ZMQError.last("disconnect \(endpoint)")
        }
    }

    // MARK: Options

    public func set(_ option: SocketOption) throws(ZMQError) {
        let handle = try live("set \(option.name)")
        let (name, value) = option.encoded
        let rc: Int32
        switch value {
        case .int32(var v):
            rc = zmq_setsockopt(handle, name, &v, MemoryLayout<Int32>.size)
        case .int64(var v):
            rc = zmq_setsockopt(handle, name, &v, MemoryLayout<Int64>.size)
        case .bool(let b):
            var v: Int32 = b ? 1 : 0
            rc = zmq_setsockopt(handle, name, &v, MemoryLayout<Int32>.size)
        case .bytes(let data):
            rc = data.withUnsafeBytes { zmq_setsockopt(handle, name, $0.baseAddress, $0.count) }
        }
        guard rc == 0 else { throw ZMQError.last("set \(option.name)") }
    }

    public func set(_ options: [SocketOption]) throws(ZMQError) {
        for option in options { try set(option) }
    }

    private func getInt32(_ name: Int32, _ label: String) throws(ZMQError) -> Int32 {
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        guard zmq_getsockopt(try live("get \(label)"), name, &value, &size) == 0 else {
            throw ZMQError.last("get \(label)")
        }
        return value
    }

    private func getBytes(_ name: Int32, _ label: String, capacity: Int = 256) throws(ZMQError) -> Data {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var size = capacity
        guard zmq_getsockopt(try live("get \(label)"), name, &buffer, &size) == 0 else {
            throw ZMQError.last("get \(label)")
        }
        return Data(buffer.prefix(size))
    }

    /// `ZMQ_EVENTS`: whether a message can be read or written without blocking right now.
    public func events() throws(ZMQError) -> (readable: Bool, writable: Bool) {
        let events = try getInt32(ZMQ_EVENTS, "ZMQ_EVENTS")
        return (events & Int32(ZMQ_POLLIN) != 0, events & Int32(ZMQ_POLLOUT) != 0)
    }

    /// `ZMQ_FD`: an edge-triggered file descriptor that becomes readable when `events()` may
    /// have changed. Drain with `events()` before waiting on it again.
    public func fileDescriptor() throws(ZMQError) -> Int32 {
        try getInt32(ZMQ_FD, "ZMQ_FD")
    }

    /// `ZMQ_LAST_ENDPOINT`: the endpoint last bound, with the real port for `tcp://…:*`.
    public func lastEndpoint() throws(ZMQError) -> String {
        let data = try getBytes(ZMQ_LAST_ENDPOINT, "ZMQ_LAST_ENDPOINT")
        return String(decoding: data.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// `ZMQ_MECHANISM` as a name: `NULL`, `PLAIN`, `CURVE` or `GSSAPI`.
    public func mechanism() throws(ZMQError) -> String {
        switch try getInt32(ZMQ_MECHANISM, "ZMQ_MECHANISM") {
        case ZMQ_NULL: "NULL"
        case ZMQ_PLAIN: "PLAIN"
        case ZMQ_CURVE: "CURVE"
        case ZMQ_GSSAPI: "GSSAPI"
        case let other: "unknown(\(other))"
        }
    }

    public func linger() throws(ZMQError) -> Int32 { try getInt32(ZMQ_LINGER, "ZMQ_LINGER") }

    // MARK: Messages

    /// Sends a multipart message.
    /// - Parameter dontWait: fail with `false` instead of blocking when the message can't be
    ///   queued now (`EAGAIN`); once the first frame is queued, the rest always are.
    /// - Returns: `true` if queued, `false` if `dontWait` and the socket would block.
    @discardableResult
    public func send(_ frames: [Data], dontWait: Bool = false) throws(ZMQError) -> Bool {
        let handle = try live("send")
        guard !frames.isEmpty else { throw ZMQError.invalid("a message needs at least one frame", operation: "send") }
        for (index, frame) in frames.enumerated() {
            let last = index == frames.count - 1
            var flags: Int32 = last ? 0 : ZMQ_SNDMORE
            if index == 0 && dontWait { flags |= ZMQ_DONTWAIT }
            var rc: Int32
            repeat {
                rc = frame.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, flags) }
            } while rc < 0 && zmq_errno() == EINTR
            if rc < 0 {
                if index == 0 && dontWait && zmq_errno() == EAGAIN { return false }
                throw ZMQError.last("send \(type) frame \(index)")
            }
        }
        return true
    }

    @discardableResult
    public func send(_ message: Message, dontWait: Bool = false) throws(ZMQError) -> Bool {
        try send(message.frames, dontWait: dontWait)
    }

    /// Receives one multipart message.
    /// - Parameter dontWait: return `nil` instead of blocking when nothing is queued.
    public func receive(dontWait: Bool = false) throws(ZMQError) -> Message? {
        let handle = try live("receive")
        var frames: [Data] = []
        // Room for an envelope behind a routing frame (8) without growing the array 4 times.
        frames.reserveCapacity(8)
        var userID: String?
        var byteCount = 0
        var message = zmq_msg_t()
        zmq_msg_init(&message)
        defer { zmq_msg_close(&message) }
        while true {
            let flags: Int32 = frames.isEmpty && dontWait ? ZMQ_DONTWAIT : 0
            var rc: Int32
            repeat {
                rc = zmq_msg_recv(&message, handle, flags)
            } while rc < 0 && zmq_errno() == EINTR
            if rc < 0 {
                if frames.isEmpty && dontWait && zmq_errno() == EAGAIN { return nil }
                throw ZMQError.last("receive \(type)")
            }
            let size = zmq_msg_size(&message)
            byteCount += size
            if size == 0 {
                frames.append(Data())
            } else {
                frames.append(Data(bytes: zmq_msg_data(&message), count: size))
            }
            if zmq_msg_more(&message) == 0 {
                // The User-Id ZAP gave the connection, from the last frame: every frame the peer
                // sent carries it (a ROUTER's routing-id frame, made by the socket, does not),
                // and one look-up a message is enough.
                if let property = zmq_msg_gets(&message, "User-Id") { userID = String(cString: property) }
                break
            }
        }
        // What a guarded server connection sent is taken now (ZMQ_SRCFD: the connection's
        // descriptor, -1 for inproc); the guard counts it against that connection no longer.
        ReceiveGuard.taken(fileDescriptor: zmq_msg_get(&message, ZMQ_SRCFD), frames: frames.count, bytes: byteCount)
        return Message(frames: frames, userID: userID)
    }

    // MARK: Monitoring

    /// Starts a socket monitor publishing the given events on a PAIR at `endpoint`
    /// (`inproc://…`). Read them with `SocketMonitor`. `close()` stops the monitor first.
    public func startMonitor(endpoint: String, events: SocketEvent.Kinds = .all) throws(ZMQError) {
        let handle = try live("monitor")
        guard zmq_socket_monitor(handle, endpoint, events.rawValue) == 0 else {
            throw ZMQError.last("zmq_socket_monitor \(endpoint)")
        }
        monitorEndpoint = endpoint
    }

    /// Stops the socket monitor, if one is running.
    public func stopMonitor() {
        guard let handle, monitorEndpoint != nil else { return }
        zmq_socket_monitor(handle, nil, 0)
        monitorEndpoint = nil
    }
}
