import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// SAP Mobile Services' registration API under `/odata/applications/{v1|latest}/{appId}/…` and
/// the proxied service root `/{appId}`, as `scpms.md` describes them. Every call authenticates
/// the user as registration does: Basic credentials of a user of the application, or none on an
/// anonymous application; missing or wrong ones get 401 with `WWW-Authenticate: Basic realm=…`,
/// the challenge URLSession-like clients wait for. Decided where the record is silent: a user
/// marked `canRegister: false` is refused registration with 403; a connection used with another
/// user's credentials is 403; an id longer than 128 characters is 400; errors carry an OData body
/// `{"error":{"code","message":{"lang","value"}}}`.
final class SAPEmulator: EmulatedAPI {
    let name = "sap"
    private let model: Mutex<SAPSeed>
    private let clock: EmulatorClock
    private let secrets: SecretBook

    init(clock: EmulatorClock, secrets: SecretBook) {
        self.clock = clock
        self.secrets = secrets
        self.model = Mutex(SAPSeed(applications: []))
    }

    func owns(_ segments: [String]) -> Bool {
        if segments.count >= 2, segments[0] == "odata", segments[1] == "applications" { return true }
        guard segments.count == 1 else { return false }
        return model.withLock { $0.applications.contains { $0.id == segments[0] } }
    }

    func load(_ seed: EmulatorSeed) {
        model.withLock { $0 = seed.sap }
        for application in seed.sap.applications {
            for user in application.users { secrets.register(user.password, label: "sap-password-of-\(user.username)") }
            for connection in application.connections { secrets.register(connection.id, kind: "sap-connection") }
        }
    }

    func save(into seed: inout EmulatorSeed) { seed.sap = model.withLock { $0 } }

    func expireAll() -> Int {
        model.withLock { model in
            var count = 0
            for index in model.applications.indices {
                count += model.applications[index].connections.count
                model.applications[index].connections.removeAll()
            }
            return count
        }
    }

    func expiredReply(for exchange: Exchange) -> Reply {
        Self.error(404, "The application connection is no longer valid. Register again.")
    }

    func failureReply(status: Int, code: String?, message: String?, for exchange: Exchange) -> Reply {
        Self.error(status, message ?? reasonPhrase(status), code: code)
    }

    func credentialLabel(for exchange: Exchange) -> String? {
        if let id = Self.connectionHeader(exchange) { return "X-SMP-APPCID \(secrets.label(for: id) ?? "unknown-connection")" }
        if case .basic(let user, _) = exchange.authorization { return "basic \(user)" }
        return nil
    }

    static func error(_ status: Int, _ message: String, code: String? = nil) -> Reply {
        .json(status, ["error": ["code": .string(code ?? String(status)), "message": ["lang": "en", "value": .string(message)]]])
    }

    static func connectionHeader(_ exchange: Exchange) -> String? {
        exchange.header("X-SMP-APPCID") ?? exchange.cookie("X-SMP-APPCID")
    }

    func addRoutes(to router: Router<EmulatorContext>) {
        let wrongMethod: RouteHandler = { exchange, _ in self.wrongMethod(for: exchange) }
        router.route(
            ":app", [.get: { exchange, parameters in self.serviceRoot(appID: parameters.segment("app"), exchange) }], otherwise: wrongMethod
        )
        for version in ["v1", "latest"] {
            router.route(
                "odata/applications/\(version)/:app/Connections",
                [.post: { exchange, parameters in self.register(appID: parameters.segment("app"), version: version, exchange) }],
                otherwise: wrongMethod)
            // `Connections(id)` or `Connections('id')`; any other resource is not found, whatever the method.
            func withConnectionID(_ body: @escaping @Sendable (String, String, Exchange) -> Reply) -> RouteHandler {
                { exchange, parameters in
                    guard let id = Self.connectionID(parameters.segment("resource")) else { return Self.error(404, "No such resource") }
                    return body(parameters.segment("app"), id, exchange)
                }
            }
            router.route(
                "odata/applications/\(version)/:app/:resource",
                [
                    .get: withConnectionID { appID, id, exchange in self.connection(appID: appID, id: id, version: version, exchange) },
                    .delete: withConnectionID { appID, id, exchange in self.delete(appID: appID, id: id, exchange) },
                ], otherwise: withConnectionID { _, _, exchange in self.wrongMethod(for: exchange) })
        }
    }

    /// The id in a `Connections(…)` resource, quoted or not.
    static func connectionID(_ resource: String) -> String? {
        guard resource.hasPrefix("Connections("), resource.hasSuffix(")") else { return nil }
        var id = String(resource.dropFirst("Connections(".count).dropLast())
        if id.hasPrefix("'"), id.hasSuffix("'"), id.count >= 2 { id = String(id.dropFirst().dropLast()) }
        return id
    }

    func unknownRoute(for exchange: Exchange) -> Reply { Self.error(404, "No such resource") }

    func wrongMethod(for exchange: Exchange) -> Reply { Self.error(405, "Method not allowed") }

    private static func connectionJSON(_ c: SAPSeed.Connection, appID: String, version: String) -> JSON {
        let uri = "/odata/applications/\(version)/\(appID)/Connections('\(c.id)')"
        return [
            "d": [
                "__metadata": ["uri": .string(uri), "type": "applications.Connection"],
                "ApplicationConnectionId": .string(c.id), "UserName": .string(c.user), "DeviceType": .string(c.deviceType),
                "DeviceModel": .string(c.deviceModel), "ApplicationVersion": .string(c.applicationVersion),
                "CreatedAt": .string(WCFDate.format(milliseconds: c.created)),
            ]
        ]
    }

    private func register(appID: String, version: String, _ exchange: Exchange) -> Reply {
        var body = JSON.object([])
        if !exchange.body.isEmpty {
            guard let parsed = JSON.parse(exchange.body), parsed.members != nil else {
                return Self.error(400, "The registration body must be a JSON object")
            }
            body = parsed
        }
        let id = randomGUID()
        let now = clock.now()
        enum Outcome {
            case created(SAPSeed.Connection)
            case refused(Reply)
        }
        let outcome: Outcome = model.withLock { model in
            guard let index = model.applications.firstIndex(where: { $0.id == appID }) else {
                return .refused(Self.error(404, "Application \(appID) does not exist"))
            }
            let application = model.applications[index]
            var userName = body["UserName"]?.string ?? ""
            switch Self.authenticate(application, exchange) {
            case .failure(let reply): return .refused(reply)
            case .success(nil): break
            case .success(let user?):
                guard application.users.contains(where: { $0.username == user && $0.canRegister }) else {
                    return .refused(Self.error(403, "User \(user) may not register devices"))
                }
                userName = user
            }
            let connection = SAPSeed.Connection(
                id: id, user: userName, deviceType: body["DeviceType"]?.string ?? "Unknown",
                deviceModel: body["DeviceModel"]?.string ?? "", applicationVersion: "1.0",
                created: Int64((now.timeIntervalSince1970 * 1000).rounded()))
            model.applications[index].connections.append(connection)
            return .created(connection)
        }
        switch outcome {
        case .refused(let reply): return reply
        case .created(let connection):
            secrets.register(connection.id, kind: "sap-connection")
            let location = "/odata/applications/\(version)/\(appID)/Connections('\(connection.id)')"
            return .json(
                201, Self.connectionJSON(connection, appID: appID, version: version),
                headers: [
                    ("Set-Cookie", "X-SMP-APPCID=\(connection.id); Path=/; HttpOnly"),
                    ("Set-Cookie", "X-SMP-SESSID=\(randomHex(bytes: 16)); Path=/; HttpOnly"), ("Location", location),
                ])
        }
    }

    /// The user a request authenticates as (nil: none, on an anonymous application), or the
    /// 401 challenge for credentials that are missing, malformed or wrong.
    private static func authenticate(_ application: SAPSeed.Application, _ exchange: Exchange) -> Result<String?, Reply> {
        switch exchange.authorization {
        case .basic(let user, let password):
            guard application.users.contains(where: { $0.username == user && $0.password == password }) else {
                return .failure(challenge(application))
            }
            return .success(user)
        case .none where application.anonymous:
            return .success(nil)
        default:
            return .failure(challenge(application))
        }
    }

    private static func challenge(_ application: SAPSeed.Application) -> Reply {
        var reply = error(401, "Authentication required")
        reply.headers.append(("WWW-Authenticate", "Basic realm=\"\(application.name)\""))
        return reply
    }

    /// The connection id a request carries, or the reply refusing it.
    private static func presented(_ exchange: Exchange) -> Result<String, Reply> {
        guard let id = connectionHeader(exchange), !id.isEmpty else {
            return .failure(error(403, "X-SMP-APPCID is required"))
        }
        guard id.count <= 128 else { return .failure(error(400, "X-SMP-APPCID is longer than 128 characters")) }
        return .success(id)
    }

    /// Runs `body` on the connection a check, delete or service-root call names (`id`, or the
    /// presented `X-SMP-APPCID` when nil), after the same checks in the real server's order: the
    /// application (404), the user's credentials (401 challenge), the presented id (403/400),
    /// the connection (404 `missing`), its owner (403).
    private func withConnection(
        appID: String, id: String?, missing: String, _ exchange: Exchange, _ body: (inout SAPSeed, Int, Int) -> Reply
    ) -> Reply {
        model.withLock { model in
            guard let app = model.applications.firstIndex(where: { $0.id == appID }) else {
                return Self.error(404, "Application \(appID) does not exist")
            }
            let user: String?
            switch Self.authenticate(model.applications[app], exchange) {
            case .failure(let reply): return reply
            case .success(let name): user = name
            }
            let presented: String
            switch Self.presented(exchange) {
            case .failure(let reply): return reply
            case .success(let value): presented = value
            }
            let wanted = id ?? presented
            guard let index = model.applications[app].connections.firstIndex(where: { $0.id == wanted }) else {
                return Self.error(404, missing)
            }
            if let user, model.applications[app].connections[index].user != user {
                return Self.error(403, "The application connection belongs to another user")
            }
            return body(&model, app, index)
        }
    }

    private func connection(appID: String, id: String, version: String, _ exchange: Exchange) -> Reply {
        withConnection(appID: appID, id: id, missing: "The application connection is no longer valid. Register again.", exchange) {
            model, app, index in
            .json(200, Self.connectionJSON(model.applications[app].connections[index], appID: appID, version: version))
        }
    }

    private func delete(appID: String, id: String, _ exchange: Exchange) -> Reply {
        withConnection(appID: appID, id: id, missing: "The application connection is unknown", exchange) { model, app, index in
            model.applications[app].connections.remove(at: index)
            return .empty(200)
        }
    }

    private func serviceRoot(appID: String, _ exchange: Exchange) -> Reply {
        withConnection(appID: appID, id: nil, missing: "The application connection is no longer valid. Register again.", exchange) {
            _, _, _ in
            .json(200, ["d": ["EntitySets": ["Shelters", "Beds", "Outreach"]]])
        }
    }
}
