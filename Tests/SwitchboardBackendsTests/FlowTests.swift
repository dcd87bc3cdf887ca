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

    @Test("FileMaker: portal rows decode into the record model, in get, range and find, with their windows")
    func fileMakerPortals() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            for n in 1...3 {
                _ = try await fm.create(
                    layout: "CheckIns", fieldData: ["EventID": .text("portal-\(n)"), "ParticipantID": 1000, "Bed": .text("Bed \(n)")],
                    auth: auth)
            }
            let ana = try await fm.record(layout: "Participants", id: "1", auth: auth)
            let rows = try #require(ana.portalData["CheckIns"])
            #expect(rows.count == 4)
            #expect(rows[0].recordId == "1" && rows[0].modId == "0")
            #expect(rows[0]["CheckIns::EventID"] == "0190a1b2-0000-7000-8000-000000000000")
            #expect(rows[0]["CheckIns::ParticipantID"] == 1000)
            #expect(rows.dropFirst().map { $0["CheckIns::Bed"] } == ["Bed 1", "Bed 2", "Bed 3"])
            #expect(rows.allSatisfy { $0.fieldData.keys.allSatisfy { $0.hasPrefix("CheckIns::") } })
            #expect(ana.portalDataInfo?.first?.foundCount == 4 && ana.portalDataInfo?.first?.table == "CheckIns")

            let window = try await fm.record(layout: "Participants", id: "1", portals: [.init("CheckIns", offset: 2, limit: 2)], auth: auth)
            #expect(window.portalData["CheckIns"]?.map { $0["CheckIns::Bed"] } == ["Bed 1", "Bed 2"])
            #expect(window.portalDataInfo?.first?.returnedCount == 2)
            let none = try await fm.record(layout: "Participants", id: "1", portals: [], auth: auth)
            #expect(none.portalData.isEmpty && none.portalDataInfo == nil)

            let range = try await fm.records(layout: "Participants", limit: 2, portals: [.init("CheckIns", limit: 1)], auth: auth)
            #expect(range.data.map { $0.portalData["CheckIns"]?.count } == [1, 1])
            let found = try await fm.find(
                layout: "Participants", [.matching(("ParticipantID", "1000"))], portals: [.init("CheckIns", offset: 4)], auth: auth)
            #expect(found.data.first?.portalData["CheckIns"]?.map(\.recordId) == [rows[3].recordId])

            // The model round-trips through JSON, portal rows flat as on the wire.
            let copy = try JSONDecoder().decode(FileMaker.Record.self, from: try JSONEncoder().encode(ana))
            #expect(copy == ana)
            // A layout without portals decodes to none; its metadata lists none either.
            #expect(try await fm.record(layout: "CheckIns", id: "1", auth: auth).portalData.isEmpty)
            let metadata = try await fm.layoutMetadata(layout: "Participants", auth: auth)
            #expect(metadata.portalMetaData?["CheckIns"]?.contains { $0.name == "CheckIns::EventID" } == true)
        }
    }

    @Test("FileMaker: createIfAbsent turns the unique field's 504 into the existing record")
    func createIfAbsentRace() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            let eventID = UUID().uuidString.lowercased()
            let first = try await fm.createIfAbsent(
                layout: "CheckIns", uniqueField: "EventID", value: eventID, fieldData: ["Bed": "Bed 5"], auth: auth)
            #expect(first.created)
            // Another writer's record exists, but our find loses the race (it answers "no match"):
            // the create hits the unique field, and the helper finds the record after all.
            try await h.fault(["api": "filemaker", "path": "/*/_find", "kind": "status", "status": 500, "code": "401", "count": 1])
            let raced = try await fm.createIfAbsent(
                layout: "CheckIns", uniqueField: "EventID", value: eventID, fieldData: ["Bed": "Bed 6"], auth: auth)
            #expect(!raced.created && raced.reference.recordId == first.reference.recordId)
            #expect(try await fm.record(layout: "CheckIns", id: raced.reference.recordId, auth: auth)["Bed"] == "Bed 5")
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

extension FlowTests {
    @Test("FileMaker: createIfAbsent on a unique-validated field is one create; a second write is a refused create and a find")
    func createIfAbsentCreateFirst() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            let eventID = UUID().uuidString.lowercased()
            let first = try await fm.createIfAbsent(
                layout: "CheckIns", uniqueField: "EventID", value: eventID, fieldData: ["Bed": "Bed 7"], uniqueValidated: true, auth: auth)
            #expect(first.created)
            let again = try await fm.createIfAbsent(
                layout: "CheckIns", uniqueField: "EventID", value: eventID, fieldData: ["Bed": "Bed 8"], uniqueValidated: true, auth: auth)
            #expect(!again.created && again.reference.recordId == first.reference.recordId)
            #expect(try await fm.record(layout: "CheckIns", id: first.reference.recordId, auth: auth)["Bed"] == "Bed 7")
            let calls = try await h.requests("filemaker").compactMap { entry -> String? in
                guard let path = entry["path"] as? String, path.contains("/layouts/CheckIns/") else { return nil }
                return
                    "\(entry["method"] as? String ?? "?") \(path.hasSuffix("/_find") ? "find" : path.hasSuffix("/records") ? "create" : "get") \(entry["status"] as? Int ?? 0)"
            }
            #expect(calls == ["POST create 200", "POST create 500", "POST find 200", "GET get 200"], "\(calls)")
        }
    }
}

extension FlowTests {
    /// The body of a 2xx answer is parsed once; its first message's code still decides.
    @Test("FileMaker: a 2xx answer whose first message is not code 0 is the vendor's error; a missing envelope is a decoding error")
    func successStatusWithAnErrorCode() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            try await h.fault([
                "api": "filemaker", "path": "/*/records", "method": "POST", "kind": "body", "status": 200, "count": 1,
                "body": ["response": [:] as [String: Any], "messages": [["code": "509", "message": "Field value does not match"]]],
            ])
            let vendor = await #expect(throws: HTTPError.self) {
                try await fm.create(layout: "CheckIns", fieldData: ["Bed": "Bed 7"], auth: auth)
            }
            #expect(vendor?.vendorCode == "509" && vendor?.status == 200)
            try await h.fault([
                "api": "filemaker", "path": "/*/records", "method": "POST", "kind": "body", "status": 200, "count": 1,
                "body": ["unexpected": true],
            ])
            let shapeless = await #expect(throws: HTTPError.self) {
                try await fm.create(layout: "CheckIns", fieldData: ["Bed": "Bed 8"], auth: auth)
            }
            #expect(shapeless?.code == .decoding)
            // And the next create goes through as ever.
            let record = try await fm.create(layout: "CheckIns", fieldData: ["Bed": "Bed 9"], auth: auth)
            #expect(try await fm.record(layout: "CheckIns", id: record.recordId, auth: auth)["Bed"] == "Bed 9")
        }
    }
}
