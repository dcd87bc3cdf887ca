import Foundation
import HTTPTypes
import Hummingbird
import Logging
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

/// Writes each request to an emulated API into the request log once it is answered: the masked
/// path and query, the status (0 for a dropped connection), the credential's label, the fault
/// injected (from `FaultInjection`'s mark, which goes no further) and the time taken.
struct RequestLogging: RouterMiddleware {
    typealias Context = EmulatorContext

    let emulator: Emulator
    let api: any EmulatedAPI

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        var response = try await next(request, context)
        let fault = response.headers[FaultInjection.mark]
        response.headers[FaultInjection.mark] = nil
        let closed = response.headers[CloseConnectionHandler.closeMarker] != nil
        record(context.exchange, status: closed ? 0 : response.status.code, fault: fault, started: started)
        return response
    }

    private func record(_ exchange: Exchange, status: Int, fault: String?, started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        let secrets = emulator.secrets
        let credential = api.credentialLabel(for: exchange)
        var shown = secrets.maskPath(exchange.segments)
        if !exchange.query.isEmpty {
            shown +=
                "?"
                + exchange.query.sorted { $0.key < $1.key }.map { name, value in
                    let lowered = name.lowercased()
                    let masked =
                        lowered.contains("password") || lowered.contains("token") || lowered.contains("key")
                        ? "‹\(secrets.label(for: value) ?? "secret")›" : secrets.mask(value)
                    return "\(name)=\(masked)"
                }.joined(separator: "&")
        }
        let now = emulator.clock.now()
        emulator.log.append { sequence in
            RequestLog.Entry(
                sequence: sequence, time: now, api: api.name, method: exchange.method.rawValue, path: shown, status: status,
                credential: credential, fault: fault,
                milliseconds: Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
        }
        emulator.logger.debug(
            "\(exchange.method.rawValue) \(shown) → \(status == 0 ? "closed" : String(status))", metadata: ["api": "\(api.name)"])
    }
}
