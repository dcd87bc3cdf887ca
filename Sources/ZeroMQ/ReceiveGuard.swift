import CReceiveGuard

/// A bound on the bytes one connection of a server socket can make libzmq hold: what it has
/// sent that the application has not yet taken, the message still arriving included.
///
/// libzmq gives the application a multipart message only once all of it is in, and bounds
/// neither its frame count nor its total (`ZMQ_MAXMSGSIZE` is per frame), so one peer can make
/// a server buffer gigabytes. The guard counts each guarded connection's reads as libzmq makes
/// them (the C target `CReceiveGuard` defines `recv`, which libzmq calls for every TCP read)
/// and makes the read fail once a connection is over its limit; libzmq then closes that
/// connection and drops its partial message. `Socket.receive` reports what it takes, and a
/// socket monitor's owner reports closed connections (`closed(fileDescriptor:)`) to learn of drops.
///
/// Only TCP connections accepted on a guarded port are counted; a process's own outgoing
/// connections, IPC and inproc never are.
public enum ReceiveGuard {
    /// Bytes a message costs on the wire beyond its frames, at most: the guard subtracts this
    /// much per frame and per message, so it never keeps counting what was taken (a CURVE
    /// frame adds 35–42 bytes of header, command name, nonce and tag).
    static let frameOverhead = 64
    static let messageOverhead = 64

    /// Whether libzmq's reads and closes reach the guard in this process (the executable's
    /// `recv` and `close` were bound before libc's); without it, `guardPort` has no effect.
    public static var isInstalled: Bool { switchboard_receive_guard_installed() == 1 }

    /// Guards every connection accepted on local TCP `port` with `limit` bytes (0: no longer).
    public static func guardPort(_ port: UInt16, limit: Int64) {
        _ = switchboard_receive_guard_port(port, limit)
    }

    /// The connection on `fileDescriptor` is gone (a monitor's DISCONNECTED or CLOSED). Returns
    /// whether the guard dropped it, once.
    public static func closed(fileDescriptor: Int32) -> Bool { switchboard_receive_guard_closed(fileDescriptor) == 1 }

    /// Bytes read on `fileDescriptor` that were not yet taken.
    public static func pending(fileDescriptor: Int32) -> Int64 { switchboard_receive_guard_pending(fileDescriptor) }

    /// Connections the guard has dropped since the process started.
    public static var dropped: UInt64 { switchboard_receive_guard_dropped() }

    static func taken(fileDescriptor: Int32, frames: Int, bytes: Int) {
        guard fileDescriptor >= 0 else { return }
        switchboard_receive_guard_taken(fileDescriptor, Int64(bytes + frames * frameOverhead + messageOverhead))
    }
}
