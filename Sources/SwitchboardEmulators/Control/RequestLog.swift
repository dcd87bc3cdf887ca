import Foundation
import Synchronization

/// The emulators' request log, read back through `GET /_emulator/requests`: every request to an
/// emulated API with its method, masked path, status, the credential it used (a label, never the
/// secret) and whether a fault was injected. Bounded: the oldest entries go first.
final class RequestLog: Sendable {
    struct Entry: Sendable {
        var sequence: Int
        var time: Date
        var api: String
        var method: String
        var path: String
        var status: Int
        var credential: String?
        var fault: String?
        var milliseconds: Double
    }

    private struct State {
        var entries: [Entry] = []
        var start = 0
        var next = 1
    }

    private let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int = 50_000) { self.capacity = capacity }

    func append(_ make: (Int) -> Entry) {
        state.withLock { state in
            let entry = make(state.next)
            state.next += 1
            if state.entries.count < capacity {
                state.entries.append(entry)
            } else {
                state.entries[state.start] = entry
                state.start = (state.start + 1) % capacity
            }
        }
    }

    func entries(api: String?, after: Int) -> [Entry] {
        state.withLock { state in
            let ordered = state.entries[state.start...] + state.entries[..<state.start]
            return ordered.filter { $0.sequence > after && (api == nil || $0.api == api) }
        }
    }

    func clear() { state.withLock { $0 = State(next: $0.next) } }
}
