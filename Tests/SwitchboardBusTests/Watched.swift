import SwitchboardTesting
import Synchronization

/// A value a test changes from its handlers and waits on: every change wakes the waits whose
/// condition now holds, so a test waits for the event, not for a poll to notice it.
final class Watched<Value: Sendable>: Sendable {
    private struct Waiter: Sendable {
        let id: Int
        let condition: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State: Sendable {
        var value: Value
        var nextID = 0
        var waiters: [Waiter] = []
        var withdrawn: Set<Int> = []
    }

    private let state: Mutex<State>

    init(_ value: Value) {
        state = Mutex(State(value: value))
    }

    var value: Value { state.withLock { $0.value } }

    func update<R: Sendable>(_ body: (inout Value) -> R) -> R {
        let (result, ready) = state.withLock { state -> (R, [CheckedContinuation<Void, Never>]) in
            let result = body(&state.value)
            let value = state.value
            let ready = state.waiters.filter { $0.condition(value) }
            state.waiters.removeAll { $0.condition(value) }
            return (result, ready.map(\.continuation))
        }
        for continuation in ready { continuation.resume() }
        return result
    }

    /// Returns once `condition` holds; throws `WaitTimedOut` if it does not within `limit`
    /// (a guard against a hang: the wait ends when the change comes).
    func wait(
        _ what: String, within limit: Duration = .seconds(30), until condition: @escaping @Sendable (Value) -> Bool
    )
        async throws
    {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        let held = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.arrival(id, condition)
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        guard held else { throw WaitTimedOut(description: "timed out after \(limit): \(what)") }
    }

    private func arrival(_ id: Int, _ condition: @escaping @Sendable (Value) -> Bool) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if condition(state.value) || state.withdrawn.remove(id) != nil { return true }
                    state.waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.withdrawn.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume()
        }
    }
}
