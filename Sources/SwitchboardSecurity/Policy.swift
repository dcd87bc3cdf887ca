import SwitchboardProtocol

/// The broker's endpoints, as ZAP sees them (each server socket sets its own ZAP domain).
public enum Endpoint: String, Sendable, CaseIterable {
    case ingest, fanout, replay, service, groups

    public var zapDomain: String { "switchboard.\(rawValue)" }

    public init?(zapDomain: String) {
        guard zapDomain.hasPrefix("switchboard."), let endpoint = Endpoint(rawValue: String(zapDomain.dropFirst("switchboard.".count)))
        else { return nil }
        self = endpoint
    }
}

/// The authorisation table of protocol/README.md section 13: what each role may do. Every
/// function returns nil when allowed, or the reason for the refusal (no secret in it).
public enum Policy {
    /// Which roles may connect to which endpoint (checked by the ZAP handler).
    public static func connect(_ role: Role, to endpoint: Endpoint) -> String? {
        let allowed: Bool
        switch (endpoint, role) {
        case (_, .broker): allowed = false
        case (.ingest, .kiosk), (.ingest, .worker), (.ingest, .auth): allowed = true
        case (.ingest, _): allowed = false
        // A kiosk reads no one's events live; on replay it sees only the outcomes of its own
        // (`kioskOutcomeFamilies`, section 13.3), for its desk's journey.
        case (.fanout, .kiosk): allowed = false
        case (.replay, .kiosk): allowed = true
        case (.fanout, _), (.replay, _): allowed = true
        case (.service, _): allowed = true
        // Consumer groups: workers consume, operators look and act; kiosks and auth have no group.
        case (.groups, .worker), (.groups, .admin), (.groups, .monitor): allowed = true
        case (.groups, _): allowed = false
        }
        return allowed ? nil : "role \(role) may not connect to the \(endpoint.rawValue) endpoint"
    }

    /// What a kiosk may replay: the events that report what became of an event it published
    /// (their content's `bus_seq` names it): dead letters, the FileMaker writer's records and the
    /// ETO worker's responses. None carries personal data.
    public static let kioskOutcomeFamilies = ["dlq.", "filemaker.record.", "eto.response."]

    /// Event families only the broker makes (dead letters, refusals, group changes): no role
    /// publishes them, whatever its name.
    public static let brokerFamilies = ["dlq.", "security.", "groups."]

    /// The event family whose facts only one role may state: the Directory's people
    /// (`person.*`, protocol section 16.3) come only from its syncer, `worker:directory`. A
    /// consumer such as the FileMaker staff mirror believes `source: "directory"` because the
    /// broker let no one else publish the family; requests to change the Directory go through
    /// the syncer's own outbox (`switchboard-directory add`), so no other role needs it.
    public static let directoryFamily = "person."

    /// The families `role` may publish (each a type prefix).
    public static func publishable(by role: Role) -> [String] {
        switch role {
        case .kiosk: ["checkin."]
        case .worker(let service) where service == "directory": ["directory.", directoryFamily]
        case .worker(let service): ["\(service)."]
        case .auth: ["auth."]
        case .monitor, .admin, .broker: []
        }
    }

    /// Whether `principal` (of `role`) may publish an event of `type` naming `producer`.
    public static func publish(principal: String, role: Role, type: String, producer: String) -> String? {
        guard producer == principal else {
            return "producer '\(producer)' is not the sender's principal '\(principal)'"
        }
        if let family = brokerFamilies.first(where: { type.hasPrefix($0) }) {
            return "only the broker publishes '\(family)*' events, not role \(role)"
        }
        let prefixes = publishable(by: role)
        guard prefixes.contains(where: { type.hasPrefix($0) }) else {
            let allowed = prefixes.isEmpty ? "nothing" : prefixes.map { "\($0)*" }.joined(separator: ", ")
            return "role \(role) may not publish '\(type)' (it may publish \(allowed))"
        }
        return nil
    }

    /// Whether `role` may join consumer group `group` as a member (section 15): a worker only
    /// its own service's group.
    public static func join(_ role: Role, group: String) -> String? {
        switch role {
        case .worker(let own) where own == group: nil
        case .worker(let own): "role worker:\(own) may join only group '\(own)', not '\(group)'"
        default: "role \(role) may not join a consumer group"
        }
    }

    /// Whether `role` may run the group operation `operation` (section 15.5): every role that
    /// reaches the groups endpoint may read the counts (`groups.list`, `dlq.list`, which carry no
    /// payload); only an admin may see a dead event (`dlq.show` returns its content, personal
    /// data, as section 13.3 keeps `dlq.*` replays for admins) or change anything.
    public static func groupOperation(_ role: Role, operation: String) -> String? {
        let known = GroupOperation(rawValue: operation)
        if known?.onlyReads == true || role == .admin { return nil }
        if known == .showDeadLetter {
            return "role \(role) may not run '\(operation)' (only admin may see a dead letter's event: it holds personal data)"
        }
        return "role \(role) may not run '\(operation)' (only admin may change groups and dead letters)"
    }

    /// Whether `role` may register as a worker of `service`.
    public static func register(_ role: Role, service: String) -> String? {
        switch role {
        case .worker(let own) where own == service: nil
        case .auth where service == "auth": nil
        case .worker(let own): "role worker:\(own) may serve only '\(own)', not '\(service)'"
        case .auth: "role auth may serve only 'auth', not '\(service)'"
        default: "role \(role) may not serve any service"
        }
    }

    /// Whether a worker whose certificate allows tokens of `allowed` back ends may run
    /// `operation` of the `auth` service for `backend` (the request content's `backend`; nil
    /// when it has none). `token.get` hands out a back end's secret and `token.invalidate`
    /// ends it for every worker, so both are held to the worker's own back ends; `status`
    /// shows fingerprints only. A request naming no back end reaches `auth`, which refuses it
    /// as `bad-request` without handing anything out.
    public static func token(principal: String, allowed: Set<String>, operation: String?, backend: String?) -> String? {
        guard operation == "token.get" || operation == "token.invalidate", let backend else { return nil }
        guard allowed.contains(backend) else {
            let own = allowed.isEmpty ? "none" : allowed.sorted().joined(separator: ", ")
            return "'\(principal)' may not have tokens of back end '\(backend.prefix(40))' (its certificate allows: \(own))"
        }
        return nil
    }

    /// What an admin may ask of `auth` (section 13.3): whether the accounts work, and the status.
    public static let adminAuthOperations: Set<String> = ["check", "status"]

    /// Operation names whose last segment says they only read.
    public static let readOnlyVerbs: Set<String> = ["get", "list", "search", "find", "lookup", "info", "status"]

    public static func isReadOnly(_ operation: String) -> Bool {
        operation.split(separator: ".").last.map { readOnlyVerbs.contains(String($0)) } ?? false
    }

    /// Whether `role` may call `operation` of `service` (nil operation: the body is not a
    /// readable REQUEST).
    public static func call(_ role: Role, service: String, operation: String?) -> String? {
        if service.hasPrefix("mmi.") { return nil }
        if service == "auth" {
            // An admin may ask auth whether the accounts work (`check`) and what it holds
            // (`status`: fingerprints only); never a token.
            if role == .admin, let operation, adminAuthOperations.contains(operation) { return nil }
            guard case .worker = role else {
                return role == .admin
                    ? "role admin may call only auth's \(adminAuthOperations.sorted().joined(separator: " and ")), not '\(operation ?? "?")'"
                    : "only workers may call the auth service, not role \(role)"
            }
            return nil
        }
        switch role {
        case .worker, .auth:
            return nil
        case .kiosk:
            // A kiosk finds people to check in; the Directory (staff) is none of its business.
            guard service == "eto" else { return "a kiosk may call only the eto service, not '\(service)'" }
            guard let operation, isReadOnly(operation) else {
                return
                    "a kiosk may call only the read-only operations of \(service) (…\(readOnlyVerbs.sorted().map { ".\($0)" }.joined(separator: ", ")))"
            }
            return nil
        case .monitor, .admin, .broker:
            return "role \(role) may only ask the broker (mmi.*), not call '\(service)'"
        }
    }
}
