// What `/health/ready` answers: each program names the checks that say it is connected to what
// it needs (the broker: its journal and endpoints; a worker: its group and the broker's
// ingest; a kiosk: the broker's ingest), and each check reads a state the program already
// keeps. A check must be cheap and must not block: it runs on every probe.

/// The named checks of one program.
public struct Readiness: Sendable {
    public typealias Check = @Sendable () async -> Bool

    var checks: [(name: String, check: Check)] = []

    public init() {}

    /// Adds a check; `name` is what the answer calls it (`broker`, `group`, `journal`…).
    public mutating func add(_ name: String, _ check: @escaping Check) {
        checks.append((name, check))
    }

    /// Each check's result, in the order added.
    public func evaluate() async -> [(name: String, passed: Bool)] {
        var results: [(name: String, passed: Bool)] = []
        for (name, check) in checks { results.append((name, await check())) }
        return results
    }
}
