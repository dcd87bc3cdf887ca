import Synchronization

/// A small mutex for state that carries no value of its own (for a value, use `Mutex`).
final class Lock: Sendable {
    private let mutex = Mutex<Void>(())

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        try mutex.withLock { _ in try body() }
    }
}
