public import Foundation

extension Thread {
    /// Starts a thread that runs `body` under `name`, where the system shows it too (`ps -L`,
    /// `top -H`, `perf`, `/proc/PID/task/TID/comm`): operators find the broker's, the I/O
    /// thread's and the checkpointer's CPU by name.
    ///
    /// Foundation on Linux keeps a name set before `start()` to itself; only a name set by the
    /// thread on itself reaches the kernel. The kernel keeps 15 bytes and refuses a longer name
    /// whole, so the thread takes the first 15.
    @discardableResult
    public static func start(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) -> Thread {
        let shown = String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self)
        let thread = Thread {
            Thread.current.name = shown
            body()
        }
        if let stackSize { thread.stackSize = stackSize }
        thread.start()
        return thread
    }
}
