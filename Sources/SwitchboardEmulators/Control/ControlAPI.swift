import Foundation
import HTTPTypes

/// `/_emulator/…`: how tests and operators drive the emulators. Documented in
/// `Sources/SwitchboardEmulators/README.md`.
extension Emulator {
    func control(_ exchange: Exchange) -> Reply {
        let s = Array(exchange.segments.dropFirst())
        let method = exchange.method
        func bad(_ message: String) -> Reply { .json(400, ["error": .string(message)]) }
        func body() -> JSON? { exchange.body.isEmpty ? .object([]) : JSON.parse(exchange.body) }
        let names = Set(apis.map(\.name))
        switch (method, s) {
        case (.get, ["health"]):
            return .json(
                200,
                [
                    "status": "ok", "apis": .array(apis.map { .string($0.name) }), "tls": .bool(configuration.tls != nil),
                    "clock_offset_seconds": .double(clock.offsetSeconds),
                ])
        case (.post, ["reset"]):
            faults.clear()
            log.clear()
            clock.reset()
            secrets.reset()
            for api in apis { api.load(configuration.seed) }
            return .json(200, ["reset": true])
        case (.get, ["faults"]):
            return .json(200, .array(faults.list().map(\.json)))
        case (.post, ["faults"]):
            guard let json = body() else { return bad("the body is not valid JSON") }
            let items = json.elements ?? [json]
            var added: [JSON] = []
            for item in items {
                do {
                    added.append(try faults.add(item, apis: names).json)
                } catch {
                    return bad(error.message)
                }
            }
            return .json(201, json.elements == nil ? added[0] : .array(added))
        case (.delete, ["faults"]):
            faults.clear()
            return .json(200, ["cleared": true])
        case (.delete, let path) where path.count == 2 && path[0] == "faults":
            guard let id = Int(path[1]) else { return bad("fault id \(path[1]) is not a number") }
            return faults.remove(id: id) ? .json(200, ["removed": .number(id)]) : .json(404, ["error": .string("no fault \(id)")])
        case (.post, ["expire"]):
            guard let json = body() else { return bad("the body is not valid JSON") }
            var chosen = apis
            if let name = json["api"] {
                guard let text = name.string, names.contains(text) else {
                    return bad("api must be one of \(names.sorted().joined(separator: ", "))")
                }
                chosen = apis.filter { $0.name == text }
            }
            return .json(200, ["expired": .object(chosen.map { ($0.name, .number($0.expireAll())) })])
        case (.get, ["requests"]):
            let api = exchange.query["api"]
            if let api, !names.contains(api) { return bad("api must be one of \(names.sorted().joined(separator: ", "))") }
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
        case (.delete, ["requests"]):
            log.clear()
            return .json(200, ["cleared": true])
        case (.get, ["clock"]):
            return .json(
                200,
                ["offset_seconds": .double(clock.offsetSeconds), "now": .string(ISO8601DateFormatter().string(from: clock.now()))])
        case (.post, ["clock"]):
            guard let json = body(), let seconds = json["advance_seconds"], case let value? = Self.number(seconds), value >= 0 else {
                return bad("send {\"advance_seconds\": N} with N ≥ 0")
            }
            clock.advance(by: value)
            return .json(200, ["offset_seconds": .double(clock.offsetSeconds)])
        case (.post, ["save"]):
            guard configuration.statePath != nil else { return bad("the emulator runs without --state; nothing to save") }
            do {
                try saveState()
                return .json(200, ["saved": true])
            } catch {
                return .json(500, ["error": .string("state not saved: \(error)")])
            }
        default:
            return .json(404, ["error": .string("no control route \(method.rawValue) \(exchange.rawPath)")])
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
