public import Foundation
import Synchronization

/// One ZAP authentication request (ZeroMQ RFC 27), as libzmq sends it for a new connection.
public struct ZAPRequest: Sendable, Hashable {
    public var requestID: Data
    /// The server socket's `ZMQ_ZAP_DOMAIN`.
    public var domain: String
    /// The peer's address (an IP address for TCP).
    public var address: String
    /// The peer's routing id, if it set one.
    public var identity: Data
    /// `NULL`, `PLAIN`, `CURVE` or `GSSAPI`.
    public var mechanism: String
    /// Mechanism-specific credentials: for CURVE the client's 32-byte public key; for PLAIN
    /// user name and password.
    public var credentials: [Data]

    /// The client's long-term public key, for a CURVE request.
    public var curvePublicKey: CurveKey? {
        guard mechanism == "CURVE", let first = credentials.first else { return nil }
        return try? CurveKey(bytes: first)
    }
}

/// A ZAP handler's answer.
public enum ZAPDecision: Sendable, Hashable {
    /// Status 200: the connection is accepted; `userID` is attached to every message the peer
    /// sends (`Message.userID`), with `metadata` readable as ZMTP properties.
    case allow(userID: String, metadata: [String: String] = [:])
    /// Status 400 (refused), 300 (try later) or 500 (internal error), with a reason for logs.
    case deny(status: Int = 400, reason: String)
}

/// A ZAP handler: answers libzmq's authentication requests for every server socket of one
/// context that uses a security mechanism.
///
/// It must be running before any server socket of the context is bound, and for as long as
/// such sockets accept connections. Note libzmq 4.3.4's trap: a CURVE server with no handler
/// bound accepts every key. `ZAPHandler.start` binds `inproc://zeromq.zap.01` before it returns,
/// so binding server sockets after it is safe.
///
/// The handler runs on a thread of its own; `authenticate` is called on that thread, one
/// request at a time, and must not block for long.
public final class ZAPHandler: Sendable {
    public static let endpoint = "inproc://zeromq.zap.01"

    private let wakeUp: WakeUpSignal
    private let done = DispatchSemaphore(value: 0)
    private let stopped = Mutex<Bool>(false)

    private init(wakeUp: WakeUpSignal) {
        self.wakeUp = wakeUp
    }

    /// Binds the handler in `context` and starts serving.
    /// - Throws: if the ZAP endpoint is already bound in this context, or libzmq fails.
    public static func start(
        context: Context,
        authenticate: @escaping @Sendable (ZAPRequest) -> ZAPDecision
    ) throws(ZMQError) -> ZAPHandler {
        let handler = ZAPHandler(wakeUp: try WakeUpSignal())
        let ready = DispatchSemaphore(value: 0)
        let startError = Mutex<ZMQError?>(nil)
        Thread.start(named: "zap-handler") { [wakeUp = handler.wakeUp, done = handler.done] in
            defer { done.signal() }
            let socket: Socket
            do {
                socket = try context.socket(.reply, linger: 0)
                try socket.bind(ZAPHandler.endpoint)
            } catch {
                startError.withLock { $0 = error as? ZMQError }
                ready.signal()
                return
            }
            ready.signal()
            defer { socket.close() }
            let poller = Poller()
            poller.add(socket)
            poller.add(fileDescriptor: wakeUp.fileDescriptor)
            while true {
                guard (try? poller.poll(timeout: -1)) != nil else { return }
                if poller.returned(1).contains(.readable) { return }
                while let request = try? socket.receive(dontWait: true) {
                    let reply = ZAPHandler.answer(request.frames, authenticate: authenticate)
                    _ = try? socket.send(reply)
                }
            }
        }
        ready.wait()
        if let error = startError.withLock({ $0 }) { throw error }
        return handler
    }

    /// Builds the reply frames for one request; malformed requests get status 500.
    static func answer(_ frames: [Data], authenticate: (ZAPRequest) -> ZAPDecision) -> [Data] {
        // A REP socket has already removed the envelope delimiter.
        guard frames.count >= 6, String(decoding: frames[0], as: UTF8.self) == "1.0" else {
            let id = frames.count > 1 ? frames[1] : Data()
            return reply(id: id, status: 500, text: "malformed ZAP request", userID: "", metadata: [:])
        }
        let request = ZAPRequest(
            requestID: frames[1],
            domain: String(decoding: frames[2], as: UTF8.self),
            address: String(decoding: frames[3], as: UTF8.self),
            identity: frames[4],
            mechanism: String(decoding: frames[5], as: UTF8.self),
            credentials: Array(frames.dropFirst(6))
        )
        switch authenticate(request) {
        case .allow(let userID, let metadata):
            return reply(id: request.requestID, status: 200, text: "OK", userID: userID, metadata: metadata)
        case .deny(let status, let reason):
            return reply(id: request.requestID, status: status, text: reason, userID: "", metadata: [:])
        }
    }

    private static func reply(id: Data, status: Int, text: String, userID: String, metadata: [String: String]) -> [Data] {
        [Data(frame: "1.0"), id, Data(frame: String(status)), Data(frame: text), Data(frame: userID), encodeMetadata(metadata)]
    }

    /// ZMTP metadata: for each property a 1-byte name length, the name, a 4-byte big-endian
    /// value length and the value.
    static func encodeMetadata(_ metadata: [String: String]) -> Data {
        var data = Data()
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            let nameBytes = Array(name.utf8.prefix(255))
            let valueBytes = Array(value.utf8)
            data.append(UInt8(nameBytes.count))
            data.append(contentsOf: nameBytes)
            let length = UInt32(valueBytes.count).bigEndian
            withUnsafeBytes(of: length) { data.append(contentsOf: $0) }
            data.append(contentsOf: valueBytes)
        }
        return data
    }

    /// Stops the handler and waits for its thread. Server sockets of the context then refuse
    /// new CURVE/PLAIN connections only if they enforce the domain; stop them first.
    public func stop() {
        let first = stopped.withLock { value -> Bool in
            defer { value = true }
            return !value
        }
        guard first else { return }
        wakeUp.signal()
        done.wait()
    }

    deinit {
        stop()
    }
}
