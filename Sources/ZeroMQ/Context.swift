import CZeroMQ
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A libzmq context: the owner of libzmq's I/O threads and the namespace of `inproc://`
/// endpoints (a ZAP handler must be bound in the same context as the sockets it guards).
///
/// A context is thread-safe (libzmq guarantees it), so this type is `Sendable`. Sockets made
/// from it are not. `terminate()` waits for every socket to be closed; sockets made by this
/// binding always carry a finite linger, so that wait is bounded. In a program the context's
/// owner is its `IOThread`, whose shutdown terminates it.
public final class Context: @unchecked Sendable {
    // @unchecked: the only state is libzmq's context pointer, which libzmq documents as safe
    // to use from any thread; `terminated` is guarded by the lock below.
    let handle: UnsafeMutableRawPointer
    private let lock = Lock()
    private var terminated = false

    /// Creates a context.
    /// - Parameter ioThreads: libzmq I/O threads (`ZMQ_IO_THREADS`); one is plenty below
    ///   about a gigabyte per second.
    public init(ioThreads: Int32 = 1) throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError.last("zmq_ctx_new") }
        self.handle = handle
        if ioThreads != 1 {
            guard zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) == 0 else {
                throw ZMQError.last("zmq_ctx_set ZMQ_IO_THREADS")
            }
        }
        // Lets the process have many sockets (a broker with thousands of kiosks).
        zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, 65_536)
    }

    /// Makes a socket of the given kind. The socket belongs to the calling thread from now on.
    /// - Parameter linger: `ZMQ_LINGER` in milliseconds; never infinite, so closing cannot hang.
    public func socket(_ type: SocketType, linger: Int32 = 1000) throws(ZMQError) -> Socket {
        try Socket(context: self, type: type, linger: linger)
    }

    /// Shuts the context down (`zmq_ctx_shutdown`): blocking calls in other threads return
    /// `ETERM`. Sockets must still be closed by their threads.
    public func shutdown() {
        zmq_ctx_shutdown(handle)
    }

    /// Whether `terminate()` has begun: no socket can be made from the context any more.
    public var isTerminated: Bool { lock.withLock { terminated } }

    /// Terminates the context; blocks until every socket made from it is closed.
    public func terminate() {
        let already = lock.withLock { () -> Bool in
            defer { terminated = true }
            return terminated
        }
        if already { return }
        while zmq_ctx_term(handle) != 0 && zmq_errno() == EINTR {}
    }

    /// `terminate()` for async code: the wait for libzmq (every socket closed, what lingers
    /// sent or dropped, its I/O threads joined) happens on a thread of its own, so no thread of
    /// Swift's cooperative pool (two, on two cores) is blocked meanwhile.
    public func terminate() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.start(named: "zmq-terminate") { [self] in
                terminate()
                continuation.resume()
            }
        }
    }

    deinit {
        terminate()
    }
}
