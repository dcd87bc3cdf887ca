import Foundation
import HTTPTypes
import Hummingbird

/// `/_emulator/…`: how tests and operators drive the emulators. Documented in
/// `Sources/SwitchboardEmulators/README.md`.
extension Emulator {
    /// The control API's router. Its body limit is the emulator's; a route or method it does not
    /// have is a 404 naming both.
    func controlRouter() -> Router<EmulatorContext> {
        let router = Router(context: EmulatorContext.self)
        router.add(middleware: BodyLimit(limit: configuration.maxBodyBytes, origin: { self.origin($0) }, tooLarge: nil))
        let notFound: @Sendable (Exchange) -> Reply = { exchange in
            .json(404, ["error": .string("no control route \(exchange.method.rawValue) \(exchange.rawPath)")])
        }
        router.add(middleware: UnknownRoute(answer: notFound))
        func route(_ path: String, _ handlers: [HTTPRequest.Method: RouteHandler]) {
            router.route("_emulator/\(path)", handlers, otherwise: { exchange, _ in notFound(exchange) })
        }
        route("health", [.get: { _, _ in self.health() }])
        route("reset", [.post: { _, _ in self.reset() }])
        route(
            "faults",
            [
                .get: { _, _ in .json(200, .array(self.faults.list().map(\.json))) },
                .post: { exchange, _ in self.addFaults(exchange) },
                .delete: { _, _ in
                    self.faults.clear()
                    return .json(200, ["cleared": true])
                },
            ])
        route("faults/:id", [.delete: { _, parameters in self.removeFault(parameters.segment("id")) }])
        route("expire", [.post: { exchange, _ in self.expire(exchange) }])
        route(
            "requests",
            [
                .get: { exchange, _ in self.requests(exchange) },
                .delete: { _, _ in
                    self.log.clear()
                    return .json(200, ["cleared": true])
                },
            ])
        route("clock", [.get: { _, _ in self.clockNow() }, .post: { exchange, _ in self.advanceClock(exchange) }])
        route("save", [.post: { _, _ in self.save() }])
        return router
    }

    private var apiNames: Set<String> { Set(apis.map(\.name)) }

    private static func bad(_ message: String) -> Reply { .json(400, ["error": .string(message)]) }

    /// The body as JSON; an empty body is an empty object.
    private static func body(_ exchange: Exchange) -> JSON? { exchange.body.isEmpty ? .object([]) : JSON.parse(exchange.body) }

    private func health() -> Reply {
        .json(
            200,
            [
                "status": "ok", "apis": .array(apis.map { .string($0.name) }), "tls": .bool(configuration.tls != nil),
                "clock_offset_seconds": .double(clock.offsetSeconds),
            ])
    }

    private func reset() -> Reply {
        faults.clear()
        log.clear()
        clock.reset()
        secrets.reset()
        for api in apis { api.load(configuration.seed) }
        return .json(200, ["reset": true])
    }

    private func addFaults(_ exchange: Exchange) -> Reply {
        guard let json = Self.body(exchange) else { return Self.bad("the body is not valid JSON") }
        let items = json.elements ?? [json]
        var added: [JSON] = []
        for item in items {
            do {
                added.append(try faults.add(item, apis: apiNames).json)
            } catch {
                return Self.bad(error.message)
            }
        }
        return .json(201, json.elements == nil ? added[0] : .array(added))
    }

    private func removeFault(_ text: String) -> Reply {
        guard let id = Int(text) else { return Self.bad("fault id \(text) is not a number") }
        return faults.remove(id: id) ? .json(200, ["removed": .number(id)]) : .json(404, ["error": .string("no fault \(id)")])
    }

    private func expire(_ exchange: Exchange) -> Reply {
        guard let json = Self.body(exchange) else { return Self.bad("the body is not valid JSON") }
        let names = apiNames
        var chosen = apis
        if let name = json["api"] {
            guard let text = name.string, names.contains(text) else {
                return Self.bad("api must be one of \(names.sorted().joined(separator: ", "))")
            }
            chosen = apis.filter { $0.name == text }
        }
        return .json(200, ["expired": .object(chosen.map { ($0.name, .number($0.expireAll())) })])
    }

    private func requests(_ exchange: Exchange) -> Reply {
        let names = apiNames
        let api = exchange.query["api"]
        if let api, !names.contains(api) { return Self.bad("api must be one of \(names.sorted().joined(separator: ", "))") }
        let after = exchange.query["after"].flatMap { Int($0) } ?? 0
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return .json(
            200,
            .array(
                log.entries(api: api, after: after).map { entry in
                    [
                        "seq": .number(entry.sequence), "time": .string(formatter.string(from: entry.time)), "api": .string(entry.api),
                        "method": .string(entry.method), "path": .string(entry.path), "status": .number(entry.status),
                        "credential": .optional(entry.credential), "fault": .optional(entry.fault),
                        "ms": .double((entry.milliseconds * 1000).rounded() / 1000),
                    ]
                }))
    }

    private func clockNow() -> Reply {
        .json(200, ["offset_seconds": .double(clock.offsetSeconds), "now": .string(ISO8601DateFormatter().string(from: clock.now()))])
    }

    private func advanceClock(_ exchange: Exchange) -> Reply {
        guard let json = Self.body(exchange), let seconds = json["advance_seconds"], case let value? = Self.number(seconds), value >= 0
        else {
            return Self.bad("send {\"advance_seconds\": N} with N ≥ 0")
        }
        clock.advance(by: value)
        return .json(200, ["offset_seconds": .double(clock.offsetSeconds)])
    }

    private func save() -> Reply {
        guard configuration.statePath != nil else { return Self.bad("the emulator runs without --state; nothing to save") }
        do {
            try saveState()
            return .json(200, ["saved": true])
        } catch {
            return .json(500, ["error": .string("state not saved: \(error)")])
        }
    }

    private static func number(_ json: JSON) -> Double? {
        switch json {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
}
