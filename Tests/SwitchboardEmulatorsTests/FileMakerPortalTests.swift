import Foundation
import NIOHTTP1
import SwitchboardEmulators
import SwitchboardProtocol
import SwitchboardTesting
import Testing

/// Portals in the FileMaker emulator: the seed's `Participants` layout shows each participant's
/// `CheckIns` (matched on `ParticipantID`), in get, range and find answers, with the `portal`,
/// `_offset.<portal>` and `_limit.<portal>` parameters, and in the layout's metadata.
@Suite("FileMaker portals", .timeLimit(.minutes(1)))
struct FileMakerPortalTests {
    let participants = Wire.fm + "/layouts/Participants"
    let checkIns = Wire.fm + "/layouts/CheckIns"

    /// Logs in and gives participant 1000 (Ana, record 1) `extra` more check-ins after the seed's
    /// one (check-in record 1); returns the Authorization header and the check-ins' record ids
    /// in creation order.
    func prepare(_ wire: Wire, extra: Int) async throws -> (auth: [(String, String)], ids: [String]) {
        let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
        var ids = ["1"]
        for n in 0..<extra {
            let created = try await wire.call(
                .POST, checkIns + "/records", headers: auth,
                json: ["fieldData": ["EventID": "portal-\(n)", "ParticipantID": 1000, "Bed": "Bed \(n)"]])
            ids.append(try #require(created.response["recordId"] as? String, "\(created.text)"))
        }
        return (auth, ids)
    }

    static func rows(_ record: JSONValue?, _ portal: String = "CheckIns") -> [JSONValue] {
        record?["portalData"]?[portal]?.arrayValue ?? []
    }

    static func ids(_ rows: [JSONValue]) -> [String] { rows.compactMap { $0["recordId"]?.stringValue } }

    static func info(_ record: JSONValue?) -> (found: Int64?, returned: Int64?) {
        let info = record?["portalDataInfo"]?[0]
        return (info?["foundCount"]?.integerValue, info?["returnedCount"]?.integerValue)
    }

    @Test func aRecordShowsItsRelatedRecordsWithPrefixedFieldsAndStringIds() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let answer = try await wire.call(.GET, participants + "/records/1", headers: auth)
            #expect(answer.code == "0", "\(answer.text)")
            let record = try answer.value["response"]?["data"]?[0]
            #expect(record?["fieldData"]?["ParticipantID"] == .integer(1000))
            let rows = Self.rows(record)
            #expect(rows.count == 1)
            let row = try #require(rows.first)
            #expect(row["recordId"] == .string("1"))
            #expect(row["modId"] == .string("0"))
            #expect(row["CheckIns::EventID"] == .string("0190a1b2-0000-7000-8000-000000000000"))
            #expect(row["CheckIns::ParticipantID"] == .integer(1000))
            #expect(row["CheckIns::Photo"] == .string(""))
            // Every field is prefixed with its table; nothing else is in a row.
            #expect(row.keySet.allSatisfy { $0 == "recordId" || $0 == "modId" || $0.hasPrefix("CheckIns::") })
            #expect(row["EventID"] == nil && row["fieldData"] == nil)
            #expect(record?["portalDataInfo"]?[0]?["portalObjectName"] == .string("CheckIns"))
            #expect(record?["portalDataInfo"]?[0]?["table"] == .string("CheckIns"))
            #expect(Self.info(record) == (1, 1))

            // A participant without check-ins has an empty portal; a layout without portals none.
            let lonely = try await wire.call(.GET, participants + "/records/30", headers: auth)
            #expect(Self.rows(try lonely.value["response"]?["data"]?[0]).isEmpty)
            #expect(try lonely.value["response"]?["data"]?[0]?["portalData"]?["CheckIns"] == .array([]))
            let plain = try await wire.call(.GET, checkIns + "/records/1", headers: auth)
            #expect(try plain.value["response"]?["data"]?[0]?["portalData"] == .object([:]))
            #expect(try plain.value["response"]?["data"]?[0]?["portalDataInfo"] == nil)
        }
    }

    @Test func getRangeAndFindHonourPortalOffsetAndLimit() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let (auth, ids) = try await prepare(wire, extra: 4)

            // Get: `_offset.<portal>` is 1-based, `_limit.<portal>` caps the rows; the counts
            // tell all related records from those returned.
            let window = try await wire.call(
                .GET, participants + "/records/1?_offset.CheckIns=2&_limit.CheckIns=2", headers: auth)
            let windowed = try window.value["response"]?["data"]?[0]
            #expect(Self.ids(Self.rows(windowed)) == Array(ids[1...2]))
            #expect(Self.info(windowed) == (5, 2))
            let all = try await wire.call(.GET, participants + "/records/1", headers: auth)
            #expect(Self.ids(Self.rows(try all.value["response"]?["data"]?[0])) == ids)

            // Range: the window applies to each record's portal.
            let portal = WireFormat.queryEncoded(#"["CheckIns"]"#)
            let range = try await wire.call(
                .GET, participants + "/records?_limit=2&portal=\(portal)&_limit.CheckIns=3", headers: auth)
            let page = try #require(try range.value["response"]?["data"]?.arrayValue)
            #expect(page.count == 2)
            #expect(Self.ids(Self.rows(page[0])) == Array(ids[0...2]))
            #expect(Self.info(page[0]) == (5, 3))
            #expect(Self.ids(Self.rows(page[1])) == ["2"], "participant 1001's one check-in")
            #expect(Self.rows(page[1]).first?["CheckIns::ParticipantID"] == .integer(1001))

            // Find: the portal parameters are body members.
            let found = try await wire.call(
                .POST, participants + "/_find", headers: auth,
                json: ["query": [["ParticipantID": "1000"]], "portal": ["CheckIns"], "offset.CheckIns": "4", "limit.CheckIns": 10])
            #expect(found.code == "0", "\(found.text)")
            let hit = try found.value["response"]?["data"]?[0]
            #expect(Self.ids(Self.rows(hit)) == Array(ids[3...4]))
            #expect(Self.info(hit) == (5, 2))
            // An offset past the last row is an empty portal, not an error.
            let past = try await wire.call(
                .POST, participants + "/_find", headers: auth, json: ["query": [["ParticipantID": "1000"]], "offset.CheckIns": "9"])
            #expect(Self.rows(try past.value["response"]?["data"]?[0]).isEmpty)
            #expect(Self.info(try past.value["response"]?["data"]?[0]) == (5, 0))
        }
    }

    @Test func portalChoosesThePortalsAndTheDefaultLimitIs50() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let (auth, ids) = try await prepare(wire, extra: 51)
            let none = try await wire.call(
                .GET, participants + "/records/1?portal=\(WireFormat.queryEncoded("[]"))", headers: auth)
            #expect(try none.value["response"]?["data"]?[0]?["portalData"] == .object([:]))
            #expect(try none.value["response"]?["data"]?[0]?["portalDataInfo"] == nil)
            let noneFound = try await wire.call(
                .POST, participants + "/_find", headers: auth, json: ["query": [["ParticipantID": "1000"]], "portal": [String]()])
            #expect(try noneFound.value["response"]?["data"]?[0]?["portalData"] == .object([:]))

            let defaults = try await wire.call(.GET, participants + "/records/1", headers: auth)
            let record = try defaults.value["response"]?["data"]?[0]
            #expect(Self.ids(Self.rows(record)) == Array(ids.prefix(50)))
            #expect(Self.info(record) == (52, 50))
            // The underscore may be left out, as with `_offset` and `_limit`.
            let plain = try await wire.call(.GET, participants + "/records/1?offset.CheckIns=51&limit.CheckIns=5", headers: auth)
            #expect(Self.ids(Self.rows(try plain.value["response"]?["data"]?[0])) == Array(ids[50...51]))
        }
    }

    @Test func badPortalParametersAre1708Or1710() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            func code(_ query: String) async throws -> (Int, String?) {
                let answer = try await wire.call(.GET, participants + "/records/1?" + query, headers: auth)
                return (answer.status, answer.code)
            }
            #expect(try await code("portal=\(WireFormat.queryEncoded(#"["Nope"]"#))") == (400, "1708"))
            #expect(try await code("portal=\(WireFormat.queryEncoded("CheckIns"))") == (400, "1710"))
            #expect(try await code("portal=\(WireFormat.queryEncoded(#"{"CheckIns":1}"#))") == (400, "1708"))
            #expect(try await code("_limit.CheckIns=0") == (400, "1708"))
            #expect(try await code("_offset.CheckIns=x") == (400, "1708"))
            #expect(try await code("_limit.Nope=3") == (400, "1708"))
            let range = try await wire.call(.GET, checkIns + "/records?portal=\(WireFormat.queryEncoded(#"["CheckIns"]"#))", headers: auth)
            #expect(range.code == "1708", "CheckIns has no portals")
            let find = try await wire.call(
                .POST, participants + "/_find", headers: auth, json: ["query": [["ParticipantID": "1000"]], "portal": "CheckIns"])
            #expect(find.status == 400 && find.code == "1708")
            // Writing through a portal is not emulated, and says so.
            let write = try await wire.call(
                .POST, participants + "/records", headers: auth,
                json: ["fieldData": ["ParticipantID": 2000], "portalData": ["CheckIns": [["CheckIns::Bed": "Bed 1"]]]])
            #expect(write.code == "1708")
            #expect(
                try await wire.call(
                    .POST, participants + "/records", headers: auth, json: ["fieldData": ["ParticipantID": 2000], "portalData": [:]]
                ).code
                    == "0")
        }
    }

    @Test func layoutMetadataListsThePortalsFields() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let answer = try await wire.call(.GET, participants, headers: auth)
            let portal = try #require(try answer.value["response"]?["portalMetaData"]?["CheckIns"]?.arrayValue)
            let names = portal.compactMap { $0["name"]?.stringValue }
            #expect(names.contains("CheckIns::EventID") && names.contains("CheckIns::ParticipantID"))
            #expect(names.allSatisfy { $0.hasPrefix("CheckIns::") })
            #expect(portal.first { $0["name"] == .string("CheckIns::Photo") }?["result"] == .string("container"))
            let plain = try await wire.call(.GET, checkIns, headers: auth)
            #expect(try plain.value["response"]?["portalMetaData"] == .object([:]))
        }
    }

    @Test func seedPortalsMustNameTablesAndFieldsThatExist() throws {
        func seed(_ portal: [String: Any]) throws -> Data {
            var document = try #require(
                try JSONSerialization.jsonObject(with: try EmulatorSeed.bundled().encodedForTests()) as? [String: Any])
            var filemaker = try #require(document["filemaker"] as? [String: Any])
            var databases = try #require(filemaker["databases"] as? [[String: Any]])
            var layouts = try #require(databases[0]["layouts"] as? [[String: Any]])
            layouts[2]["portals"] = [portal]
            databases[0]["layouts"] = layouts
            filemaker["databases"] = databases
            document["filemaker"] = filemaker
            return try JSONSerialization.data(withJSONObject: document)
        }
        let good: [String: Any] = ["name": "Shifts", "table": "CheckIns", "matchField": "Shelter", "relatedField": "Shelter"]
        _ = try EmulatorSeed.decode(try seed(good), source: "mine.json")
        for (key, value, words) in [
            ("table", "Nowhere", "table Nowhere"), ("matchField", "Nope", "Staff::Nope"), ("relatedField", "Nope", "CheckIns::Nope"),
        ] {
            var broken = good
            broken[key] = value
            #expect {
                _ = try EmulatorSeed.decode(try seed(broken), source: "mine.json")
            } throws: { error in
                "\(error)".contains("mine.json") && "\(error)".contains("portal Shifts") && "\(error)".contains(words)
            }
        }
    }
}
