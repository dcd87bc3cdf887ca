import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What to wait for on a poll item.
public struct PollEvents: OptionSet, Sendable, Hashable {
    public let rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
}

/// A set of sockets and plain file descriptors waited on together with `zmq_poll`.
///
/// Threading contract: like the sockets it holds, a poller is used by one thread only.
public final class Poller {
    private var items: [zmq_pollitem_t] = []

    public init() {}

    /// Adds a socket; returns its index for `update` and `returned`.
    @discardableResult
    public func add(_ socket: Socket, events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: -1, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Adds a plain file descriptor (an eventfd, a pipe); returns its index.
    @discardableResult
    public func add(fileDescriptor: Int32, events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Changes what item `index` waits for (empty: ignored by the next poll).
    public func update(_ index: Int, events: PollEvents) {
        items[index].events = events.rawValue
    }

    /// Removes every item; indices start again at 0.
    public func removeAll() { items.removeAll(keepingCapacity: true) }

    public var count: Int { items.count }

    /// Waits until an item is ready or `timeout` milliseconds pass (-1: forever).
    /// - Returns: how many items are ready (0 on time-out or when interrupted by a signal).
    @discardableResult
    public func poll(timeout: Int) throws(ZMQError) -> Int {
        let rc = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), timeout) }
        if rc < 0 {
            if zmq_errno() == EINTR { return 0 }
            throw ZMQError.last("zmq_poll")
        }
        return Int(rc)
    }

    /// What item `index` was found ready for by the last `poll`.
    public func returned(_ index: Int) -> PollEvents {
        PollEvents(rawValue: items[index].revents)
    }
}

/// A wake-up channel for a thread that sleeps in `zmq_poll`: an `eventfd` other threads write to.
public final class WakeUpSignal: Sendable {
    /// The descriptor to poll for readability.
    public let fileDescriptor: Int32

    public init() throws(ZMQError) {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard fd >= 0 else {
            throw ZMQError(errno: errno, message: String(cString: strerror(errno)), operation: "eventfd")
        }
        fileDescriptor = fd
    }

    /// Wakes the polling thread. Safe from any thread; signals coalesce.
    public func signal() {
        var one: UInt64 = 1
        _ = write(fileDescriptor, &one, 8)
    }

    /// Clears pending signals; called by the polling thread after it woke.
    public func drain() {
        var value: UInt64 = 0
        _ = read(fileDescriptor, &value, 8)
    }

    deinit {
        close(fileDescriptor)
    }
}
