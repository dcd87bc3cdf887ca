import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// The SAP Mobile Services emulator against `shared/apis/scpms.md`: registering an application
/// connection, checking it (by header, cookie or the proxied service root) and deleting it.
@Suite("SAP Mobile Services contract", .timeLimit(.minutes(1)))
struct SAPContractTests {
    static let app = "org.riverside.outreach"
    static let user = "outreach1"
    static let password = "sap-demo-Passw0rd!"
    static let connections = "/odata/applications/v1/\(app)/Connections"

    static func connection(_ id: String, version: String = "v1", app: String = app) -> String {
        "/odata/applications/\(version)/\(app)/Connections('\(id)')"
    }

    /// The outreach user's Basic credentials: every call on a non-anonymous application needs them.
    static var basic: (String, String) { Wire.basic(user, password) }

    static var device: [String: Any] { ["DeviceType": "iPhone", "DeviceModel": "iPhone 15", "UserName": "outreach1"] }

    /// The value of the `Set-Cookie` line that sets `name`, without its attributes.
    static func cookie(_ answer: Wire.Answer, _ name: String) -> String? {
        for line in answer.headers["Set-Cookie"] {
            let pair = line.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    static func expectChallenge(_ answer: Wire.Answer, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(answer.status == 401, sourceLocation: sourceLocation)
        let challenge = answer.header("WWW-Authenticate") ?? ""
        #expect(challenge.hasPrefix("Basic realm=\""), "challenge: \(challenge)", sourceLocation: sourceLocation)
        #expect(challenge.hasSuffix("\"") && challenge.count > "Basic realm=\"\"".count, sourceLocation: sourceLocation)
    }

    // MARK: Registration

    @Test func registerWithBasicIs201WithCookiesLocationAndBody() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, Self.connections, headers: [Wire.basic(Self.user, Self.password), ("Accept", "application/json")],
                json: Self.device)
            #expect(answer.status == 201)
            #expect(answer.mediaType == "application/json")
            let id = try #require(Self.cookie(answer, "X-SMP-APPCID"))
            #expect(!id.isEmpty && id.count <= 128)
            #expect(Self.cookie(answer, "X-SMP-SESSID")?.isEmpty == false)
            #expect(answer.headers["Set-Cookie"].contains { $0.hasPrefix("X-SMP-SESSID=") && $0.contains("Path=/") })
            let location = try #require(answer.header("Location"))
            #expect(location.hasSuffix("Connections('\(id)')"))

            let d = try #require(try answer.value["d"])
            #expect(d["ApplicationConnectionId"] == .string(id))
            let createdAt = try #require(d["CreatedAt"]?.stringValue)
            #expect(WireFormat.wcfMilliseconds(createdAt) != nil)
            #expect(d["__metadata"]?["uri"]?.stringValue?.hasSuffix("Connections('\(id)')") == true)
            #expect(d["__metadata"]?["type"] == .string("applications.Connection"))
            #expect(d["UserName"] == .string(Self.user))
            #expect(d["DeviceType"] == .string("iPhone"))
            #expect(d["DeviceModel"] == .string("iPhone 15"))
            #expect(d["ApplicationVersion"]?.stringValue != nil)
        }
    }

    @Test func badPasswordIs401WithABasicChallenge() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, Self.connections, headers: [Wire.basic(Self.user, "wrong-Passw0rd!")], json: Self.device)
            Self.expectChallenge(answer)
            #expect(Self.cookie(answer, "X-SMP-APPCID") == nil)
            let unknownUser = try await wire.call(
                .POST, Self.connections, headers: [Wire.basic("nobody", Self.password)], json: Self.device)
            Self.expectChallenge(unknownUser)
        }
    }

    @Test func noCredentialsIs401WithABasicChallenge() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            Self.expectChallenge(try await wire.call(.POST, Self.connections, json: Self.device))
        }
    }

    @Test func userWhoMayNotRegisterIs403() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, Self.connections, headers: [Wire.basic("auditor", "sap-audit-Passw0rd!")], json: Self.device)
            #expect(answer.status == 403)
            #expect(Self.cookie(answer, "X-SMP-APPCID") == nil)
        }
    }

    @Test func anonymousApplicationRegistersWithoutCredentials() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(.POST, "/odata/applications/v1/org.riverside.kiosk/Connections", json: Self.device)
            #expect(answer.status == 201)
            let id = try #require(Self.cookie(answer, "X-SMP-APPCID"))
            #expect(try answer.value["d"]?["ApplicationConnectionId"] == .string(id))
            let check = try await wire.call(
                .GET, Self.connection(id, app: "org.riverside.kiosk"), headers: [("X-SMP-APPCID", id)])
            #expect(check.status == 200)
        }
    }

    @Test func emptyBodyIsAllowed() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, Self.connections, headers: [Wire.basic(Self.user, Self.password)], contentType: "application/json")
            #expect(answer.status == 201)
            let id = try #require(Self.cookie(answer, "X-SMP-APPCID"))
            #expect(try answer.value["d"]?["ApplicationConnectionId"] == .string(id))
        }
    }

    @Test func unknownApplicationIs404() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, "/odata/applications/v1/org.example.nothing/Connections", headers: [Wire.basic(Self.user, Self.password)],
                json: Self.device)
            #expect(answer.status == 404)
        }
    }

    // MARK: Using the connection

    @Test func checkByHeaderAndByCookie() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            let byHeader = try await wire.call(.GET, Self.connection(id), headers: [Self.basic, ("X-SMP-APPCID", id)])
            #expect(byHeader.status == 200)
            #expect(try byHeader.value["d"]?["ApplicationConnectionId"] == .string(id))
            let byCookie = try await wire.call(.GET, Self.connection(id), headers: [Self.basic, ("Cookie", "X-SMP-APPCID=\(id)")])
            #expect(byCookie.status == 200)
            #expect(try byCookie.value["d"]?["ApplicationConnectionId"] == .string(id))
            let amongCookies = try await wire.call(
                .GET, Self.connection(id), headers: [Self.basic, ("Cookie", "X-SMP-SESSID=abc; X-SMP-APPCID=\(id)")])
            #expect(amongCookies.status == 200)
        }
    }

    @Test func missingConnectionIdIs403() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            #expect(try await wire.call(.GET, Self.connection(id), headers: [Self.basic]).status == 403)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic]).status == 403)
            #expect(try await wire.call(.DELETE, Self.connection(id), headers: [Self.basic]).status == 403)
            // Nothing was deleted.
            #expect(try await wire.call(.GET, Self.connection(id), headers: [Self.basic, ("X-SMP-APPCID", id)]).status == 200)
        }
    }

    @Test func connectionIdLongerThan128CharactersIs400() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            let long = String(repeating: "a", count: 129)
            #expect(try await wire.call(.GET, Self.connection(id), headers: [Self.basic, ("X-SMP-APPCID", long)]).status == 400)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic, ("X-SMP-APPCID", long)]).status == 400)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic, ("Cookie", "X-SMP-APPCID=\(long)")]).status == 400)
            // 128 characters is allowed: it is merely unknown.
            let limit = String(repeating: "a", count: 128)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic, ("X-SMP-APPCID", limit)]).status == 404)
        }
    }

    @Test func serviceRootChecksTheConnection() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic, ("X-SMP-APPCID", id)]).status == 200)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic, ("Cookie", "X-SMP-APPCID=\(id)")]).status == 200)
            let unknown = try await wire.call(
                .GET, "/\(Self.app)", headers: [Self.basic, ("X-SMP-APPCID", UUID().uuidString.lowercased())])
            #expect(unknown.status == 404)
        }
    }

    @Test func deleteThenCheckAndDeleteAgainAre404() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            let headers = [Self.basic, ("X-SMP-APPCID", id)]
            let deleted = try await wire.call(.DELETE, Self.connection(id), headers: headers)
            #expect(deleted.status == 200)
            #expect(deleted.body.isEmpty)
            #expect(try await wire.call(.GET, Self.connection(id), headers: headers).status == 404)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: headers).status == 404)
            #expect(try await wire.call(.DELETE, Self.connection(id), headers: headers).status == 404)
        }
    }

    @Test func bothV1AndLatestAreAccepted() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let answer = try await wire.call(
                .POST, "/odata/applications/latest/\(Self.app)/Connections", headers: [Wire.basic(Self.user, Self.password)],
                json: Self.device)
            #expect(answer.status == 201)
            let id = try #require(Self.cookie(answer, "X-SMP-APPCID"))
            #expect(answer.header("Location")?.hasSuffix("Connections('\(id)')") == true)
            let headers = [Self.basic, ("X-SMP-APPCID", id)]
            #expect(try await wire.call(.GET, Self.connection(id, version: "v1"), headers: headers).status == 200)
            #expect(try await wire.call(.GET, Self.connection(id, version: "latest"), headers: headers).status == 200)
            #expect(try await wire.call(.GET, Self.connection(id, version: "v2"), headers: headers).status == 404)
            #expect(try await wire.call(.DELETE, Self.connection(id, version: "latest"), headers: headers).status == 200)
            #expect(try await wire.call(.GET, Self.connection(id, version: "v1"), headers: headers).status == 404)
        }
    }

    @Test("Check, service root and delete challenge for missing or wrong credentials, then answer with them")
    func connectionCallsChallengeLikeRegistration() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            let appcid = ("X-SMP-APPCID", id)
            let wrong = Wire.basic(Self.user, "wrong-Passw0rd!")
            for (method, path) in [(HTTPMethod.GET, Self.connection(id)), (.GET, "/\(Self.app)"), (.DELETE, Self.connection(id))] {
                let bare = try await wire.call(method, path, headers: [appcid])
                Self.expectChallenge(bare)
                #expect(bare.header("WWW-Authenticate") == "Basic realm=\"Riverside Outreach\"")
                #expect(try bare.value["error"]?["code"] == .string("401"))
                Self.expectChallenge(try await wire.call(method, path, headers: [wrong, appcid]))
                Self.expectChallenge(try await wire.call(method, path, headers: [("Authorization", "Basic !!!"), appcid]))
                Self.expectChallenge(try await wire.call(method, path, headers: [Wire.bearer(id), appcid]))
                // Credentials come first, as on the real server: no id and no credentials is a challenge too.
                Self.expectChallenge(try await wire.call(method, path))
            }
            // None of those deleted anything; the challenge answered with credentials succeeds.
            #expect(try await wire.call(.GET, Self.connection(id), headers: [Self.basic, appcid]).status == 200)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic, appcid]).status == 200)
            #expect(try await wire.call(.DELETE, Self.connection(id), headers: [Self.basic, appcid]).status == 200)
        }
    }

    @Test func anotherUsersCredentialsAre403() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            let auditor = [Wire.basic("auditor", "sap-audit-Passw0rd!"), ("X-SMP-APPCID", id)]
            #expect(try await wire.call(.GET, Self.connection(id), headers: auditor).status == 403)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: auditor).status == 403)
            #expect(try await wire.call(.DELETE, Self.connection(id), headers: auditor).status == 403)
            #expect(try await wire.call(.GET, Self.connection(id), headers: [Self.basic, ("X-SMP-APPCID", id)]).status == 200)
        }
    }

    @Test func anonymousApplicationNeedsNoCredentialsButRefusesWrongOnes() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let kiosk = "/odata/applications/v1/org.riverside.kiosk/Connections"
            let registered = try await wire.call(.POST, kiosk, json: Self.device)
            let id = try #require(Self.cookie(registered, "X-SMP-APPCID"))
            #expect(try await wire.call(.GET, "/org.riverside.kiosk", headers: [("X-SMP-APPCID", id)]).status == 200)
            Self.expectChallenge(
                try await wire.call(.GET, "/org.riverside.kiosk", headers: [Wire.basic("someone", "x"), ("X-SMP-APPCID", id)]))
            #expect(try await wire.call(.DELETE, kiosk + "('\(id)')", headers: [("X-SMP-APPCID", id)]).status == 200)
        }
    }

    // MARK: Request log

    @Test func requestLogNamesCredentialsButNeverShowsThem() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let id = try await wire.register()
            let headers = [Self.basic, ("X-SMP-APPCID", id)]
            #expect(try await wire.call(.GET, Self.connection(id), headers: headers).status == 200)
            #expect(try await wire.call(.GET, "/\(Self.app)", headers: [Self.basic, ("Cookie", "X-SMP-APPCID=\(id)")]).status == 200)
            #expect(try await wire.call(.DELETE, Self.connection(id), headers: headers).status == 200)
            #expect(try await wire.call(.GET, Self.connection(id), headers: headers).status == 404)
            Self.expectChallenge(
                try await wire.call(.POST, Self.connections, headers: [Wire.basic(Self.user, "wrong-Passw0rd!")], json: Self.device))
            Self.expectChallenge(
                try await wire.call(.GET, "/\(Self.app)", headers: [Wire.basic(Self.user, "wrong-Passw0rd!"), ("X-SMP-APPCID", id)]))

            let log = try await wire.requestLogText(api: "sap")
            expectNoSecrets([Self.password, "wrong-Passw0rd!", id], in: log)
            #expect(log.contains("X-SMP-APPCID sap-connection-1"))
            #expect(log.contains("basic \(Self.user)"))
        }
    }
}

extension Wire {
    /// Registers a connection for the seed's outreach user; returns its id.
    func register() async throws -> String {
        let answer = try await call(
            .POST, SAPContractTests.connections, headers: [Self.basic(SAPContractTests.user, SAPContractTests.password)],
            json: SAPContractTests.device)
        guard answer.status == 201, let id = try answer.value["d"]?["ApplicationConnectionId"]?.stringValue else {
            throw Mismatch("SAP registration failed: \(answer.status)")
        }
        return id
    }
}
