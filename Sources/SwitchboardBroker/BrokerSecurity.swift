import Foundation
public import Logging
import SwitchboardProtocol
public import SwitchboardSecurity
import Synchronization
public import ZeroMQ

/// CURVE and ZAP for every endpoint of a broker (protocol/README.md, section 13): the broker's
/// own key, the allow-list of principals, and the per-endpoint ZAP decisions.
public final class BrokerSecurity: Sendable {
    public let certificate: Certificate
    public let keys: CurveKeyPair
    public let allowList: AllowList
    private let logger: Logger
    private let counters = Mutex<[String: Int]>([:])
    private let notices = Mutex(NoticeQueue())
    private let wakeUp = Mutex<WakeUpSignal?>(nil)
    private let lines = Mutex(RefusalLines())

    /// The log lines of refusals, limited like the events (`noticesPerSecond`) but apart from
    /// them: connection refusals (ZAP denials, failed handshakes) and message refusals, each by
    /// kind. Called from the ZAP handler's thread and the broker threads.
    struct RefusalLines {
        var connections = LogLimiter(perInterval: BrokerSecurity.refusalLinesPerSecond)
        var messages = LogLimiter(perInterval: BrokerSecurity.refusalLinesPerSecond)
    }

    /// At most this many log lines a second for each kind of refusal (connection refusals and
    /// message refusals apart); the rest are counted in the next line (`suppressed=N`) or in a
    /// summary a second later. One client with an unknown key reconnecting in a loop made 1,161
    /// lines a second before; the counters (`refusals`) and `security.refused` events still see
    /// every refusal.
    static let refusalLinesPerSecond = 5

    /// A refusal, waiting to be journaled as a `security.refused` event by the broker thread.
    public struct Notice: Sendable, Hashable {
        public var kind: String
        public var principal: String?
        public var endpoint: String?
        public var reason: String
        /// Refusals not journaled one by one before this one (rate limit).
        public var suppressed: Int
        public var time: String
    }

    struct NoticeQueue {
        var queue: [Notice] = []
        var windowStart = ContinuousClock.now
        var inWindow = 0
        var suppressed = 0
    }

    /// At most this many refusals per second become events; the rest are counted in the next one.
    static let noticesPerSecond = 50

    /// The broker thread's wake-up, so a refusal on another thread is journaled promptly.
    func attach(_ signal: WakeUpSignal) { wakeUp.withLock { $0 = signal } }

    func record(_ kind: String, principal: String?, endpoint: String?, reason: String) {
        let queued = notices.withLock { state -> Bool in
            let now = ContinuousClock.now
            if now - state.windowStart >= .seconds(1) {
                state.windowStart = now
                state.inWindow = 0
            }
            guard state.inWindow < Self.noticesPerSecond else {
                state.suppressed += 1
                return false
            }
            state.inWindow += 1
            state.queue.append(
                Notice(
                    kind: kind, principal: principal, endpoint: endpoint, reason: reason, suppressed: state.suppressed,
                    time: Timestamp.now()))
            state.suppressed = 0
            return true
        }
        if queued { wakeUp.withLock { $0 }?.signal() }
    }

    func takeNotices() -> [Notice] {
        notices.withLock { state in
            defer { state.queue = [] }
            return state.queue
        }
    }

    /// Loads the broker's secret certificate and the allow-list directory; the errors say which
    /// file is wrong and how.
    public init(secretFile: String, certificates: String, logger: Logger) throws {
        certificate = try Certificate.load(secretFile: secretFile)
        guard let keys = certificate.keyPair else { throw Certificate.Failure("\(secretFile) holds no secret key") }
        self.keys = keys
        allowList = try AllowList(directory: certificates)
        self.logger = logger
    }

    /// What every server socket of `endpoint` sets before it binds: CURVE server with the
    /// broker's key, its ZAP domain, and ZAP enforcement (no handler: refused, never waved in).
    public func serverOptions(_ endpoint: Endpoint) -> [SocketOption] {
        [.curveServer(true), .curveSecretKey(keys.secretKey), .zapDomain(endpoint.zapDomain), .zapEnforceDomain(true)]
    }

    /// Refusals by reason kind, for tests and status.
    public var refusals: [String: Int] { counters.withLock { $0 } }

    func count(_ kind: String) { counters.withLock { $0[kind, default: 0] += 1 } }

    /// The ZAP decision: CURVE only, a known and unexpired key, a role allowed on this endpoint.
    /// The user id is the principal's name.
    public func authenticate(_ request: ZAPRequest) -> ZAPDecision {
        func deny(_ kind: String, _ reason: String, principal: String? = nil) -> ZAPDecision {
            count(kind)
            record(kind, principal: principal, endpoint: Endpoint(zapDomain: request.domain)?.rawValue, reason: reason)
            log(
                kind, connection: true,
                [
                    "domain": "\(request.domain)", "address": "\(request.address)", "mechanism": "\(request.mechanism)",
                    "principal": "\(principal ?? "-")", "reason": "\(reason)",
                ])
            return .deny(reason: reason)
        }
        guard let endpoint = Endpoint(zapDomain: request.domain) else { return deny("domain", "unknown ZAP domain '\(request.domain)'") }
        guard request.mechanism == "CURVE", let key = request.curvePublicKey else {
            return deny("mechanism", "mechanism \(request.mechanism) is not accepted; CURVE only")
        }
        guard let certificate = allowList.certificate(for: key) else {
            return deny("unknown-key", "unknown key \(key.z85.prefix(8))…")
        }
        if certificate.isExpired() {
            return deny("expired", "the certificate of '\(certificate.name)' has expired", principal: certificate.name)
        }
        if let reason = Policy.connect(certificate.role, to: endpoint) {
            return deny("role", "\(certificate.name): \(reason)", principal: certificate.name)
        }
        return .allow(userID: certificate.name)
    }

    /// The role of a principal named by `User-Id` now (nil: no longer allowed).
    public func role(of userID: String?) -> Role? { certificate(of: userID)?.role }

    /// The certificate of a principal named by `User-Id` now (nil: no longer allowed).
    public func certificate(of userID: String?) -> Certificate? {
        guard let userID, let certificate = allowList.certificate(named: userID), !certificate.isExpired() else { return nil }
        return certificate
    }

    /// Reloads the allow-list; a failed reload keeps the old list and says why.
    /// - Returns: the principals no longer allowed (their connections should be closed).
    @discardableResult
    public func reload(reason: String) -> [Certificate] {
        do {
            let gone = try allowList.reload()
            logger.notice(
                "allow-list reloaded",
                metadata: [
                    "reason": "\(reason)", "principals": "\(allowList.count)", "revoked": "\(gone.map(\.name).joined(separator: ","))",
                ])
            return gone
        } catch {
            logger.error("allow-list not reloaded; the previous one stays", metadata: ["reason": "\(reason)", "error": "\(error)"])
            return []
        }
    }

    /// Logs, counts and journals a refused message, or with `connection` a connection refused
    /// outside ZAP (a failed handshake). No secret is in `reason`.
    func refused(_ kind: String, principal: String?, endpoint: Endpoint, reason: String, connection: Bool = false) {
        count(kind)
        record(kind, principal: principal, endpoint: endpoint.rawValue, reason: reason)
        log(kind, connection: connection, ["principal": "\(principal ?? "-")", "endpoint": "\(endpoint.rawValue)", "reason": "\(reason)"])
    }

    /// Writes a refusal's line unless its kind is flooding (`refusalLinesPerSecond`).
    private func log(_ kind: String, connection: Bool, _ metadata: Logger.Metadata, at now: ContinuousClock.Instant = .now) {
        let suppressed = lines.withLock { lines in
            connection ? lines.connections.admit(kind, at: now) : lines.messages.admit(kind, at: now)
        }
        guard let suppressed else { return }
        var metadata = metadata
        metadata["kind"] = "\(kind)"
        logger.warning(connection ? "connection refused" : "message refused", metadata: withSuppressed(suppressed, metadata))
    }

    /// Summaries of refusal lines left out whose kind has been quiet for a second since, so a
    /// flood that stops is still counted in the log. The broker thread calls this at each of
    /// its heartbeats.
    public func logSuppressedRefusals(at now: ContinuousClock.Instant = .now) {
        let (connections, messages) = lines.withLock { ($0.connections.summaries(at: now), $0.messages.summaries(at: now)) }
        for (summaries, what) in [(connections, "connection"), (messages, "message")] {
            for summary in summaries {
                logger.warning(
                    "\(what) refusals left out of the log",
                    metadata: ["kind": "\(summary.kind)", "suppressed": "\(summary.suppressed)"])
            }
        }
    }
}
