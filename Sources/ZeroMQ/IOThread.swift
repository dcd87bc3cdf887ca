public import Foundation
public import ServiceLifecycle
import Synchronization

/// The bridge between async Swift code and libzmq sockets.
///
/// libzmq sockets must stay on one thread, and blocking calls must never run on Swift's
/// cooperative pool (two threads on our machines). An `IOThread` is one dedicated thread that
/// owns a group of sockets: it creates them, sends on them, receives from them and closes them,
/// sleeping in `zmq_poll` with an eventfd beside the sockets so async callers can wake it.
///
/// Back-pressure, both ways, with bounded memory:
/// - `send` suspends its caller until libzmq has taken the message; when a socket is at its
///   high-water mark the message waits (one per caller) until the socket becomes writable.
/// - Received messages go to a bounded inbox per socket. When an inbox is full the thread stops
///   reading that socket, so libzmq's own queue (`ZMQ_RCVHWM`) and then TCP push back on the peer.
///
/// One `IOThread` per process (or per subsystem) is the intended use.
///
/// It is also the owner of the process's ZeroMQ context, and a `Service` whose `run()` owns the
/// teardown (as swift-kafka-client's consumer owns its poll loop): in a `ServiceGroup` it goes
/// first, so graceful shutdown reaches it last, after every service that uses its sockets has
/// returned. `run()` then closes every socket, stops the thread and terminates the context.
/// Code that never runs a group (a command that asks once) uses `withIOThread`, which does the
/// same teardown when its body returns or throws.
public final class IOThread: Service, Sendable {
    public let context: Context
    /// Whether `shutdown()` terminates the context: true when this thread made it.
    private let ownsContext: Bool
    private let wakeUp: WakeUpSignal
    private let shared = Mutex(Shared())
    private let exited = Mutex(Exit())

    /// Starts the thread on a context of its own, which `shutdown()` (and so `run()`)
    /// terminates.
    /// - Parameter ioThreads: libzmq's own I/O threads (`ZMQ_IO_THREADS`).
    public convenience init(name: String = "zmq-io", ioThreads: Int32 = 1) throws(ZMQError) {
        try self.init(context: Context(ioThreads: ioThreads), owningContext: true, name: name)
    }

    /// Starts the thread on `context`, which stays its caller's to terminate: for a second
    /// thread on one context (`inproc://` endpoints are per context).
    public convenience init(context: Context, name: String = "zmq-io") throws(ZMQError) {
        try self.init(context: context, owningContext: false, name: name)
    }

    private init(context: Context, owningContext: Bool, name: String) throws(ZMQError) {
        self.context = context
        self.ownsContext = owningContext
        self.wakeUp = try WakeUpSignal()
        Thread.start(named: name) { [self] in
            shared.withLock { $0.loopThread = pthread_self() }
            let loop = Loop(owner: self)
            loop.run()
            // Jobs that came after the loop's last turn run here; from now on `enqueue` hands
            // jobs to the global executor.
            let jobs = shared.withLock { state -> [UnownedJob] in
                state.jobsClosed = true
                defer { state.jobs = [] }
                return state.jobs
            }
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
            let waiters = exited.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.done = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Makes a socket on the I/O thread and runs `configure` there (set options, bind, connect).
    /// - Parameter inboxCapacity: received messages held for the caller before the thread stops
    ///   reading this socket.
    /// - Parameter sendTimeout: how long `send(_:)` waits for a peer to take a message before it
    ///   throws (nil: as long as it takes). A client whose broker may refuse its key needs one:
    ///   see `AsyncSocket.send(_:timeout:)`.
    /// - Parameter onReceive: when given, every message the socket receives goes to it instead
    ///   of the inbox (`receive` then never returns one): see `ReceiveHandler`.
    public func open(
        _ type: SocketType,
        linger: Int32 = 1000,
        inboxCapacity: Int = 1024,
        sendTimeout: Duration? = nil,
        configure: @escaping @Sendable (Socket) throws -> Void = { _ in },
        onReceive: ReceiveHandler? = nil
    ) async throws -> AsyncSocket {
        let id = shared.withLock { state -> Int in
            state.nextID += 1
            var inbox = Inbox(capacity: inboxCapacity)
            inbox.handler = onReceive
            state.inboxes[state.nextID] = inbox
            return state.nextID
        }
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                post(.open(id: id, type: type, linger: linger, configure: configure, done: continuation))
            }
        } catch {
            _ = shared.withLock { $0.inboxes.removeValue(forKey: id) }
            throw error
        }
        return AsyncSocket(id: id, thread: self, sendTimeout: sendTimeout)
    }

    /// Closes every socket, fails every waiting call, and stops the thread; returns when it has
    /// exited and, if this thread made its context, the context is terminated (on a thread of
    /// its own: libzmq's wait blocks). Safe to call more than once and from several tasks.
    public func shutdown() async {
        shared.withLock { $0.stopping = true }
        wakeUp.signal()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = exited.withLock { state -> Bool in
                if !state.done { state.waiters.append(continuation) }
                return state.done
            }
            if done { continuation.resume() }
        }
        if ownsContext { await context.terminate() }
    }

    /// Keeps the thread serving until graceful shutdown or cancellation, then `shutdown()`.
    ///
    /// Graceful shutdown and cancellation end it the same way; it never throws. Sockets still
    /// open then are closed, and calls waiting on them fail.
    public func run() async {
        // Throws only when cancelled, which ends the thread just the same.
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Runs `body` with an I/O thread on a context of its own, then shuts both down, whether
    /// `body` returned or threw: what a command that asks the broker once and exits uses.
    public static func withIOThread<Result>(
        name: String = "zmq-io", _ body: (IOThread) async throws -> Result
    ) async throws -> Result {
        let io = try IOThread(name: name)
        let result: Swift.Result<Result, any Error>
        do {
            result = .success(try await body(io))
        } catch {
            result = .failure(error)
        }
        await io.shutdown()
        return try result.get()
    }

    // MARK: Shared state

    /// Takes what a socket receives on the I/O thread itself, with no task woken per message: one
    /// reader that routes messages to many waiters (a client socket shared by many requests).
    ///
    /// Called on the I/O thread with every message that one wake-up found ready on the socket
    /// (in order, up to a batch), and once at the end with a failure: the socket was closed, the
    /// thread shut down, or a receive failed. Nothing comes after the failure. It must return
    /// quickly and never block or wait for another call on this thread: every socket of the
    /// thread waits for it. There is no inbox and so no back-pressure: the handler keeps up or
    /// drops.
    public typealias ReceiveHandler = @Sendable (Result<[Message], ZMQError>) -> Void

    /// A timer made by `schedule(at:_:)`, for `cancel(_:)`.
    public struct TimerID: Sendable, Hashable {
        fileprivate let value: Int
    }

    /// Runs `action` on the I/O thread once `deadline` has passed, unless cancelled first; at
    /// shutdown every timer still waiting runs at once (so nothing waits on one forever). On a
    /// thread already shut down, `action` runs now, on the caller's thread.
    ///
    /// The poll of the thread wakes for the earliest timer, and a new one later than the time it
    /// sleeps until costs no wake-up: what a time-out per request wants, where nearly every timer
    /// is cancelled long before it is due.
    @discardableResult
    public func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> TimerID {
        enum Outcome { case scheduled(TimerID, signal: Bool), stopped }
        let outcome = shared.withLock { state -> Outcome in
            guard !state.stopping else { return .stopped }
            state.nextWaiterID += 1
            let id = state.nextWaiterID
            state.timers.push(.init(deadline: deadline, id: id))
            state.timerActions[id] = action
            return .scheduled(TimerID(value: id), signal: state.needsWakeUp(by: deadline))
        }
        switch outcome {
        case .scheduled(let id, let signal):
            if signal { wakeUp.signal() }
            return id
        case .stopped:
            action()
            return TimerID(value: 0)
        }
    }

    /// Cancels a timer; returns whether it had not run yet (its action will never run).
    @discardableResult
    public func cancel(_ timer: TimerID) -> Bool {
        shared.withLock { $0.timerActions.removeValue(forKey: timer.value) != nil }
    }

    private struct Exit {
        var done = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    fileprivate struct Shared {
        var commands: [Command] = []
        var inboxes: [Int: Inbox] = [:]
        var nextID = 0
        var nextWaiterID = 0
        var stopping = false
        /// Sends whose task was cancelled before the send was posted.
        var cancelledSends: Set<Int> = []
        /// Sends posted to the I/O thread whose call has not returned yet.
        var postedSends: Set<Int> = []
        /// Waiters with a deadline, across all inboxes (so the loop knows when to wake).
        var timedWaiters = 0
        /// The loop has been signalled and has not read this state since: a change made now is
        /// seen without a signal of its own, so a burst of calls costs one eventfd write.
        var wakePending = false
        /// When the loop's poll ends by itself at the latest (nil: only a signal ends it). A new
        /// deadline later than this needs no wake-up: the loop looks again by then.
        var sleepUntil: ContinuousClock.Instant?
        var timers = TimerHeap()
        /// The actions of timers not yet run nor cancelled, by id.
        var timerActions: [Int: @Sendable () -> Void] = [:]
        /// Jobs of tasks that prefer this thread as their executor, to run at the loop's next turn.
        var jobs: [UnownedJob] = []
        /// The thread has run its last job: later ones go to the global executor.
        var jobsClosed = false
        /// The I/O thread itself: what it changes here, it sees before it next sleeps.
        var loopThread: pthread_t?

        /// Whether a caller that has just changed this state must signal the loop: not when a
        /// signal is already on its way, nor when the caller is the loop's own thread (it looks
        /// for work again before it polls).
        mutating func needsWakeUp() -> Bool {
            if let loopThread, pthread_equal(loopThread, pthread_self()) != 0 { return false }
            if wakePending { return false }
            wakePending = true
            return true
        }

        /// Whether a caller that has just added `deadline` must signal the loop: only when the
        /// loop could sleep past it.
        mutating func needsWakeUp(by deadline: ContinuousClock.Instant) -> Bool {
            if let sleepUntil, sleepUntil <= deadline { return false }
            return needsWakeUp()
        }

        /// The earliest timer still to run, dropping cancelled ones from the top.
        mutating func earliestTimer() -> ContinuousClock.Instant? {
            while let first = timers.first {
                if timerActions[first.id] != nil { return first.deadline }
                _ = timers.popFirst()
            }
            return nil
        }
    }

    /// A task waiting in `receive`; one with a deadline gets nil when it passes (the I/O
    /// thread's poll wakes up for the earliest deadline, so no timer task is needed).
    fileprivate struct Waiter {
        var id: Int
        var deadline: ContinuousClock.Instant?
        var continuation: CheckedContinuation<Message?, any Error>
    }

    fileprivate struct Inbox {
        var messages: RingBuffer<Message>
        let capacity: Int
        var waiters: [Waiter] = []
        var cancelled: Set<Int> = []
        var failure: ZMQError?
        /// The I/O thread stopped reading because the inbox was full.
        var paused = false
        /// Takes the messages instead of the inbox (`open(onReceive:)`).
        var handler: ReceiveHandler?

        init(capacity: Int) {
            self.capacity = Swift.max(1, capacity)
            self.messages = RingBuffer(capacity: Swift.min(self.capacity, 64))
        }
    }

    fileprivate enum Command {
        case open(
            id: Int, type: SocketType, linger: Int32, configure: @Sendable (Socket) throws -> Void,
            done: CheckedContinuation<Void, any Error>)
        case send(id: Int, sendID: Int, frames: [Data], deadline: ContinuousClock.Instant?, done: SendCompletion)
        case cancelSend(id: Int, sendID: Int)
        case perform(id: Int, body: @Sendable (Socket?) -> Void)
        case close(id: Int, done: CheckedContinuation<Void, Never>)
    }

    /// A send waiting for the socket to take it; one with a deadline is withdrawn when it
    /// passes (the loop's poll wakes up for the earliest one).
    fileprivate struct PendingSend {
        var sendID: Int
        var frames: [Data]
        var deadline: ContinuousClock.Instant?
        var done: SendCompletion
    }

    /// Who learns how a send ended: a task waiting in `send`, or a `post`'s callback.
    fileprivate enum SendCompletion {
        case task(CheckedContinuation<Void, any Error>)
        case callback(@Sendable (Result<Void, any Error>) -> Void)

        func resume() { finish(.success(())) }
        func resume(throwing error: any Error) { finish(.failure(error)) }

        func finish(_ result: Result<Void, any Error>) {
            switch self {
            case .task(let continuation): continuation.resume(with: result)
            case .callback(let callback): callback(result)
            }
        }
    }

    /// How a send with a deadline that no peer took ends inside the I/O thread.
    fileprivate struct SendTimedOut: Error {}

    fileprivate func post(_ command: Command) {
        let accepted = shared.withLock { state -> Bool? in
            guard !state.stopping else { return nil }
            state.commands.append(command)
            return state.needsWakeUp()
        }
        switch accepted {
        case true?: wakeUp.signal()
        case false?: break
        case nil: Self.refuse(command)
        }
    }

    /// Fails a command that arrived after shutdown.
    fileprivate static func refuse(_ command: Command) {
        let error = ZMQError(errno: 0, message: "the I/O thread has shut down", operation: "io-thread")
        switch command {
        case .open(_, _, _, _, let done): done.resume(throwing: error)
        case .send(_, _, _, _, let done): done.resume(throwing: error)
        case .cancelSend: break
        case .perform(_, let body): body(nil)
        case .close(_, let done): done.resume()
        }
    }

    // MARK: Calls from AsyncSocket

    fileprivate func send(id: Int, frames: [Data], deadline: ContinuousClock.Instant? = nil) async throws {
        let sendID = shared.withLock { state -> Int in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        // Whatever happens, no marker for this send outlives the call. This runs after
        // withTaskCancellationHandler has returned, when its onCancel can no longer fire.
        defer {
            shared.withLock { state in
                state.postedSends.remove(sendID)
                state.cancelledSends.remove(sendID)
            }
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Checked and posted under the lock onCancel takes: a send is either withdrawn
                // here, before it is posted, or posted and then withdrawn by the I/O thread.
                enum Outcome { case posted(signal: Bool), cancelled, refused }
                let outcome = shared.withLock { state -> Outcome in
                    if state.cancelledSends.remove(sendID) != nil { return .cancelled }
                    guard !state.stopping else { return .refused }
                    state.commands.append(
                        .send(id: id, sendID: sendID, frames: frames, deadline: deadline, done: .task(continuation)))
                    state.postedSends.insert(sendID)
                    return .posted(signal: state.needsWakeUp())
                }
                switch outcome {
                case .posted(let signal): if signal { wakeUp.signal() }
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .refused:
                    Self.refuse(.send(id: id, sendID: sendID, frames: frames, deadline: deadline, done: .task(continuation)))
                }
            }
        } onCancel: {
            let posted = shared.withLock { state -> Bool in
                guard !state.stopping else { return false }
                guard state.postedSends.contains(sendID) else {
                    // Not posted yet (the task was cancelled before or while entering): the
                    // operation finds this marker and withdraws the send itself.
                    state.cancelledSends.insert(sendID)
                    return false
                }
                state.commands.append(.cancelSend(id: id, sendID: sendID))
                return state.needsWakeUp()
            }
            if posted { wakeUp.signal() }
        }
    }

    /// A send whose caller does not wait: `completion` runs on the I/O thread (or at once, on
    /// the caller's thread, when the thread has shut down).
    fileprivate func post(
        id: Int, frames: [Data], deadline: ContinuousClock.Instant?, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> Int {
        let posted = shared.withLock { state -> (sendID: Int, signal: Bool)? in
            guard !state.stopping else { return nil }
            state.nextWaiterID += 1
            state.commands.append(
                .send(id: id, sendID: state.nextWaiterID, frames: frames, deadline: deadline, done: .callback(completion)))
            return (state.nextWaiterID, state.needsWakeUp())
        }
        guard let posted else {
            Self.refuse(.send(id: id, sendID: 0, frames: frames, deadline: deadline, done: .callback(completion)))
            return 0
        }
        if posted.signal { wakeUp.signal() }
        return posted.sendID
    }

    fileprivate func receive(id: Int, deadline: ContinuousClock.Instant?) async throws -> Message? {
        let waiterID = shared.withLock { state -> Int in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Message?, any Error>) in
                enum Outcome { case message(Message), failure(any Error), timedOut, waiting }
                var wake = false
                let outcome = shared.withLock { state -> Outcome in
                    guard var inbox = state.inboxes[id] else {
                        return .failure(ZMQError(errno: 0, message: "socket is closed", operation: "receive"))
                    }
                    defer { state.inboxes[id] = inbox }
                    if let message = inbox.messages.popFirst() {
                        if inbox.paused && inbox.messages.count <= inbox.capacity / 2 {
                            inbox.paused = false
                            wake = state.needsWakeUp()
                        }
                        return .message(message)
                    }
                    if let failure = inbox.failure { return .failure(failure) }
                    if inbox.cancelled.remove(waiterID) != nil { return .failure(CancellationError()) }
                    if let deadline, deadline <= .now { return .timedOut }
                    inbox.waiters.append(Waiter(id: waiterID, deadline: deadline, continuation: continuation))
                    if let deadline {
                        state.timedWaiters += 1
                        wake = state.needsWakeUp(by: deadline)  // the loop may be sleeping past it
                    }
                    return .waiting
                }
                if wake { wakeUp.signal() }
                switch outcome {
                case .message(let message): continuation.resume(returning: message)
                case .failure(let error): continuation.resume(throwing: error)
                case .timedOut: continuation.resume(returning: nil)
                case .waiting: break
                }
            }
        } onCancel: {
            let continuation = shared.withLock { state -> CheckedContinuation<Message?, any Error>? in
                guard var inbox = state.inboxes[id] else { return nil }
                defer { state.inboxes[id] = inbox }
                if let index = inbox.waiters.firstIndex(where: { $0.id == waiterID }) {
                    let waiter = inbox.waiters.remove(at: index)
                    if waiter.deadline != nil { state.timedWaiters -= 1 }
                    return waiter.continuation
                }
                inbox.cancelled.insert(waiterID)
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    fileprivate func tryReceive(id: Int) -> Message? {
        var wake = false
        let message = shared.withLock { state -> Message? in
            guard var inbox = state.inboxes[id] else { return nil }
            defer { state.inboxes[id] = inbox }
            let message = inbox.messages.popFirst()
            if message != nil && inbox.paused && inbox.messages.count <= inbox.capacity / 2 {
                inbox.paused = false
                wake = state.needsWakeUp()
            }
            return message
        }
        if wake { wakeUp.signal() }
        return message
    }

    fileprivate func perform<R: Sendable>(id: Int, _ body: @escaping @Sendable (Socket) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            post(
                .perform(id: id) { socket in
                    guard let socket else {
                        continuation.resume(throwing: ZMQError(errno: 0, message: "socket is closed", operation: "perform"))
                        return
                    }
                    continuation.resume(with: Result { try body(socket) })
                })
        }
    }

    fileprivate func close(id: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            post(.close(id: id, done: continuation))
        }
    }

    // MARK: The thread

    /// Everything only the I/O thread touches.
    ///
    /// Not `Sendable`: it is made on the I/O thread and never leaves it.
    private final class Loop {
        unowned let owner: IOThread
        var sockets: [Int: Socket] = [:]
        var pendingSends: [Int: RingBuffer<PendingSend>] = [:]
        /// At least how many pending sends have a deadline (recounted by `earliestSendDeadline`).
        var timedSends = 0
        let poller = Poller()
        /// Messages read per socket per wake-up, so one busy socket cannot starve the others.
        let readBatch = 256
        /// Kept between wake-ups so that none allocates: the commands taken from the shared
        /// state (swapped with its empty buffer), and the socket of each poll item.
        var commands: [Command] = []
        var jobs: [UnownedJob] = []
        var order: [Int] = []
        /// The sockets with sends waiting, gathered each turn into a buffer kept for the next.
        var flushing: [Int] = []

        static func earlier(_ a: ContinuousClock.Instant?, _ b: ContinuousClock.Instant?) -> ContinuousClock.Instant? {
            guard let a else { return b }
            guard let b else { return a }
            return min(a, b)
        }

        init(owner: IOThread) { self.owner = owner }

        func run() {
            let executor = owner.asUnownedTaskExecutor()
            while true {
                // The buffers swap places with the shared state's: no array is made per wake-up.
                let stopping = owner.shared.withLock { state in
                    swap(&state.commands, &commands)
                    swap(&state.jobs, &jobs)
                    // From here on a change needs a signal of its own (see `needsWakeUp`).
                    state.wakePending = false
                    return state.stopping
                }
                for command in commands { handle(command) }
                commands.removeAll(keepingCapacity: true)
                for job in jobs { job.runSynchronously(on: executor) }
                jobs.removeAll(keepingCapacity: true)
                if stopping {
                    closeAll()
                    return
                }
                // A socket's queue of sends stays once made (empty between sends), so a send
                // allocates none; a send's completion may run code that closes sockets, so the
                // ids are gathered first.
                flushing.removeAll(keepingCapacity: true)
                for (id, queue) in pendingSends where !queue.isEmpty { flushing.append(id) }
                for id in flushing { flushSends(id) }

                // Read after this turn's work, which may have added timers, waiters and (from
                // this thread, with no signal) commands and jobs.
                let (paused, earliest, more) = owner.shared.withLock { state in
                    var paused: Set<Int> = []
                    for (id, inbox) in state.inboxes where inbox.paused { paused.insert(id) }
                    let waiter = state.timedWaiters > 0 ? Self.earliestDeadline(state.inboxes) : nil
                    let earliest = Self.earlier(waiter, state.earliestTimer())
                    state.sleepUntil = earliest
                    return (paused, earliest, !state.commands.isEmpty || !state.jobs.isEmpty)
                }
                poller.removeAll()
                poller.add(fileDescriptor: owner.wakeUp.fileDescriptor)
                order.removeAll(keepingCapacity: true)
                for (id, socket) in sockets {
                    var events: PollEvents = []
                    if !paused.contains(id) && socket.type != .publisher && socket.type != .push { events.insert(.readable) }
                    if !(pendingSends[id]?.isEmpty ?? true) { events.insert(.writable) }
                    poller.add(socket, events: events)
                    order.append(id)
                }
                var timeout = -1
                let sendDeadline = earliestSendDeadline()
                if more {
                    timeout = 0
                } else if let earliest = Self.earlier(earliest, sendDeadline) {
                    // Rounded up, so the wait never ends just before the deadline.
                    let (seconds, attoseconds) = (earliest - .now).components
                    timeout = max(0, Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
                }
                do {
                    try poller.poll(timeout: timeout)
                } catch {
                    // ETERM: the context is going away under us; fail everything and stop.
                    closeAll()
                    return
                }
                if poller.returned(0).contains(.readable) { owner.wakeUp.drain() }
                for (index, id) in order.enumerated() {
                    let ready = poller.returned(index + 1)
                    if ready.contains(.writable) { flushSends(id) }
                    if ready.contains(.readable) { read(id) }
                }
                if earliest != nil {
                    expireWaiters()
                    runTimers()
                }
                if sendDeadline != nil { expireSends() }
            }
        }

        /// The earliest deadline of a send still waiting, if any has one.
        ///
        /// Scans only while `timedSends` says some may wait, and recounts them as it goes: sends
        /// without a deadline (the common case) cost nothing here.
        func earliestSendDeadline() -> ContinuousClock.Instant? {
            guard timedSends > 0 else { return nil }
            var earliest: ContinuousClock.Instant?
            var count = 0
            for queue in pendingSends.values {
                for entry in queue.elements {
                    guard let deadline = entry.deadline else { continue }
                    count += 1
                    if earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
                }
            }
            timedSends = count
            return earliest
        }

        /// Withdraws every waiting send whose deadline has passed: no peer took it in time.
        func expireSends() {
            let now = ContinuousClock.now
            for (id, var queue) in pendingSends {
                var expired: [SendCompletion] = []
                queue.removeAll { entry in
                    guard let deadline = entry.deadline, deadline <= now else { return false }
                    expired.append(entry.done)
                    return true
                }
                guard !expired.isEmpty else { continue }
                pendingSends[id] = queue
                for done in expired { done.resume(throwing: SendTimedOut()) }
            }
        }

        static func earliestDeadline(_ inboxes: [Int: Inbox]) -> ContinuousClock.Instant? {
            var earliest: ContinuousClock.Instant?
            for inbox in inboxes.values {
                for waiter in inbox.waiters {
                    if let deadline = waiter.deadline, earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
                }
            }
            return earliest
        }

        /// Runs every timer whose deadline has passed.
        func runTimers() {
            let now = ContinuousClock.now
            let due = owner.shared.withLock { state -> [@Sendable () -> Void] in
                var due: [@Sendable () -> Void] = []
                while let first = state.timers.first, first.deadline <= now {
                    _ = state.timers.popFirst()
                    if let action = state.timerActions.removeValue(forKey: first.id) { due.append(action) }
                }
                return due
            }
            for action in due { action() }
        }

        /// Answers nil to every timed waiter whose deadline has passed.
        func expireWaiters() {
            let now = ContinuousClock.now
            let expired = owner.shared.withLock { state -> [CheckedContinuation<Message?, any Error>] in
                var expired: [CheckedContinuation<Message?, any Error>] = []
                for (id, var inbox) in state.inboxes where inbox.waiters.contains(where: { $0.deadline.map { $0 <= now } ?? false }) {
                    inbox.waiters.removeAll { waiter in
                        guard let deadline = waiter.deadline, deadline <= now else { return false }
                        expired.append(waiter.continuation)
                        return true
                    }
                    state.inboxes[id] = inbox
                }
                state.timedWaiters -= expired.count
                return expired
            }
            for continuation in expired { continuation.resume(returning: nil) }
        }

        func handle(_ command: Command) {
            switch command {
            case .open(let id, let type, let linger, let configure, let done):
                do {
                    let socket = try owner.context.socket(type, linger: linger)
                    do {
                        try configure(socket)
                    } catch {
                        socket.close()
                        throw error
                    }
                    sockets[id] = socket
                    done.resume()
                } catch {
                    done.resume(throwing: error)
                }
            case .send(let id, let sendID, let frames, let deadline, let done):
                guard sockets[id] != nil else {
                    done.resume(throwing: ZMQError(errno: 0, message: "socket is closed", operation: "send"))
                    return
                }
                pendingSends[id, default: RingBuffer(capacity: 16)].append(
                    PendingSend(sendID: sendID, frames: frames, deadline: deadline, done: done))
                if deadline != nil { timedSends += 1 }
            case .cancelSend(let id, let sendID):
                // Withdraws the send if it still waits; if it went out already, nothing to do.
                guard var queue = pendingSends[id] else { return }
                var kept = RingBuffer<PendingSend>(capacity: queue.count)
                while let entry = queue.popFirst() {
                    if entry.sendID == sendID {
                        entry.done.resume(throwing: CancellationError())
                    } else {
                        kept.append(entry)
                    }
                }
                pendingSends[id] = kept
            case .perform(let id, let body):
                body(sockets[id])
            case .close(let id, let done):
                closeSocket(id)
                done.resume()
            }
        }

        func flushSends(_ id: Int) {
            guard let socket = sockets[id] else { return }
            // Taken from the queue in place (through the dictionary), not from a copy of it: a
            // copy's first change would copy its storage.
            while let entry = pendingSends[id]?.popFirst() {
                do {
                    if try socket.send(entry.frames, dontWait: true) {
                        entry.done.resume()
                    } else {
                        // Full: it goes back at the front, and waits for the socket to be writable.
                        pendingSends[id]?.prepend(entry)
                        return
                    }
                } catch {
                    entry.done.resume(throwing: error)
                }
            }
        }

        func read(_ id: Int) {
            guard let socket = sockets[id] else { return }
            var batch: [Message] = []
            var failure: ZMQError?
            for _ in 0..<readBatch {
                do {
                    guard let message = try socket.receive(dontWait: true) else { break }
                    batch.append(message)
                } catch {
                    failure = error
                    break
                }
            }
            guard !batch.isEmpty || failure != nil else { return }
            if let handler = owner.shared.withLock({ $0.inboxes[id]?.handler }) {
                if !batch.isEmpty { handler(.success(batch)) }
                if let failure, !failure.isWouldBlock {
                    // The end: nothing more is read from this socket (as with an inbox's failure).
                    owner.shared.withLock { state in
                        state.inboxes[id]?.handler = nil
                        state.inboxes[id]?.paused = true
                    }
                    handler(.failure(failure))
                }
                return
            }
            let handoffs = owner.shared.withLock { state -> [(CheckedContinuation<Message?, any Error>, Message)] in
                guard var inbox = state.inboxes[id] else { return [] }
                defer { state.inboxes[id] = inbox }
                var handoffs: [(CheckedContinuation<Message?, any Error>, Message)] = []
                for message in batch {
                    if !inbox.waiters.isEmpty {
                        let waiter = inbox.waiters.removeFirst()
                        if waiter.deadline != nil { state.timedWaiters -= 1 }
                        handoffs.append((waiter.continuation, message))
                    } else {
                        inbox.messages.append(message)
                    }
                }
                if inbox.messages.count >= inbox.capacity { inbox.paused = true }
                if let failure, !failure.isWouldBlock { inbox.failure = failure }
                return handoffs
            }
            for (continuation, message) in handoffs { continuation.resume(returning: message) }
        }

        func closeSocket(_ id: Int) {
            let error = ZMQError(errno: 0, message: "socket is closed", operation: "close")
            if var queue = pendingSends.removeValue(forKey: id) {
                while let entry = queue.popFirst() { entry.done.resume(throwing: error) }
            }
            sockets.removeValue(forKey: id)?.close()
            let (waiters, handler) = owner.shared.withLock { state -> ([CheckedContinuation<Message?, any Error>], ReceiveHandler?) in
                let inbox = state.inboxes.removeValue(forKey: id)
                let waiters = inbox?.waiters ?? []
                state.timedWaiters -= waiters.filter { $0.deadline != nil }.count
                return (waiters.map(\.continuation), inbox?.handler)
            }
            for waiter in waiters { waiter.resume(throwing: error) }
            handler?(.failure(error))
        }

        func closeAll() {
            // Also reached when zmq_poll fails (ETERM): mark the thread stopping so later calls
            // are refused at once instead of queueing for a loop that no longer runs.
            let leftovers = owner.shared.withLock { state -> [Command] in
                state.stopping = true
                defer { state.commands = [] }
                return state.commands
            }
            for command in leftovers { IOThread.refuse(command) }
            for id in Array(sockets.keys) { closeSocket(id) }
            let (waiters, handlers, timers) = owner.shared.withLock {
                state -> ([CheckedContinuation<Message?, any Error>], [ReceiveHandler], [@Sendable () -> Void]) in
                defer {
                    state.inboxes = [:]
                    state.timedWaiters = 0
                    state.timers.removeAll()
                    state.timerActions = [:]
                }
                return (
                    state.inboxes.values.flatMap { $0.waiters.map(\.continuation) }, state.inboxes.values.compactMap(\.handler),
                    Array(state.timerActions.values)
                )
            }
            let error = ZMQError(errno: 0, message: "the I/O thread has shut down", operation: "io-thread")
            for waiter in waiters { waiter.resume(throwing: error) }
            for handler in handlers { handler(.failure(error)) }
            for timer in timers { timer() }
        }
    }
}

/// Tasks may run on the I/O thread itself: `withTaskExecutorPreference(io) { … }`, or
/// `group.addTask(executorPreference: io)`. A continuation the thread resumes (a reply read, a
/// send taken) then runs in the same turn of its loop, and what the task sends is taken at the
/// next, with no thread woken between: for tasks that do little per message, a round trip
/// costs no task switch. Such a task must never block (a synchronous file write, a lock held
/// long, a wait for another task on this thread): every socket of the thread waits for it.
/// Jobs that arrive after the thread has stopped go to the global executor. The preference
/// does not keep the `IOThread` alive: its owner keeps it while such tasks run.
extension IOThread: TaskExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let outcome = shared.withLock { state -> Bool? in
            guard !state.jobsClosed else { return nil }
            state.jobs.append(unowned)
            return state.needsWakeUp()
        }
        switch outcome {
        case true?: wakeUp.signal()
        case false?: break
        case nil: globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
        }
    }
}

/// A socket owned by an `IOThread`, usable from any task.
///
/// Several tasks may send concurrently; messages from one task keep their order. Received
/// messages are handed out in order, one per `receive()` call, to whichever task asks.
public struct AsyncSocket: Sendable, Hashable {
    let id: Int
    let thread: IOThread
    /// How long `send(_:)` waits for a peer to take a message (nil: as long as it takes).
    public let sendTimeout: Duration?

    public static func == (lhs: AsyncSocket, rhs: AsyncSocket) -> Bool {
        lhs.id == rhs.id && lhs.thread === rhs.thread
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// Sends a multipart message; returns once libzmq has queued it. Suspends (without blocking a
    /// thread) while the socket is at its high-water mark or has no peer to take it. Cancelling a
    /// send that has not been queued yet withdraws it.
    ///
    /// On a socket opened with a `sendTimeout`, a message no peer takes within it is withdrawn
    /// and the send throws a `ZMQError` whose `isWouldBlock` is true (ZMQ_SNDTIMEO's meaning).
    public func send(_ frames: [Data]) async throws {
        guard let sendTimeout else { return try await thread.send(id: id, frames: frames) }
        guard try await send(frames, timeout: sendTimeout) else {
            throw ZMQError(
                errno: EAGAIN, message: "no peer took the message within \(sendTimeout) (no live connection)", operation: "send")
        }
    }

    /// Sends a multipart message unless no peer takes it within `timeout`: returns true once
    /// libzmq has queued it, false when the time ran out first (the message is withdrawn, never
    /// sent later).
    ///
    /// Use it where the peer may be gone for good. libzmq drops a connection whose handshake
    /// failed (a CURVE key the server refused) and does not reconnect it, so a DEALER that had
    /// only that connection never becomes writable again: a plain `send` would wait forever,
    /// and only a fresh socket connects again.
    public func send(_ frames: [Data], timeout: Duration) async throws -> Bool {
        do {
            try await thread.send(id: id, frames: frames, deadline: .now + timeout)
            return true
        } catch is IOThread.SendTimedOut {
            return false
        }
    }

    /// Hands a multipart message to the I/O thread without waiting for it: `completion` runs on
    /// the I/O thread with true once libzmq has queued it, false when no peer took it by
    /// `deadline` (withdrawn, never sent later), or the error. For a caller that waits for
    /// something else anyway (a reply), so the send costs it no wake-up of its own. There is no
    /// back-pressure: the caller bounds what it posts. `completion` must return quickly (see
    /// `IOThread.ReceiveHandler`).
    ///
    /// - Returns: the send, for `withdraw(_:)`.
    @discardableResult
    public func post(
        _ frames: [Data], deadline: ContinuousClock.Instant? = nil,
        completion: @escaping @Sendable (Result<Bool, any Error>) -> Void = { _ in }
    ) -> PostedSend {
        let sendID = thread.post(id: id, frames: frames, deadline: deadline) { result in
            switch result {
            case .success: completion(.success(true))
            case .failure(let error) where error is IOThread.SendTimedOut: completion(.success(false))
            case .failure(let error): completion(.failure(error))
            }
        }
        return PostedSend(sendID: sendID)
    }

    /// A send made by `post`.
    public struct PostedSend: Sendable, Hashable {
        fileprivate let sendID: Int
    }

    /// Withdraws a posted send that no peer has taken yet: its completion gets a
    /// `CancellationError`, and it is never sent. One already taken is left alone.
    public func withdraw(_ send: PostedSend) {
        thread.post(.cancelSend(id: id, sendID: send.sendID))
    }

    /// Receives the next message, suspending until one arrives. Cancellable.
    public func receive() async throws -> Message {
        // Without a deadline the I/O thread answers with a message or an error, never nil.
        guard let message = try await thread.receive(id: id, deadline: nil) else { throw CancellationError() }
        return message
    }

    /// Receives the next message if one is already in the inbox.
    public func tryReceive() -> Message? {
        thread.tryReceive(id: id)
    }

    /// Receives the next message, or `nil` if none arrives within `timeout`. A message that
    /// arrives as the time runs out is returned, never dropped.
    public func receive(timeout: Duration) async throws -> Message? {
        try await thread.receive(id: id, deadline: .now + timeout)
    }

    /// Runs `body` with the socket on the I/O thread (set an option, subscribe, read an option).
    public func perform<R: Sendable>(_ body: @escaping @Sendable (Socket) throws -> R) async throws -> R {
        try await thread.perform(id: id, body)
    }

    /// Closes the socket; pending sends and receives fail.
    public func close() async {
        await thread.close(id: id)
    }
}
