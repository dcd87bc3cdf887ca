import CZeroMQ
public import Foundation
public import ZeroMQ

/// One message of very many large frames, as an attacker would send it, without the sender
/// holding it: every frame references the same bytes (libzmq's zero-copy `zmq_msg_init_data`),
/// so a 3 GB message costs this process one frame's memory while the receiver gets it all.
public enum Flood {
    /// The bytes every frame shows: 1 MB of 'x', allocated once and never freed (libzmq may still
    /// be sending from them after the call returns). Unchecked: filled once by the initialiser,
    /// then only ever read.
    nonisolated(unsafe) static let frame: UnsafeMutableRawBufferPointer = {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1_000_000, alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "x"))
        return buffer
    }()

    /// Queues `frames` frames of `frameBytes` (at most 1 MB) on `socket` as one message, the
    /// first `prefix` frames (an envelope's or Majordomo's head) before them; the message ends
    /// with the last flood frame. Call on the socket's thread (`AsyncSocket.perform`).
    public static func send(on socket: Socket, prefix: [Data] = [], frames: Int, frameBytes: Int = 1_000_000) throws {
        precondition(frameBytes <= frame.count && frames > 0)
        try socket.withHandle { handle in
            for part in prefix {
                guard part.withUnsafeBytes({ zmq_send(handle, $0.baseAddress, $0.count, ZMQ_SNDMORE) }) >= 0 else {
                    throw ZMQError.last("flood prefix")
                }
            }
            for index in 0..<frames {
                var message = zmq_msg_t()
                zmq_msg_init_data(&message, frame.baseAddress, frameBytes, nil, nil)
                guard zmq_msg_send(&message, handle, index == frames - 1 ? 0 : ZMQ_SNDMORE) >= 0 else {
                    zmq_msg_close(&message)
                    throw ZMQError.last("flood frame \(index)")
                }
            }
        }
    }
}
