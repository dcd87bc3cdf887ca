import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// The Directory emulator against `shared/apis/directory.md`: users and keys (plain text), the
/// people list, and the errors the page defines (Spring Boot's default body).
@Suite("Directory contract", .timeLimit(.minutes(1)))
struct DirectoryContractTests {
    static let user = "outreach-team"
    static let password = "dir-demo-Passw0rd!"
    static let key = "5f1c0a9e7b2d4c8e9a3b6d1f0e2c4a7b"
    static let otherKey = "a8d3e6f1b4c7092e5d8a1b3c6f9e2d40"

    /// Checks a Spring Boot default error body: `{timestamp,status,error,message,path}`.
    static func expectSpringError(
        _ answer: Wire.Answer, _ status: Int, error: String, path: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(answer.status == status, sourceLocation: sourceLocation)
        #expect(answer.mediaType == "application/json", sourceLocation: sourceLocation)
        let body = try answer.value
        #expect(body.keySet == ["timestamp", "status", "error", "message", "path"], sourceLocation: sourceLocation)
        #expect(body["timestamp"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
        #expect(body["status"] == .integer(Int64(status)), sourceLocation: sourceLocation)
        #expect(body["error"] == .string(error), sourceLocation: sourceLocation)
        #expect(body["message"]?.stringValue != nil, sourceLocation: sourceLocation)
        #expect(body["path"] == .string(path), sourceLocation: sourceLocation)
    }

    static func logInPath(_ user: String, _ password: String) -> String {
        "/directory/users?user=\(WireFormat.queryEncoded(user))&password=\(WireFormat.queryEncoded(password))"
    }

    // MARK: Users

    @Test func createUserAnswersThePlainTextKey() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(.POST, "/directory/users", json: ["name": "night-desk", "password": "night-Passw0rd!"])
            #expect(answer.status == 200)
            #expect(answer.mediaType == "text/plain")
            let key = answer.text
            #expect(!key.isEmpty)
            #expect(!key.contains("\"") && !key.contains("{") && !key.contains(" "))
            let login = try await wire.call(.GET, Self.logInPath("night-desk", "night-Passw0rd!"))
            #expect(login.status == 200)
            #expect(login.text == key)
        }
    }

    @Test func duplicateUserNameIs409() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(.POST, "/directory/users", json: ["name": Self.user, "password": "another-Passw0rd!"])
            try Self.expectSpringError(answer, 409, error: "Conflict", path: "/directory/users")
            // The existing user's password is unchanged.
            #expect(try await wire.call(.GET, Self.logInPath(Self.user, Self.password)).text == Self.key)
        }
    }

    @Test func logInAnswersTheKeyAsPlainText() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(.GET, Self.logInPath(Self.user, Self.password))
            #expect(answer.status == 200)
            #expect(answer.mediaType == "text/plain")
            #expect(answer.text == Self.key)
        }
    }

    @Test func badLogInIs401WithAnEmptyBody() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            for (user, password) in [(Self.user, "wrong-Passw0rd!"), ("nobody", Self.password), (Self.user, "")] {
                let answer = try await wire.call(.GET, Self.logInPath(user, password))
                #expect(answer.status == 401, "\(user)")
                #expect(answer.body.isEmpty, "\(user)")
            }
        }
    }

    @Test func logInWithoutParametersIs400() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            for query in ["", "?user=\(Self.user)", "?password=\(Self.password)"] {
                let answer = try await wire.call(.GET, "/directory/users" + query)
                try Self.expectSpringError(answer, 400, error: "Bad Request", path: "/directory/users")
            }
        }
    }

    @Test func awkwardNamesAndPasswordsRoundTripWhenPercentEncoded() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let name = "Zoé & Sons #2 + 住"
            let password = "p&ss #word+ é住=?"
            let created = try await wire.call(.POST, "/directory/users", json: ["name": name, "password": password])
            #expect(created.status == 200)
            let key = created.text
            let login = try await wire.call(.GET, Self.logInPath(name, password))
            #expect(login.status == 200)
            #expect(login.text == key)
            // `+` written raw in a query is a space, so the password no longer matches.
            let rawPlus = Self.logInPath(name, password).replacingOccurrences(of: "%2B", with: "+")
            #expect(try await wire.call(.GET, rawPlus).status == 401)
            // The key works for the people routes.
            #expect(try await wire.call(.GET, "/directory/people/\(key)").status == 200)
        }
    }

    // MARK: People

    @Test func listPeople() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(.GET, "/directory/people/\(Self.key)")
            #expect(answer.status == 200)
            #expect(answer.mediaType == "application/json")
            let people = try #require(try answer.value.arrayValue)
            #expect(people.map { $0["name"]?.stringValue } == ["Grace Lin", "Ahmed Saleh", "Nia Owens"])
            for person in people {
                #expect(person.keySet == ["id", "name", "office", "user"])
                #expect(person["id"]?.integerValue != nil)
                #expect(person["office"]?.stringValue != nil)
                #expect(person["user"] == .integer(1))
            }
            // Each key sees its own user's people only.
            let other = try await wire.call(.GET, "/directory/people/\(Self.otherKey)")
            #expect(try other.value.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Rita Moreno"])
        }
    }

    @Test func addPersonAnswersThePerson() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, "/directory/people/\(Self.key)", json: ["name": "Tom Becker", "office": "Riverside Emergency Shelter"])
            #expect(answer.status == 200)
            #expect(answer.mediaType == "application/json")
            let person = try answer.value
            let id = try #require(person["id"]?.integerValue)
            #expect(person["name"] == .string("Tom Becker"))
            #expect(person["office"] == .string("Riverside Emergency Shelter"))
            #expect(person["user"] == .integer(1))
            let list = try await wire.call(.GET, "/directory/people/\(Self.key)")
            #expect(try list.value.arrayValue?.contains(person) == true)
            #expect(try list.value.arrayValue?.filter { $0["id"] == .integer(id) }.count == 1)
        }
    }

    @Test func deletePerson() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(.DELETE, "/directory/people/\(Self.key)/2")
            #expect(answer.status == 200)
            let list = try await wire.call(.GET, "/directory/people/\(Self.key)")
            #expect(try list.value.arrayValue?.map { $0["id"] } == [.integer(1), .integer(3)])
            let again = try await wire.call(.DELETE, "/directory/people/\(Self.key)/2")
            try Self.expectSpringError(again, 404, error: "Not Found", path: "/directory/people/\(Self.key)/2")
        }
    }

    @Test func unknownKeyIs404WithASpringBody() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let unknown = "00000000000000000000000000000000"
            try Self.expectSpringError(
                try await wire.call(.GET, "/directory/people/\(unknown)"), 404, error: "Not Found", path: "/directory/people/\(unknown)")
            try Self.expectSpringError(
                try await wire.call(.POST, "/directory/people/\(unknown)", json: ["name": "A", "office": "B"]), 404, error: "Not Found",
                path: "/directory/people/\(unknown)")
            try Self.expectSpringError(
                try await wire.call(.DELETE, "/directory/people/\(unknown)/1"), 404, error: "Not Found",
                path: "/directory/people/\(unknown)/1")
        }
    }

    @Test func unknownPersonIs404() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            try Self.expectSpringError(
                try await wire.call(.DELETE, "/directory/people/\(Self.key)/999"), 404, error: "Not Found",
                path: "/directory/people/\(Self.key)/999")
            // Another user's person is unknown to this key, and stays.
            try Self.expectSpringError(
                try await wire.call(.DELETE, "/directory/people/\(Self.key)/4"), 404, error: "Not Found",
                path: "/directory/people/\(Self.key)/4")
            #expect(try await wire.call(.GET, "/directory/people/\(Self.otherKey)").value.arrayValue?.count == 1)
        }
    }

    @Test func malformedBodyIs400() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let broken = Data("{\"name\":\"x\",".utf8)
            try Self.expectSpringError(
                try await wire.call(.POST, "/directory/users", body: broken, contentType: "application/json"), 400, error: "Bad Request",
                path: "/directory/users")
            try Self.expectSpringError(
                try await wire.call(.POST, "/directory/people/\(Self.key)", body: broken, contentType: "application/json"), 400,
                error: "Bad Request", path: "/directory/people/\(Self.key)")
            try Self.expectSpringError(
                try await wire.call(.POST, "/directory/users", json: ["name": "no-password"]), 400, error: "Bad Request",
                path: "/directory/users")
            try Self.expectSpringError(
                try await wire.call(.POST, "/directory/people/\(Self.key)", json: ["office": "no name"]), 400, error: "Bad Request",
                path: "/directory/people/\(Self.key)")
        }
    }

    @Test func wrongContentTypeIs415() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let body = Data("{\"name\":\"x\",\"password\":\"y\"}".utf8)
            try Self.expectSpringError(
                try await wire.call(.POST, "/directory/users", body: body, contentType: "text/plain"), 415,
                error: "Unsupported Media Type", path: "/directory/users")
            try Self.expectSpringError(
                try await wire.call(
                    .POST, "/directory/people/\(Self.key)", body: Data("name=x&office=y".utf8),
                    contentType: "application/x-www-form-urlencoded"), 415, error: "Unsupported Media Type",
                path: "/directory/people/\(Self.key)")
        }
    }

    @Test func wrongMethodIs405() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let cases: [(HTTPMethod, String)] = [
                (.PUT, "/directory/users"), (.DELETE, "/directory/users"), (.PUT, "/directory/people/\(Self.key)"),
                (.DELETE, "/directory/people/\(Self.key)"), (.GET, "/directory/people/\(Self.key)/1"),
                (.POST, "/directory/people/\(Self.key)/1"),
            ]
            for (method, path) in cases {
                try Self.expectSpringError(try await wire.call(method, path), 405, error: "Method Not Allowed", path: path)
            }
        }
    }

    // MARK: Request log

    @Test func requestLogNamesCredentialsButNeverShowsThem() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let name = "Zoé & Sons"
            let password = "z&é #Passw0rd+"
            let created = try await wire.call(.POST, "/directory/users", json: ["name": name, "password": password])
            let key = created.text
            #expect(try await wire.call(.GET, Self.logInPath(name, password)).status == 200)
            #expect(try await wire.call(.GET, Self.logInPath(Self.user, Self.password)).status == 200)
            #expect(try await wire.call(.GET, Self.logInPath(Self.user, "wrong-Passw0rd!")).status == 401)
            #expect(try await wire.call(.GET, "/directory/people/\(Self.key)").status == 200)
            #expect(try await wire.call(.POST, "/directory/people/\(key)", json: ["name": "A", "office": "B"]).status == 200)
            #expect(try await wire.call(.DELETE, "/directory/people/\(Self.key)/1").status == 200)

            let log = try await wire.requestLogText(api: "directory")
            expectNoSecrets([password, Self.password, "wrong-Passw0rd!", key, Self.key], in: log)
            #expect(log.contains("password of \(Self.user)"))
            #expect(log.contains("password of \(name)"))
            #expect(log.contains("key directory-key-of-\(Self.user)"))
            #expect(log.contains("key directory-key-of-\(name)"))
        }
    }
}
