import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// One straight walk per seed flow, each step only using what the previous steps answered, the
/// way a client would.
@Suite("Seed walks", .timeLimit(.minutes(1)))
struct WalkTests {
    @Test func etoLogInChainToProgramSelection() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = try await wire.call(
                .POST, "/API/Security.svc/SSOAuthenticate/",
                json: ["security": ["Email": "intake@riverside.example", "Password": "eto-demo-Passw0rd!"]])
            #expect(auth.status == 200)
            let sso = try #require(try auth.value["SSOAuthenticateResult"]?["SSOAuthToken"]?.stringValue)
            #expect(sso != WireFormat.zeroGUID)

            let enterprises = try await wire.call(.GET, "/API/Security.svc/GetSSOEnterprises/\(sso)")
            #expect(enterprises.status == 200)
            let enterprise = try #require(try enterprises.value[0]?["Key"]?.stringValue)

            let sites = try await wire.call(.GET, "/API/Security.svc/GetSSOSites/\(sso)/\(enterprise)")
            #expect(sites.status == 200)
            let site = try #require(try sites.value[0]?["Key"]?.integerValue)

            let login = try await wire.call(.GET, "/API/Security.svc/SSOSiteLogin/\(site)/\(enterprise)/\(sso)/-360")
            #expect(login.status == 200)
            let token = try #require(try login.value.stringValue)
            let headers = [
                ("enterpriseGuid", enterprise), ("securityToken", token), ("Accept", "application/json"),
            ]

            let programs = try await wire.call(.GET, "/API/Form.svc/Forms/Program/GetPrograms/\(site)", headers: headers)
            #expect(programs.status == 200)
            let enabled = try #require(try programs.value.arrayValue).filter { $0["Disabled"] == .bool(false) }
            #expect(enabled.count == 2)
            let program = try #require(enabled.first?["ID"]?.integerValue)

            let update = try await wire.call(
                .POST, "/API/Security.svc/UpdateCurrentProgram/", headers: headers, json: ["ProgramID": program])
            #expect(update.status == 200)
        }
    }

    @Test func directoryUserAndPeople() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let created = try await wire.call(.POST, "/directory/users", json: ["name": "van-3", "password": "van3-Passw0rd!"])
            #expect(created.status == 200)
            let login = try await wire.call(.GET, "/directory/users?user=van-3&password=van3-Passw0rd%21")
            #expect(login.status == 200)
            let key = login.text
            #expect(key == created.text)

            let added = try await wire.call(.POST, "/directory/people/\(key)", json: ["name": "Eli Ward", "office": "Van 3"])
            #expect(added.status == 200)
            let id = try #require(try added.value["id"]?.integerValue)

            let list = try await wire.call(.GET, "/directory/people/\(key)")
            #expect(list.status == 200)
            #expect(try list.value == .array([try added.value]))

            let deleted = try await wire.call(.DELETE, "/directory/people/\(key)/\(id)")
            #expect(deleted.status == 200)
            #expect(try await wire.call(.GET, "/directory/people/\(key)").value == .array([]))
        }
    }

    @Test func sapRegisterCheckDelete() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let base = "/odata/applications/v1/org.riverside.outreach/Connections"
            let registered = try await wire.call(
                .POST, base, headers: [Wire.basic("outreach1", "sap-demo-Passw0rd!")], json: ["DeviceType": "Android"])
            #expect(registered.status == 201)
            let id = try #require(try registered.value["d"]?["ApplicationConnectionId"]?.stringValue)
            let connection = "\(base)('\(id)')"
            let headers = [Wire.basic("outreach1", "sap-demo-Passw0rd!"), ("X-SMP-APPCID", id)]

            #expect(try await wire.call(.GET, connection, headers: headers).status == 200)
            let deleted = try await wire.call(.DELETE, connection, headers: headers)
            #expect(deleted.status == 200)
            #expect(try await wire.call(.GET, connection, headers: headers).status == 404)
        }
    }
}
