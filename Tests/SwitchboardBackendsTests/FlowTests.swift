import Foundation
import SwitchboardBackends
import SwitchboardHTTP
import Testing

@Suite("Seed flows through the back-end clients", .timeLimit(.minutes(2)))
struct FlowTests {
    @Test("ETO: log-in chain, catalog, participant, search, enrollment, TouchPoints")
    func etoFlow() async throws {
        try await withHarness { h async throws in _ = try await Flows.eto(h) }
    }

    @Test("FileMaker: sessions, records, find, modId, duplicate, scripts, globals, containers, metadata")
    func fileMakerFlow() async throws {
        try await withHarness { h async throws in _ = try await Flows.fileMaker(h) }
    }

    @Test("Directory: create user, log in with a tricky password, add, list, delete")
    func directoryFlow() async throws {
        try await withHarness { h async throws in
            _ = try await Flows.directory(h)
            // The password reached the server intact: a log-in with it succeeded above, and the
            // request log shows it masked, never in the clear.
            let logIns = try await h.requests("directory").filter {
                ($0["method"] as? String) == "GET" && (($0["path"] as? String) ?? "").contains("/users")
            }
            #expect(logIns.count == 2 && logIns.allSatisfy { ($0["status"] as? Int) == 200 })
        }
    }

    @Test("SAP: register, check, delete, check says gone")
    func sapFlow() async throws {
        try await withHarness { h async throws in _ = try await Flows.sap(h) }
    }

    @Test("FileMaker: every API version in the path works", arguments: [FileMakerClient.Version.v1, .v2, .vLatest])
    func fileMakerVersions(_ version: FileMakerClient.Version) async throws {
        try await withHarness { h async throws in
            let fm = h.fileMaker(version)
            let session = try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword)
            #expect(try await fm.records(layout: "Staff", limit: 2, auth: .fixed(session)).data.count == 2)
            #expect(try await h.count("filemaker", path: "/fmi/data/\(version.rawValue)/databases/Shelter/layouts/Staff/records") == 1)
            try await fm.logOut(session)
            let logOut = try await h.requests("filemaker").first { ($0["method"] as? String) == "DELETE" }
            #expect(logOut?["credential"] == nil || logOut?["credential"] is NSNull, "log-out sends no Authorization")
            #expect((logOut?["status"] as? Int) == 200)
        }
    }

    @Test("FileMaker: createIfAbsent turns the unique field's 504 into the existing record")
    func createIfAbsentRace() async throws {
        try await withHarness { h async throws in
            let fm = h.fileMaker()
            let auth = CredentialSource.fixed(try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword))
            let eventID = UUID().uuidString.lowercased()
            let first = try await fm.createIfAbsent(
                layout: "CheckIns", uniqueField: "EventID", value: eventID, fieldData: ["Bed": "Bed 5"], auth: auth)
            #expect(first.created)
            // Another writer's record exists, but our find loses the race (it answers "no match"):
            // the create hits the unique field, and the helper finds the record after all.
            try await h.fault(["api": "filemaker", "path": "/*/_find", "kind": "status", "status": 500, "code": "401", "count": 1])
            let raced = try await fm.createIfAbsent(
                layout: "CheckIns", uniqueField: "EventID", value: eventID, fieldData: ["Bed": "Bed 6"], auth: auth)
            #expect(!raced.created && raced.record.recordId == first.record.recordId && raced.record["Bed"] == "Bed 5")
            let creates = try await h.requests("filemaker").filter {
                ($0["method"] as? String) == "POST" && (($0["path"] as? String) ?? "").hasSuffix("/records")
            }
            #expect(creates.map { $0["status"] as? Int } == [200, 500])
            // A value with find operators cannot be matched literally; refused before any call.
            let refused = await #expect(throws: HTTPError.self) {
                try await fm.createIfAbsent(layout: "CheckIns", uniqueField: "EventID", value: "abc*", fieldData: [:], auth: auth)
            }
            #expect(refused?.code == .invalidRequest)
        }
    }
}
