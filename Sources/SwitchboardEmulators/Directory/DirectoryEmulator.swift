import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// The people directory under `/directory/…`, exactly as `directory.md` defines it: users who log
/// in for an API key (plain text), and each user's list of people. Errors use Spring Boot's
/// default body. A key never expires by itself; "expire now" rotates every user's key, so old
/// keys get 404 as an unknown key would.
final class DirectoryEmulator: EmulatedAPI {
    let name = "directory"
    private let model: Mutex<DirectorySeed>
    private let clock: EmulatorClock
    private let secrets: SecretBook

    init(clock: EmulatorClock, secrets: SecretBook) {
        self.clock = clock
        self.secrets = secrets
        self.model = Mutex(DirectorySeed(users: [], people: [], nextUserID: 1, nextPersonID: 1))
    }

    func owns(_ segments: [String]) -> Bool { segments.first == "directory" }

    func load(_ seed: EmulatorSeed) {
        model.withLock { $0 = seed.directory }
        for user in seed.directory.users {
            secrets.register(user.password, label: "directory-password-of-\(user.name)")
            secrets.register(user.key, label: "directory-key-of-\(user.name)")
        }
    }

    func save(into seed: inout EmulatorSeed) { seed.directory = model.withLock { $0 } }

    func expireAll() -> Int {
        let rotated: [(String, String)] = model.withLock { model in
            var rotated: [(String, String)] = []
            for index in model.users.indices {
                let key = randomHex(bytes: 16)
                model.users[index].key = key
                rotated.append((key, model.users[index].name))
            }
            return rotated
        }
        for (key, name) in rotated { secrets.register(key, kind: "directory-key-of-\(name)") }
        return rotated.count
    }

    func expiredReply(for exchange: Exchange) -> Reply { springError(404, "Unknown API key", exchange) }

    func failureReply(status: Int, code: String?, message: String?, for exchange: Exchange) -> Reply {
        springError(status, message ?? reasonPhrase(status), exchange)
    }

    func credentialLabel(for exchange: Exchange) -> String? {
        let s = exchange.segments
        if s.count >= 3, s[1] == "people" { return "key \(secrets.label(for: s[2]) ?? "unknown-key")" }
        if s.count == 2, s[1] == "users", exchange.method == .get, let user = exchange.query["user"] { return "password of \(user)" }
        return nil
    }

    private func springError(_ status: Int, _ message: String, _ exchange: Exchange) -> Reply {
        .json(
            status,
            [
                "timestamp": .string(ISO8601DateFormatter().string(from: clock.now())), "status": .number(status),
                "error": .string(reasonPhrase(status)), "message": .string(message), "path": .string(exchange.rawPath),
            ])
    }

    private static func personJSON(_ p: DirectorySeed.Person) -> JSON {
        ["id": .number(p.id), "name": .string(p.name), "office": .string(p.office), "user": .number(p.user)]
    }

    func addRoutes(to router: Router<EmulatorContext>) {
        router.route(
            "directory/users", [.post: { exchange, _ in self.createUser(exchange) }, .get: { exchange, _ in self.logIn(exchange) }],
            otherwise: { exchange, _ in self.wrongMethod(for: exchange) })
        router.route(
            "directory/people/:key",
            [
                .get: { exchange, parameters in self.listPeople(key: parameters.segment("key"), exchange) },
                .post: { exchange, parameters in self.addPerson(key: parameters.segment("key"), exchange) },
            ], otherwise: { exchange, _ in self.wrongMethod(for: exchange) })
        router.route(
            "directory/people/:key/:id",
            [
                .delete: { exchange, parameters in
                    self.deletePerson(key: parameters.segment("key"), id: parameters.segment("id"), exchange)
                }
            ], otherwise: { exchange, _ in self.wrongMethod(for: exchange) })
    }

    func unknownRoute(for exchange: Exchange) -> Reply {
        springError(404, "No endpoint \(exchange.method.rawValue) \(exchange.rawPath)", exchange)
    }

    func wrongMethod(for exchange: Exchange) -> Reply {
        springError(405, "Request method '\(exchange.method.rawValue)' is not supported", exchange)
    }

    private func createUser(_ exchange: Exchange) -> Reply {
        guard exchange.isJSONBody else { return springError(415, "Content-Type must be application/json", exchange) }
        guard let body = JSON.parse(exchange.body), let name = body["name"]?.string, let password = body["password"]?.string,
            !name.isEmpty, !password.isEmpty
        else { return springError(400, "The body must be {\"name\":…,\"password\":…} with both non-empty", exchange) }
        let key = randomHex(bytes: 16)
        let created: Bool = model.withLock { model in
            guard !model.users.contains(where: { $0.name == name }) else { return false }
            model.users.append(.init(id: model.nextUserID, name: name, password: password, key: key))
            model.nextUserID += 1
            return true
        }
        guard created else { return springError(409, "User \(name) already exists", exchange) }
        secrets.register(password, label: "directory-password-of-\(name)")
        secrets.register(key, kind: "directory-key-of-\(name)")
        return .text(200, key)
    }

    private func logIn(_ exchange: Exchange) -> Reply {
        guard let name = exchange.query["user"], let password = exchange.query["password"] else {
            return springError(400, "Parameters user and password are required", exchange)
        }
        let key = model.withLock { model in model.users.first { $0.name == name && $0.password == password }?.key }
        guard let key else { return .empty(401) }
        return .text(200, key)
    }

    private func listPeople(key: String, _ exchange: Exchange) -> Reply {
        let people: [DirectorySeed.Person]? = model.withLock { model in
            guard let user = model.users.first(where: { $0.key == key }) else { return nil }
            return model.people.filter { $0.user == user.id }
        }
        guard let people else { return springError(404, "Unknown API key", exchange) }
        return .json(200, .array(people.map(Self.personJSON)))
    }

    private func addPerson(key: String, _ exchange: Exchange) -> Reply {
        guard exchange.isJSONBody else { return springError(415, "Content-Type must be application/json", exchange) }
        guard let body = JSON.parse(exchange.body), let name = body["name"]?.string, let office = body["office"]?.string,
            !name.isEmpty
        else { return springError(400, "The body must be {\"name\":…,\"office\":…} with a non-empty name", exchange) }
        let person: DirectorySeed.Person? = model.withLock { model in
            guard let user = model.users.first(where: { $0.key == key }) else { return nil }
            let person = DirectorySeed.Person(id: model.nextPersonID, name: name, office: office, user: user.id)
            model.nextPersonID += 1
            model.people.append(person)
            return person
        }
        guard let person else { return springError(404, "Unknown API key", exchange) }
        return .json(200, Self.personJSON(person))
    }

    private func deletePerson(key: String, id text: String, _ exchange: Exchange) -> Reply {
        enum Outcome { case deleted, unknownKey, unknownPerson }
        guard let id = Int(text) else { return springError(400, "Person id \(text) is not a number", exchange) }
        let outcome: Outcome = model.withLock { model in
            guard let user = model.users.first(where: { $0.key == key }) else { return .unknownKey }
            guard let index = model.people.firstIndex(where: { $0.id == id && $0.user == user.id }) else { return .unknownPerson }
            model.people.remove(at: index)
            return .deleted
        }
        switch outcome {
        case .deleted: return .empty(200)
        case .unknownKey: return springError(404, "Unknown API key", exchange)
        case .unknownPerson: return springError(404, "No person \(id) for this user", exchange)
        }
    }
}
