import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// Injected faults. A rule picks requests by API, method and path (a glob where `*` matches any
/// run of characters, `/` included) and does one thing to a share of them: answer with a status
/// (in the API's own error shape, `Retry-After` on 429), answer as if the credential had expired,
/// answer with an HTML log-in page, answer with a given JSON body (a list that comes back
/// empty), close the connection without answering, or delay the request. `rate` is applied deterministically (a rate of 0.25 hits the 4th, 8th, … matching
/// request), so tests are repeatable; with `seed` it is applied at random instead (each
/// matching request is hit with probability `rate`, drawn from a generator seeded with `seed`,
/// so the same matches in the same order get the same hits), for long runs where a fixed period
/// would fall in step with a client's own fixed pattern of calls and hit the same call of it every
/// time; `count` ends a rule after that many hits.
struct FaultRule: Sendable {
    enum Kind: String, Sendable, CaseIterable {
        case status, expire, close, latency, body
        case loginPage = "login-page"
    }

    var id: Int
    var api: String?
    var method: String?
    var path: String?
    var kind: Kind
    var status: Int?
    var code: String?
    var message: String?
    var retryAfter: Int?
    var latencyMilliseconds: Int?
    /// `body` faults: the JSON answered, with `status` (default 200).
    var body: JSON?
    var rate: Double
    /// With a seed, `rate` is a probability drawn from `random`; without, a period.
    var seed: UInt64?
    var random = SplitMix64(seed: 0)
    var count: Int?
    var matched = 0
    var injected = 0

    /// Whether the latest match (the `matched`-th) is hit.
    mutating func fires() -> Bool {
        if seed != nil { return random.nextUnitInterval() < rate }
        // Deterministic rate: fire when the running total of `rate` crosses a whole number.
        return (Double(matched) * rate).rounded(.down) > (Double(matched - 1) * rate).rounded(.down)
    }

    func applies(api: String, method: String, path: String) -> Bool {
        if let wanted = self.api, wanted != api { return false }
        if let wanted = self.method, wanted.uppercased() != method { return false }
        if let pattern = self.path, !FaultRule.glob(pattern, path) { return false }
        if let count, injected >= count { return false }
        return true
    }

    static func glob(_ pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.utf8)
        let t = Array(text.utf8)
        var i = 0
        var j = 0
        var star = -1
        var mark = 0
        while j < t.count {
            if i < p.count, p[i] == t[j] {
                i += 1
                j += 1
            } else if i < p.count, p[i] == UInt8(ascii: "*") {
                star = i
                mark = j
                i += 1
            } else if star >= 0 {
                i = star + 1
                mark += 1
                j = mark
            } else {
                return false
            }
        }
        while i < p.count, p[i] == UInt8(ascii: "*") { i += 1 }
        return i == p.count
    }

    /// Reads a rule from the control API's JSON; the error names the field that is wrong.
    init(json: JSON, id: Int, apis: Set<String>) throws(EmulatorError) {
        guard json.members != nil else { throw EmulatorError("a fault must be a JSON object") }
        let known: Set<String> = [
            "api", "method", "path", "kind", "status", "code", "message", "retry_after", "latency_ms", "rate", "seed", "count", "body",
        ]
        for (key, _) in json.members ?? [] where !known.contains(key) {
            throw EmulatorError("unknown fault field \(key) (known: \(known.sorted().joined(separator: ", ")))")
        }
        self.id = id
        if let api = json["api"] {
            guard let name = api.string, apis.contains(name) else {
                throw EmulatorError("fault api must be one of \(apis.sorted().joined(separator: ", "))")
            }
            self.api = name
        }
        if let method = json["method"] {
            guard let text = method.string, !text.isEmpty else { throw EmulatorError("fault method must be text such as POST") }
            self.method = text.uppercased()
        }
        if let path = json["path"] {
            guard let text = path.string, text.hasPrefix("/") else { throw EmulatorError("fault path must be a glob starting with /") }
            self.path = text
        }
        guard let kindText = json["kind"]?.string, let kind = Kind(rawValue: kindText) else {
            throw EmulatorError("fault kind must be one of \(Kind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self.kind = kind
        if let status = json["status"] {
            let allowed = kind == .body ? 200...599 : 400...599
            guard let value = status.integer, allowed.contains(value) else {
                throw EmulatorError("fault status must be \(allowed.lowerBound)–\(allowed.upperBound)")
            }
            self.status = value
        }
        if kind == .status, self.status == nil { throw EmulatorError("a status fault needs a status") }
        if let code = json["code"] {
            guard let text = code.text else { throw EmulatorError("fault code must be text") }
            self.code = text
        }
        if let message = json["message"] {
            guard let text = message.string else { throw EmulatorError("fault message must be text") }
            self.message = text
        }
        if let retry = json["retry_after"] {
            guard let value = retry.integer, value >= 0 else { throw EmulatorError("retry_after must be whole seconds ≥ 0") }
            self.retryAfter = value
        }
        if let latency = json["latency_ms"] {
            guard let value = latency.integer, (0...60_000).contains(value) else { throw EmulatorError("latency_ms must be 0–60000") }
            self.latencyMilliseconds = value
        }
        if kind == .latency, latencyMilliseconds == nil { throw EmulatorError("a latency fault needs latency_ms") }
        if let body = json["body"] {
            guard kind == .body else { throw EmulatorError("only a body fault takes a body") }
            self.body = body
        }
        if kind == .body, self.body == nil { throw EmulatorError("a body fault needs a body (any JSON)") }
        if let rate = json["rate"] {
            guard
                case let value? = { () -> Double? in
                    switch rate {
                    case .int(let i): return Double(i)
                    case .double(let d): return d
                    default: return nil
                    }
                }(), value > 0, value <= 1
            else { throw EmulatorError("fault rate must be a number in (0, 1]") }
            self.rate = value
        } else {
            self.rate = 1
        }
        if let seed = json["seed"] {
            guard let value = seed.integer, value >= 0 else { throw EmulatorError("fault seed must be a whole number ≥ 0") }
            self.seed = UInt64(value)
            self.random = SplitMix64(seed: UInt64(value))
        }
        if let count = json["count"] {
            guard let value = count.integer, value >= 1 else { throw EmulatorError("fault count must be a whole number ≥ 1") }
            self.count = value
        }
    }

    var json: JSON {
        var pairs: [(String, JSON)] = [("id", .number(id)), ("kind", .string(kind.rawValue))]
        if let api { pairs.append(("api", .string(api))) }
        if let method { pairs.append(("method", .string(method))) }
        if let path { pairs.append(("path", .string(path))) }
        if let status { pairs.append(("status", .number(status))) }
        if let code { pairs.append(("code", .string(code))) }
        if let message { pairs.append(("message", .string(message))) }
        if let retryAfter { pairs.append(("retry_after", .number(retryAfter))) }
        if let latencyMilliseconds { pairs.append(("latency_ms", .number(latencyMilliseconds))) }
        if let body { pairs.append(("body", body)) }
        pairs.append(("rate", .double(rate)))
        if let seed { pairs.append(("seed", .number(Int(seed)))) }
        if let count { pairs.append(("count", .number(count))) }
        pairs.append(("matched", .number(matched)))
        pairs.append(("injected", .number(injected)))
        return .object(pairs)
    }
}

/// What the injector decided for one request.
struct FaultDecision: Sendable {
    var delay: Int = 0
    var action: FaultRule?
}

final class FaultInjector: Sendable {
    private struct State {
        var rules: [FaultRule] = []
        var nextID = 1
    }

    private let state = Mutex(State())

    func add(_ json: JSON, apis: Set<String>) throws(EmulatorError) -> FaultRule {
        try state.withLock { (state: inout State) throws(EmulatorError) -> FaultRule in
            let rule = try FaultRule(json: json, id: state.nextID, apis: apis)
            state.nextID += 1
            state.rules.append(rule)
            return rule
        }
    }

    func list() -> [FaultRule] { state.withLock { $0.rules } }

    func remove(id: Int) -> Bool {
        state.withLock { state in
            guard let index = state.rules.firstIndex(where: { $0.id == id }) else { return false }
            state.rules.remove(at: index)
            return true
        }
    }

    func clear() { state.withLock { $0.rules.removeAll() } }

    /// Latency rules add up; the first other rule that fires decides the answer.
    func decide(api: String, method: String, path: String) -> FaultDecision {
        state.withLock { state in
            var decision = FaultDecision()
            guard !state.rules.isEmpty else { return decision }
            for index in state.rules.indices where state.rules[index].applies(api: api, method: method, path: path) {
                if decision.action != nil, state.rules[index].kind != .latency { continue }
                state.rules[index].matched += 1
                guard state.rules[index].fires() else { continue }
                let rule = state.rules[index]
                state.rules[index].injected += 1
                if rule.kind == .latency {
                    decision.delay += rule.latencyMilliseconds ?? 0
                } else {
                    decision.action = state.rules[index]
                }
            }
            return decision
        }
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a small generator whose whole state is one word, so a
/// fault rule carries its own and a seed repeats its sequence on any machine.
struct SplitMix64: Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    mutating func nextUnitInterval() -> Double { Double(next() >> 11) / Double(UInt64(1) << 53) }
}

/// Applies the faults to an emulated API's requests: latency first, then the answer of the
/// first rule that fires instead of the route's. The answer carries `mark` (the rule's kind and
/// id) for `RequestLogging`, which takes it off.
struct FaultInjection: RouterMiddleware {
    typealias Context = EmulatorContext

    static let mark = HTTPField.Name("X-Switchboard-Emulator-Fault")!

    let faults: FaultInjector
    let api: any EmulatedAPI

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let decision = faults.decide(api: api.name, method: request.method.rawValue, path: request.uri.path)
        if decision.delay > 0 { try await Task.sleep(for: .milliseconds(decision.delay)) }
        guard let rule = decision.action else { return try await next(request, context) }
        var response = Emulator.response(reply(rule, exchange: context.exchange))
        response.headers[Self.mark] = "\(rule.kind.rawValue)#\(rule.id)"
        return response
    }

    private func reply(_ rule: FaultRule, exchange: Exchange) -> Reply {
        switch rule.kind {
        case .close: return .closeConnection
        case .expire:
            _ = api.expireAll()
            return api.expiredReply(for: exchange)
        case .loginPage:
            return .text(
                200,
                "<!DOCTYPE html><html><head><title>Log in</title></head><body><form method=\"post\" action=\"/Login.aspx\">"
                    + "<input name=\"email\"><input type=\"password\" name=\"password\"><button>Log in</button></form></body></html>",
                contentType: "text/html; charset=utf-8")
        case .body:
            return .json(rule.status ?? 200, rule.body ?? .null)
        case .status, .latency:
            let status = rule.status ?? 500
            var reply = api.failureReply(status: status, code: rule.code, message: rule.message, for: exchange)
            if status == 429 || status == 503, let retryAfter = rule.retryAfter {
                reply.headers.append(("Retry-After", String(retryAfter)))
            }
            return reply
        }
    }
}
