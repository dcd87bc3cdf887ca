import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// The Claris FileMaker Data API under `/fmi/data/{v1|v2|vLatest}/…`, as `filemaker.md` describes
/// it: sessions with a 15-minute idle clock and a session limit, records, finds, scripts,
/// globals, containers and metadata, every error with its code, message and HTTP status.
final class FileMakerEmulator: EmulatedAPI {
    let name = "filemaker"
    private let model = Mutex(FileMakerModel())
    private let clock: EmulatorClock
    private let secrets: SecretBook

    init(clock: EmulatorClock, secrets: SecretBook) {
        self.clock = clock
        self.secrets = secrets
    }

    func owns(_ segments: [String]) -> Bool {
        segments.count >= 2 && segments[0] == "fmi" && segments[1] == "data"
    }

    func load(_ seed: EmulatorSeed) {
        model.withLock { $0 = FileMakerModel(seed: seed.filemaker) }
        for database in seed.filemaker.databases {
            for account in database.accounts {
                secrets.register(account.password, label: "filemaker-password-of-\(account.username)")
            }
        }
    }

    func save(into seed: inout EmulatorSeed) {
        seed.filemaker = model.withLock { $0.seed() }
    }

    func expireAll() -> Int {
        model.withLock { model in
            let count = model.sessions.count
            model.sessions.removeAll()
            return count
        }
    }

    func expiredReply(for exchange: Exchange) -> Reply { Self.error(401, "952", "Invalid FileMaker Data API token (*)") }

    func failureReply(status: Int, code: String?, message: String?, for exchange: Exchange) -> Reply {
        if let code {
            return Self.error(status, code, message ?? "Injected FileMaker error")
        }
        if status >= 502 {
            // The web server in front of the Data API engine answers these, with its own page.
            let text = message ?? reasonPhrase(status)
            return .text(
                status, "<html><head><title>\(status) \(text)</title></head><body><h1>\(text)</h1></body></html>", contentType: "text/html")
        }
        return Self.error(status, "-1", message ?? reasonPhrase(status))
    }

    func credentialLabel(for exchange: Exchange) -> String? {
        switch exchange.authorization {
        case .none: return nil
        case .malformed: return "malformed authorization"
        case .basic(let user, _): return "basic \(user)"
        case .bearer(let token): return "bearer \(secrets.label(for: token) ?? "unknown-token")"
        }
    }

    // MARK: Envelope

    static let ok: JSON = [["code": "0", "message": "OK"]]

    static func success(_ response: JSON, headers: [(String, String)] = []) -> Reply {
        .json(200, ["response": response, "messages": ok], headers: headers)
    }

    static func error(_ status: Int, _ code: String, _ message: String) -> Reply {
        .json(status, ["messages": [["code": .string(code), "message": .string(message)]], "response": [:]])
    }

    static let missingAuthorization = error(401, "10", "HTTP Authorization header or OAuth headers are missing.")
    static let invalidToken = error(401, "952", "Invalid FileMaker Data API token (*)")
    static let badAccount = error(401, "212", "Invalid user account and/or password; please try again")
    static let noRecords = error(500, "401", "No records match the request")
    static let recordMissing = error(500, "101", "Record is missing")
    static let fieldMissing = error(500, "102", "Field is missing")
    static let layoutMissing = error(500, "105", "Layout is missing")
    static let modIdMismatch = error(500, "306", "Record modification ID does not match")
    static let notUnique = error(500, "504", "Value in field is not unique as required in validation option")
    static let scriptMissing = error(500, "104", "Script is missing")
    static let databaseMissing = error(500, "802", "Unable to open file")
    static let capacity = error(500, "812", "Exceeded host’s capacity")
    static func invalidParameter(_ detail: String) -> Reply { error(400, "1708", "Parameter value is invalid: \(detail)") }
    static let invalidJSON = error(400, "1710", "JSON input isn't syntactically valid")
    static let unsupportedType = error(415, "1708", "Unsupported Content-Type")
    static let unknownRoute = error(404, "3", "Command is unavailable (for example, wrong URL)")
    static let wrongMethod = error(405, "3", "Command is unavailable (for example, wrong HTTP method)")

    static func reply(_ error: DataAPIError) -> Reply {
        switch error {
        case .invalidJSON: return invalidJSON
        case .invalidParameter(let detail): return invalidParameter(detail)
        case .fieldMissing: return fieldMissing
        }
    }

    // MARK: Routing

    func unknownRoute(for exchange: Exchange) -> Reply { Self.unknownRoute }

    func wrongMethod(for exchange: Exchange) -> Reply { Self.wrongMethod }

    func addRoutes(to router: Router<EmulatorContext>) {
        let wrongMethod: RouteHandler = { _, _ in Self.wrongMethod }
        func route(_ path: String, _ handlers: [HTTPRequest.Method: RouteHandler]) { router.route(path, handlers, otherwise: wrongMethod) }
        // Container data, at the URLs record answers give (no version, no token: the URL is the
        // credential): `streaming/{database}/{table}/{record}/{field}`. Any other path under
        // `streaming` is an unknown route to a GET and the wrong method to anything else.
        let stream: RouteHandler = { exchange, _ in self.streamContainer(exchange.segments) ?? Self.unknownRoute }
        for path in ["fmi/data/streaming", "fmi/data/streaming/**"] { route(path, [.get: stream]) }
        for version in ["v1", "v2", "vLatest"] {
            let base = "fmi/data/\(version)"
            route("\(base)/productInfo", [.get: { _, _ in self.productInfo() }])
            route("\(base)/databases", [.get: { exchange, _ in self.listDatabases(exchange) }])
            route("\(base)/validateSession", [.get: { exchange, _ in self.validateSession(exchange) }])
            let database = "\(base)/databases/:database"
            route("\(database)/sessions", [.post: { exchange, p in self.logIn(exchange, database: p.segment("database")) }])
            route(
                "\(database)/sessions/:token",
                [.delete: { _, p in self.logOut(token: p.segment("token"), database: p.segment("database")) }])
            route(
                "\(database)/layouts",
                [.get: { e, p in self.authorized(e, p.segment("database")) { model, name, _ in Self.layouts(model.databases[name]!) } }])
            route(
                "\(database)/scripts",
                [.get: { e, p in self.authorized(e, p.segment("database")) { model, name, _ in Self.scripts(model.databases[name]!) } }])
            route(
                "\(database)/globals",
                [
                    .patch: { e, p in
                        self.withJSONBody(e) { body in
                            self.authorized(e, p.segment("database")) { model, name, token in Self.setGlobals(body, &model, name, token) }
                        }
                    }
                ])
            route(
                "\(database)/layouts/:layout",
                [
                    .get: { e, p in
                        self.authorized(e, p.segment("database")) { model, name, _ in
                            Self.layoutMetadata(model.databases[name]!, p.segment("layout"))
                        }
                    }
                ])
            addRecordRoutes(route, layout: "\(database)/layouts/:layout")
        }
    }

    /// The routes under `…/layouts/{layout}`: records, containers, finds and scripts.
    private func addRecordRoutes(_ route: (String, [HTTPRequest.Method: RouteHandler]) -> Void, layout: String) {
        route(
            "\(layout)/records",
            [
                .get: { e, p in
                    self.authorized(e, p.segment("database")) { model, name, token in
                        self.range(e, model, model.databases[name]!, p.segment("layout"), token)
                    }
                },
                .post: { e, p in
                    self.withJSONBody(e) { body in
                        self.authorized(e, p.segment("database")) { model, name, token in
                            self.create(body, &model, name, p.segment("layout"), token)
                        }
                    }
                },
            ])
        // A record id that is not a number is looked up (layout, then record missing) before the
        // method is, as the Data API does.
        func record(_ body: @escaping @Sendable (Exchange, Parameters, Int) -> Reply) -> RouteHandler {
            { e, p in
                guard let id = Int(p.segment("record")) else {
                    return self.authorized(e, p.segment("database")) { model, name, _ in
                        Self.table(model, model.databases[name]!, p.segment("layout")) == nil ? Self.layoutMissing : Self.recordMissing
                    }
                }
                return body(e, p, id)
            }
        }
        let wrongMethod = record { _, _, _ in Self.wrongMethod }
        var handlers: [HTTPRequest.Method: RouteHandler] = [:]
        for method in HTTPRequest.Method.routed { handlers[method] = wrongMethod }
        handlers[.get] = record { e, p, id in
            self.authorized(e, p.segment("database")) { model, name, token in
                self.getRecord(e, model, model.databases[name]!, p.segment("layout"), id, token)
            }
        }
        handlers[.patch] = record { e, p, id in
            self.withJSONBody(e) { body in
                self.authorized(e, p.segment("database")) { model, name, token in
                    self.edit(body, &model, name, p.segment("layout"), id, token)
                }
            }
        }
        handlers[.delete] = record { e, p, id in
            self.authorized(e, p.segment("database")) { model, name, _ in Self.delete(&model, name, p.segment("layout"), id) }
        }
        // Duplicate takes an empty body; a JSON content type is allowed but not required.
        handlers[.post] = record { e, p, id in
            self.authorized(e, p.segment("database")) { model, name, _ in self.duplicate(&model, name, p.segment("layout"), id) }
        }
        route("\(layout)/records/:record", handlers)
        let upload: RouteHandler = { e, p in
            guard let id = Int(p.segment("record")) else { return Self.recordMissing }
            // The repetition is 1 unless the path names one; one that is not a number is none.
            let repetition: Int? = p.get("repetition") == nil ? 1 : Int(p.segment("repetition"))
            return self.authorized(e, p.segment("database")) { model, name, _ in
                Self.upload(e, &model, name, p.segment("layout"), id, field: p.segment("field"), repetition: repetition)
            }
        }
        route("\(layout)/records/:record/containers/:field", [.post: upload])
        route("\(layout)/records/:record/containers/:field/:repetition", [.post: upload])
        route(
            "\(layout)/_find",
            [
                .post: { e, p in
                    self.withJSONBody(e) { body in
                        self.authorized(e, p.segment("database")) { model, name, token in
                            self.find(body, e, model, model.databases[name]!, p.segment("layout"), token)
                        }
                    }
                }
            ])
        route(
            "\(layout)/script/:script",
            [
                .get: { e, p in
                    self.authorized(e, p.segment("database")) { model, name, _ in
                        Self.runScript(model.databases[name]!, p.segment("layout"), p.segment("script"), parameter: e.query["script.param"])
                    }
                }
            ])
    }

    /// Content-Type and syntax checks shared by every call with a JSON body.
    private func withJSONBody(_ exchange: Exchange, _ body: (JSON) -> Reply) -> Reply {
        guard exchange.isJSONBody else { return Self.unsupportedType }
        let json: JSON
        do throws(DataAPIError) {
            json = try JSON.body(exchange.body)
        } catch {
            return Self.reply(error)
        }
        return body(json)
    }

    /// Runs `body` for a request with a live Bearer token for `database`; resets the idle clock.
    private func authorized(
        _ exchange: Exchange, _ database: String,
        _ body: (inout FileMakerModel, String, String) -> Reply
    ) -> Reply {
        let token: String
        switch exchange.authorization {
        case .none: return Self.missingAuthorization
        case .bearer(let t): token = t
        case .basic, .malformed: return Self.invalidToken
        }
        let now = clock.now()
        return model.withLock { model in
            guard var session = model.sessions[token], session.database == database else { return Self.invalidToken }
            if now.timeIntervalSince(session.lastUsed) > model.idle {
                model.sessions[token] = nil
                return Self.invalidToken
            }
            // Handlers get the database by name, never a copy of it: a copy held while a table
            // is written would make Swift copy the whole table on every write.
            guard model.databases[database] != nil else { return Self.databaseMissing }
            session.lastUsed = now
            model.sessions[token] = session
            return body(&model, database, token)
        }
    }

    // MARK: Sessions

    private func logIn(_ exchange: Exchange, database: String) -> Reply {
        guard exchange.isJSONBody else { return Self.unsupportedType }
        if !exchange.body.isEmpty {
            guard let body = JSON.parse(exchange.body) else { return Self.invalidJSON }
            guard body.members != nil else { return Self.invalidParameter("the body must be a JSON object") }
            if let sources = body["fmDataSource"] {
                guard let list = sources.elements,
                    list.allSatisfy({ $0["database"]?.string != nil && $0["username"]?.string != nil && $0["password"]?.string != nil })
                else { return Self.invalidParameter("fmDataSource must be a list of {database, username, password}") }
            }
        }
        let user: String
        let password: String
        switch exchange.authorization {
        case .none: return Self.missingAuthorization
        case .basic(let u, let p):
            user = u
            password = p
        case .bearer, .malformed: return Self.badAccount
        }
        let now = clock.now()
        let token = randomHex(bytes: 24)
        let reply: Reply = model.withLock { model in
            guard let db = model.databases[database] else { return Self.databaseMissing }
            guard let expected = db.accounts[user], expected == password else { return Self.badAccount }
            let idle = model.idle
            model.sessions = model.sessions.filter { now.timeIntervalSince($0.value.lastUsed) <= idle }
            guard model.sessions.count < model.sessionLimit else { return Self.capacity }
            model.sessions[token] = .init(token: token, database: database, account: user, lastUsed: now)
            return Self.success(["token": .string(token)], headers: [("X-FM-Data-Access-Token", token)])
        }
        if reply.status == 200 { secrets.register(token, kind: "filemaker-session") }
        return reply
    }

    private func logOut(token: String, database: String) -> Reply {
        model.withLock { model in
            guard let session = model.sessions[token], session.database == database else { return Self.invalidToken }
            model.sessions[token] = nil
            return Self.success([:])
        }
    }

    private func validateSession(_ exchange: Exchange) -> Reply {
        guard case .bearer(let token) = exchange.authorization else {
            return exchange.authorization == .none ? Self.missingAuthorization : Self.invalidToken
        }
        let now = clock.now()
        return model.withLock { model in
            guard var session = model.sessions[token], now.timeIntervalSince(session.lastUsed) <= model.idle else {
                model.sessions[token] = nil
                return Self.invalidToken
            }
            session.lastUsed = now
            model.sessions[token] = session
            return Self.success([:])
        }
    }

    // MARK: Metadata

    private func productInfo() -> Reply {
        Self.success([
            "productInfo": [
                "name": "FileMaker Data API Engine (Switchboard emulator)", "buildDate": "11/01/2026", "version": "21.1.1.40",
                "dateFormat": "MM/dd/yyyy", "timeFormat": "HH:mm:ss", "timeStampFormat": "MM/dd/yyyy HH:mm:ss",
            ]
        ])
    }

    private func listDatabases(_ exchange: Exchange) -> Reply {
        guard case .basic(let user, let password) = exchange.authorization else {
            return exchange.authorization == .none ? Self.missingAuthorization : Self.badAccount
        }
        return model.withLock { model in
            let visible = model.databaseOrder.filter { model.databases[$0]?.accounts[user] == password }
            guard !visible.isEmpty else { return Self.badAccount }
            return Self.success(["databases": .array(visible.map { ["name": .string($0)] })])
        }
    }

    private static func layouts(_ db: FileMakerModel.Database) -> Reply {
        success(["layouts": .array(db.layoutOrder.map { ["name": .string($0), "table": .string(db.layouts[$0] ?? "")] })])
    }

    private static func scripts(_ db: FileMakerModel.Database) -> Reply {
        success(["scripts": .array(db.scriptOrder.map { ["name": .string($0), "isFolder": false] })])
    }

    private static func layoutMetadata(_ db: FileMakerModel.Database, _ layout: String) -> Reply {
        guard let tableName = db.layouts[layout], let table = db.tables[tableName] else { return layoutMissing }
        func metadata(_ table: FileMakerModel.Table, prefix: String) -> JSON {
            .array(
                table.fields.map { field in
                    [
                        "name": .string(prefix + field.name), "type": "normal",
                        "displayType": field.type == "container" ? "container" : "editText", "result": .string(field.type),
                        "global": .bool(field.global), "autoEnter": .bool(field.autoEnter != nil), "fourDigitYear": false, "maxRepeat": 1,
                        "maxCharacters": 0, "notEmpty": false, "numeric": .bool(field.type == "number"), "timeOfDay": false,
                        "repetitionStart": 1, "repetitionEnd": 1,
                    ]
                })
        }
        let portals: [(String, JSON)] = (db.portals[layout] ?? []).compactMap { portal in
            db.tables[portal.table].map { (portal.name, metadata($0, prefix: "\(portal.table)::")) }
        }
        return success(["fieldMetaData": metadata(table, prefix: ""), "portalMetaData": .object(portals), "valueLists": []])
    }

    // MARK: Records

    private static func table(_ model: FileMakerModel, _ db: FileMakerModel.Database, _ layout: String) -> FileMakerModel.Table? {
        db.layouts[layout].flatMap { db.tables[$0] }
    }

    /// What a record shows in one field: a global's session value, a container's absolute
    /// streaming URL (empty when nothing was uploaded), else the stored value.
    private static func fieldJSON(
        _ field: FileMakerModel.Field, _ record: FileMakerModel.Record, _ table: FileMakerModel.Table, _ context: RenderContext
    ) -> JSON {
        if field.global { return context.globals["\(table.name)::\(field.name)"] ?? "" }
        if field.type == "container" {
            guard record.containers[field.name] != nil else { return "" }
            let path = [context.database, table.name, String(record.id), field.name].map(Exchange.encodePathSegment).joined(separator: "/")
            return .string("\(context.origin)/fmi/data/streaming/\(path)")
        }
        return record.values[field.name] ?? ""
    }

    /// What every record of one answer shares.
    private struct RenderContext {
        var database: String
        var origin: String
        var globals: [String: JSON]
    }

    /// One portal of an answer: which rows it shows, and the related records of every record of
    /// the page, found in one pass over the related table.
    private struct PortalRows {
        var window: PortalWindow
        var related: FileMakerModel.Table
        /// Folded match value → related record ids in creation order.
        var groups: [String: [Int]]

        init?(_ window: PortalWindow, page: [FileMakerModel.Record], db: FileMakerModel.Database) {
            guard let related = db.tables[window.portal.table] else { return nil }
            self.window = window
            self.related = related
            let keys = Set(page.compactMap { FileMakerModel.Table.fold($0.values[window.portal.matchField]) })
            var groups: [String: [Int]] = [:]
            if !keys.isEmpty {
                for id in related.order {
                    guard let key = FileMakerModel.Table.fold(related.records[id]?.values[window.portal.relatedField]),
                        keys.contains(key)
                    else { continue }
                    groups[key, default: []].append(id)
                }
            }
            self.groups = groups
        }

        func ids(for record: FileMakerModel.Record) -> [Int] {
            FileMakerModel.Table.fold(record.values[window.portal.matchField]).flatMap { groups[$0] } ?? []
        }
    }

    private static func recordJSON(
        _ record: FileMakerModel.Record, _ table: FileMakerModel.Table, _ portals: [PortalRows], _ context: RenderContext
    ) -> JSON {
        var fieldData: [(String, JSON)] = []
        fieldData.reserveCapacity(table.fields.count)
        for field in table.fields { fieldData.append((field.name, fieldJSON(field, record, table, context))) }
        var members: [(String, JSON)] = [("fieldData", .object(fieldData))]
        var portalData: [(String, JSON)] = []
        var portalInfo: [JSON] = []
        for portal in portals {
            let ids = portal.ids(for: record)
            let rows: [JSON] = ids.dropFirst(portal.window.start - 1).prefix(portal.window.count).compactMap { id in
                guard let row = portal.related.records[id] else { return nil }
                var members: [(String, JSON)] = [("recordId", .string(String(row.id)))]
                for field in portal.related.fields {
                    members.append(("\(portal.related.name)::\(field.name)", fieldJSON(field, row, portal.related, context)))
                }
                members.append(("modId", .string(String(row.modId))))
                return .object(members)
            }
            portalData.append((portal.window.portal.name, .array(rows)))
            portalInfo.append([
                "portalObjectName": .string(portal.window.portal.name), "database": .string(context.database),
                "table": .string(portal.related.name), "foundCount": .number(ids.count), "returnedCount": .number(rows.count),
            ])
        }
        members.append(("portalData", .object(portalData)))
        if !portals.isEmpty { members.append(("portalDataInfo", .array(portalInfo))) }
        members += [("recordId", .string(String(record.id))), ("modId", .string(String(record.modId)))]
        return .object(members)
    }

    private static func foundSet(
        _ records: [FileMakerModel.Record], found: Int, _ table: FileMakerModel.Table, _ layout: String, _ db: FileMakerModel.Database,
        portals windows: [PortalWindow], _ context: RenderContext
    ) -> Reply {
        let portals = windows.compactMap { PortalRows($0, page: records, db: db) }
        return success([
            "dataInfo": [
                "database": .string(db.name), "layout": .string(layout), "table": .string(table.name),
                "totalRecordCount": .number(table.records.count), "foundCount": .number(found), "returnedCount": .number(records.count),
            ],
            "data": .array(records.map { recordJSON($0, table, portals, context) }),
        ])
    }

    /// The rows one portal shows: 1-based `start`, at most `count`.
    private struct PortalWindow {
        var portal: FileMakerModel.Portal
        var start: Int
        var count: Int
    }

    /// What a find or a range checks its parameters against.
    private static func findLayout(_ table: FileMakerModel.Table, _ db: FileMakerModel.Database, _ layout: String) -> FindLayout {
        FindLayout(name: layout, field: { table.field($0)?.name }, portals: (db.portals[layout] ?? []).map(\.name))
    }

    /// The declared portals of `FindRequest.portals`'s answer, with their windows.
    private static func portalWindows(_ portals: [FindRequest.Portal], _ db: FileMakerModel.Database, layout: String) -> [PortalWindow] {
        let declared = db.portals[layout] ?? []
        return portals.compactMap { chosen in
            declared.first { $0.name == chosen.name }.map { PortalWindow(portal: $0, start: chosen.start, count: chosen.count) }
        }
    }

    /// The portal part of a GET's query: `portal` (JSON text, so 1710 when it is not JSON) and
    /// `_offset.<portal>`/`_limit.<portal>`, read with or without the underscore as `_offset`
    /// and `_limit` are (the underscored one wins).
    private static func portalWindows(
        _ exchange: Exchange, _ table: FileMakerModel.Table, _ db: FileMakerModel.Database, layout: String
    ) -> Result<[PortalWindow], Reply> {
        var selection: JSON?
        if let text = exchange.query["portal"] {
            guard let parsed = JSON.parse(Data(text.utf8)) else { return .failure(invalidJSON) }
            selection = parsed
        }
        var parameters: [String: JSON] = [:]
        for (key, value) in exchange.query {
            let plain = key.hasPrefix("_") ? String(key.dropFirst()) : key
            guard plain.hasPrefix("offset.") || plain.hasPrefix("limit.") else { continue }
            if key.hasPrefix("_") || parameters[plain] == nil { parameters[plain] = .string(value) }
        }
        do throws(DataAPIError) {
            let portals = try FindRequest.portals(findLayout(table, db, layout), selection: selection, parameters: parameters)
            return .success(portalWindows(portals, db, layout: layout))
        } catch {
            return .failure(reply(error))
        }
    }

    private static func sorted(_ records: [FileMakerModel.Record], by spec: [FindRequest.SortKey]) -> [FileMakerModel.Record] {
        guard !spec.isEmpty else { return records }
        return records.sorted { a, b in
            for key in spec {
                let order = FindCriterion.compare(a.values[key.field]?.text ?? "", b.values[key.field]?.text ?? "")
                if order != 0 { return key.ascending ? order < 0 : order > 0 }
            }
            return a.id < b.id
        }
    }

    private func range(
        _ exchange: Exchange, _ model: FileMakerModel, _ db: FileMakerModel.Database, _ layout: String, _ token: String
    ) -> Reply {
        guard let table = Self.table(model, db, layout) else { return Self.layoutMissing }
        let offsetText = exchange.query["_offset"] ?? exchange.query["offset"]
        let limitText = exchange.query["_limit"] ?? exchange.query["limit"]
        let start: Int
        let count: Int
        do throws(DataAPIError) {
            (start, count) = try FindRequest.window(offset: offsetText.map(JSON.string), limit: limitText.map(JSON.string))
        } catch {
            return Self.reply(error)
        }
        var sortJSON: JSON?
        if let text = exchange.query["_sort"] ?? exchange.query["sort"] {
            guard let parsed = JSON.parse(Data(text.utf8)) else { return Self.invalidJSON }
            sortJSON = parsed
        }
        let spec: [FindRequest.SortKey]
        do throws(DataAPIError) {
            spec = try FindRequest.sortKeys(sortJSON) { table.field($0)?.name }
        } catch {
            return Self.reply(error)
        }
        let portals: [PortalWindow]
        switch Self.portalWindows(exchange, table, db, layout: layout) {
        case .failure(let reply): return reply
        case .success(let windows): portals = windows
        }
        let context = context(exchange, model, db, token)
        guard !spec.isEmpty else {
            // Creation order, as the table keeps it: only the page's records are read. (A count
            // asked with `_limit=1` many times a second must not copy every record each time.)
            let page = table.order.dropFirst(start - 1).prefix(count).compactMap { table.records[$0] }
            return Self.foundSet(page, found: table.order.count, table, layout, db, portals: portals, context)
        }
        let all = Self.sorted(table.order.compactMap { table.records[$0] }, by: spec)
        let page = Array(all.dropFirst(start - 1).prefix(count))
        return Self.foundSet(page, found: all.count, table, layout, db, portals: portals, context)
    }

    private func context(_ exchange: Exchange, _ model: FileMakerModel, _ db: FileMakerModel.Database, _ token: String) -> RenderContext {
        RenderContext(database: db.name, origin: exchange.origin, globals: model.sessions[token]?.globals ?? [:])
    }

    private func getRecord(
        _ exchange: Exchange, _ model: FileMakerModel, _ db: FileMakerModel.Database, _ layout: String, _ id: Int, _ token: String
    ) -> Reply {
        guard let table = Self.table(model, db, layout) else { return Self.layoutMissing }
        guard let record = table.records[id] else { return Self.recordMissing }
        let portals: [PortalWindow]
        switch Self.portalWindows(exchange, table, db, layout: layout) {
        case .failure(let reply): return reply
        case .success(let windows): portals = windows
        }
        return Self.foundSet([record], found: 1, table, layout, db, portals: portals, context(exchange, model, db, token))
    }

    /// Checks and converts `fieldData` for a write; globals go to the session.
    private static func fieldValues(
        _ fieldData: JSON?, _ table: FileMakerModel.Table, required: Bool
    ) -> Result<
        (values: [String: JSON], globals: [String: JSON]), Reply
    > {
        guard let fieldData else {
            return required ? .failure(invalidParameter("fieldData is required")) : .success(([:], [:]))
        }
        guard let members = fieldData.members else { return .failure(invalidParameter("fieldData must be an object")) }
        var values: [String: JSON] = [:]
        var globals: [String: JSON] = [:]
        for (name, value) in members {
            guard let field = table.field(name) else { return .failure(fieldMissing) }
            guard field.type != "container" else {
                return .failure(invalidParameter("container field \(field.name) takes an upload, not fieldData"))
            }
            let stored: JSON
            switch value {
            case .string(let text):
                if field.type == "number", let number = Double(text.trimmingCharacters(in: .whitespaces)) {
                    stored = number.rounded() == number && abs(number) < 1e15 ? .int(Int64(number)) : .double(number)
                } else {
                    stored = .string(text)
                }
            case .int, .double: stored = field.type == "number" ? value : .string(value.text ?? "")
            default:
                return .failure(invalidParameter("field \(field.name) takes text or a number"))
            }
            if field.global {
                globals["\(table.name)::\(field.name)"] = stored
            } else {
                values[field.name] = stored
            }
        }
        return .success((values, globals))
    }

    private func autoEnter(_ values: inout [String: JSON], _ table: inout FileMakerModel.Table) {
        for field in table.fields {
            switch field.autoEnter {
            case "serial":
                values[field.name] = .int(Int64(table.nextSerial))
                table.nextSerial += 1
            case "creationTimestamp":
                values[field.name] = .string(Self.timestamp(clock.now()))
            default: break
            }
        }
    }

    /// `MM/dd/yyyy HH:mm:ss` in UTC, computed directly (Foundation's Calendar costs more than
    /// the rest of a create).
    static func timestamp(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : String(n) }
        return "\(two(month))/\(two(day))/\(year) \(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60))"
    }

    private func create(_ body: JSON, _ model: inout FileMakerModel, _ name: String, _ layout: String, _ token: String) -> Reply {
        // Writing related records through a portal is not emulated: create them on their own
        // layout. An empty `portalData` is what clients send by default, and is fine.
        if let portal = body["portalData"], portal.members.map({ !$0.isEmpty }) ?? true {
            return Self.invalidParameter("the emulator does not write portal rows; create related records on their own layout")
        }
        var globals: [String: JSON] = [:]
        let reply =
            model.withTable(name, layout: layout) { table -> Reply in
                var values: [String: JSON]
                switch Self.fieldValues(body["fieldData"], table, required: true) {
                case .failure(let reply): return reply
                case .success(let result): (values, globals) = result
                }
                if table.violatesUnique(values, except: nil) { return Self.notUnique }
                autoEnter(&values, &table)
                let id = table.nextRecordID
                table.nextRecordID += 1
                table.put(.init(id: id, modId: 0, values: values))
                return Self.success(["recordId": .string(String(id)), "modId": "0"])
            } ?? Self.layoutMissing
        if !globals.isEmpty { model.sessions[token]?.globals.merge(globals) { _, new in new } }
        return reply
    }

    private func edit(_ body: JSON, _ model: inout FileMakerModel, _ name: String, _ layout: String, _ id: Int, _ token: String) -> Reply {
        var globals: [String: JSON] = [:]
        let reply =
            model.withTable(name, layout: layout) { table -> Reply in
                guard var record = table.records[id] else { return Self.recordMissing }
                let values: [String: JSON]
                switch Self.fieldValues(body["fieldData"], table, required: true) {
                case .failure(let reply): return reply
                case .success(let result): (values, globals) = result
                }
                if let given = body["modId"] {
                    guard let modId = given.integer else { return Self.invalidParameter("modId must be a whole number") }
                    guard modId == record.modId else { return Self.modIdMismatch }
                }
                var merged = record.values
                merged.merge(values) { _, new in new }
                if table.violatesUnique(merged, except: id) { return Self.notUnique }
                record.values = merged
                record.modId += 1
                table.put(record)
                return Self.success(["modId": .string(String(record.modId))])
            } ?? Self.layoutMissing
        if reply.status == 200, !globals.isEmpty { model.sessions[token]?.globals.merge(globals) { _, new in new } }
        return reply
    }

    private static func delete(_ model: inout FileMakerModel, _ name: String, _ layout: String, _ id: Int) -> Reply {
        model.withTable(name, layout: layout) { table in table.remove(id) ? success([:]) : recordMissing } ?? layoutMissing
    }

    private func duplicate(_ model: inout FileMakerModel, _ name: String, _ layout: String, _ id: Int) -> Reply {
        model.withTable(name, layout: layout) { table -> Reply in
            guard let original = table.records[id] else { return Self.recordMissing }
            var values = original.values
            autoEnter(&values, &table)
            if table.violatesUnique(values, except: nil) { return Self.notUnique }
            let newID = table.nextRecordID
            table.nextRecordID += 1
            table.put(.init(id: newID, modId: 0, values: values, containers: original.containers))
            return Self.success(["recordId": .string(String(newID)), "modId": "0"])
        } ?? Self.layoutMissing
    }

    private func find(
        _ body: JSON, _ exchange: Exchange, _ model: FileMakerModel, _ db: FileMakerModel.Database, _ layout: String, _ token: String
    ) -> Reply {
        guard let table = Self.table(model, db, layout) else { return Self.layoutMissing }
        let find: FindRequest
        do throws(DataAPIError) {
            find = try FindRequest.parse(body: body, layout: Self.findLayout(table, db, layout))
        } catch {
            return Self.reply(error)
        }
        let (start, count) = (find.start, find.count)
        let portals = Self.portalWindows(find.portals, db, layout: layout)
        // Requests run in order: a find request adds its matches to the found set, an omit
        // request takes its matches out. A leading omit starts from every record.
        var found = Set<Int>()
        if find.requests.first?.omit == true { found = Set(table.order) }
        for request in find.requests {
            // One `==value` criterion on a unique field is answered from its index, as an
            // indexed FileMaker field would be.
            if request.criteria.count == 1, let only = request.criteria.first, case .whole(let value) = only.criterion,
                !value.contains(where: { "*@#".contains($0) }),
                let index = table.uniqueIndex[only.field] ?? (table.field(only.field)?.unique == true ? [:] : nil)
            {
                if let id = index[value.lowercased()] {
                    if request.omit { found.remove(id) } else { found.insert(id) }
                }
                continue
            }
            for id in table.order {
                guard let record = table.records[id] else { continue }
                let hit = request.criteria.allSatisfy { $0.criterion.matches(record.values[$0.field]?.text ?? "") }
                guard hit else { continue }
                if request.omit { found.remove(id) } else { found.insert(id) }
            }
        }
        guard !found.isEmpty else { return Self.noRecords }
        // Record ids grow with creation, so ascending ids are the table's own order.
        let all = Self.sorted(found.sorted().compactMap { table.records[$0] }, by: find.sort)
        let page = Array(all.dropFirst(start - 1).prefix(count))
        guard !page.isEmpty else { return Self.noRecords }
        return Self.foundSet(page, found: all.count, table, layout, db, portals: portals, context(exchange, model, db, token))
    }

    private static func runScript(
        _ db: FileMakerModel.Database, _ layout: String, _ name: String, parameter: String?
    ) -> Reply {
        guard db.layouts[layout] != nil else { return layoutMissing }
        guard let script = db.scripts[name] else { return scriptMissing }
        switch script.action {
        case "echo":
            return success(["scriptResult": .string(parameter ?? ""), "scriptError": "0"])
        case "count":
            let count = script.layout.flatMap { db.layouts[$0] }.flatMap { db.tables[$0] }?.records.count ?? 0
            return success(["scriptResult": .string(String(count)), "scriptError": "0"])
        default:
            return success(["scriptError": .string(script.error ?? "3")])
        }
    }

    private static func setGlobals(_ body: JSON, _ model: inout FileMakerModel, _ name: String, _ token: String) -> Reply {
        guard let db = model.databases[name] else { return databaseMissing }
        guard let members = body["globalFields"]?.members else { return invalidParameter("globalFields must be an object") }
        var updates: [String: JSON] = [:]
        for (name, value) in members {
            guard let range = name.range(of: "::") else {
                return invalidParameter("global field \(name) must be written Table::Field")
            }
            let tableName = String(name[..<range.lowerBound])
            guard let table = db.tables[tableName], let field = table.field(String(name[range.upperBound...])) else { return fieldMissing }
            guard field.global else { return invalidParameter("\(name) is not a global field") }
            guard let text = value.text else { return invalidParameter("global \(name) takes text or a number") }
            updates["\(tableName)::\(field.name)"] = .string(text)
        }
        model.sessions[token]?.globals.merge(updates) { _, new in new }
        return success([:])
    }

    private static func upload(
        _ exchange: Exchange, _ model: inout FileMakerModel, _ name: String, _ layout: String, _ id: Int, field fieldName: String,
        repetition: Int?
    ) -> Reply {
        model.withTable(name, layout: layout) { table -> Reply in
            guard var record = table.records[id] else { return recordMissing }
            guard let field = table.field(fieldName) else { return fieldMissing }
            guard field.type == "container" else { return invalidParameter("\(field.name) is not a container field") }
            guard repetition == 1 else { return invalidParameter("container \(field.name) has one repetition") }
            guard exchange.mediaType == "multipart/form-data", let contentType = exchange.header("Content-Type") else {
                return unsupportedType
            }
            let parts: [MultipartPart]
            do {
                parts = try MultipartPart.parse(exchange.body, contentType: contentType)
            } catch {
                return invalidParameter("\(error)")
            }
            guard let upload = parts.first(where: { $0.name == "upload" }) else {
                return invalidParameter("the multipart body needs a part named upload")
            }
            record.containers[field.name] = .init(
                filename: upload.filename ?? "upload", contentType: upload.contentType ?? "application/octet-stream", bytes: upload.body)
            record.modId += 1
            table.put(record)
            return success(["modId": .string(String(record.modId))])
        } ?? layoutMissing
    }

    /// Serves an uploaded container's bytes: `/fmi/data/streaming/{db}/{table}/{recordId}/{field}`.
    func streamContainer(_ segments: [String]) -> Reply? {
        guard segments.count == 7, segments[2] == "streaming", let id = Int(segments[5]) else { return nil }
        return model.withLock { model in
            guard let container = model.databases[segments[3]]?.tables[segments[4]]?.records[id]?.containers[segments[6]] else {
                return Self.recordMissing
            }
            return Reply(status: 200, headers: [("Content-Type", container.contentType)], body: container.bytes)
        }
    }
}
