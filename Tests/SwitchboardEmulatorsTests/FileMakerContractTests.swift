import Foundation
import NIOHTTP1
import SwitchboardEmulators
import SwitchboardTesting
import Testing

/// The FileMaker Data API emulator against `shared/apis/filemaker.md`: every route, every error
/// code with its HTTP status and message, string ids and numeric counts.
@Suite struct FileMakerContractTests {
    let fm = Wire.fm
    let checkIns = Wire.fm + "/layouts/CheckIns"

    @Test func logInGivesTheTokenInHeaderAndBodyOnEveryVersion() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            for version in ["v1", "v2", "vLatest"] {
                let answer = try await wire.call(
                    .POST, "/fmi/data/\(version)/databases/Shelter/sessions", headers: [Wire.basic("switchboard", "fm-demo-Passw0rd!")],
                    json: [String: Any]())
                #expect(answer.status == 200)
                #expect(answer.code == "0")
                let token = try #require(answer.response["token"] as? String)
                #expect(answer.header("X-FM-Data-Access-Token") == token)
            }
            let v3 = try await wire.call(.POST, "/fmi/data/v3/databases/Shelter/sessions", headers: [Wire.basic("switchboard", "x")])
            #expect(v3.status == 404)
        }
    }

    @Test func logInErrors() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let missing = try await wire.call(.POST, fm + "/sessions", json: [String: Any]())
            #expect(missing.status == 401)
            #expect(missing.code == "10")
            #expect((missing.response).isEmpty)
            let wrong = try await wire.call(.POST, fm + "/sessions", headers: [Wire.basic("switchboard", "nope")], json: [String: Any]())
            #expect(wrong.status == 401)
            #expect(wrong.code == "212")
            let messages = try #require(try wrong.object["messages"] as? [[String: Any]])
            #expect(messages.first?["message"] as? String == "Invalid user account and/or password; please try again")
            let form = try await wire.call(
                .POST, fm + "/sessions", headers: [Wire.basic("switchboard", "fm-demo-Passw0rd!")], body: Data("{}".utf8),
                contentType: "text/plain")
            #expect(form.status == 415)
            let broken = try await wire.call(
                .POST, fm + "/sessions", headers: [Wire.basic("switchboard", "fm-demo-Passw0rd!")], body: Data("{".utf8),
                contentType: "application/json")
            #expect(broken.status == 400)
            #expect(broken.code == "1710")
            let noFile = try await wire.call(
                .POST, "/fmi/data/v1/databases/Nowhere/sessions", headers: [Wire.basic("switchboard", "fm-demo-Passw0rd!")],
                json: [String: Any]())
            #expect(noFile.code == "802")
            let source = try await wire.call(
                .POST, fm + "/sessions", headers: [Wire.basic("switchboard", "fm-demo-Passw0rd!")],
                json: ["fmDataSource": [["database": "Other", "username": "u", "password": "p"]]])
            #expect(source.status == 200)
        }
    }

    @Test func tokensAreRejectedWithoutAuthorizationWithBadTokensAndAfterLogOut() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.fileMakerLogIn()
            let none = try await wire.call(.GET, checkIns + "/records")
            #expect(none.status == 401)
            #expect(none.code == "10")
            let bad = try await wire.call(.GET, checkIns + "/records", headers: [Wire.bearer("not-a-token")])
            #expect(bad.status == 401)
            #expect(bad.code == "952")
            let valid = try await wire.call(.GET, "/fmi/data/vLatest/validateSession", headers: [Wire.bearer(token)])
            #expect(valid.status == 200)
            #expect(valid.code == "0")
            // Log-out takes no Authorization header.
            let out = try await wire.call(.DELETE, fm + "/sessions/\(token)")
            #expect(out.status == 200)
            #expect(out.code == "0")
            let after = try await wire.call(.GET, checkIns + "/records", headers: [Wire.bearer(token)])
            #expect(after.code == "952")
            let invalid = try await wire.call(.GET, "/fmi/data/vLatest/validateSession", headers: [Wire.bearer(token)])
            #expect(invalid.status == 401)
            #expect(invalid.code == "952")
            let twice = try await wire.call(.DELETE, fm + "/sessions/\(token)")
            #expect(twice.code == "952")
        }
    }

    @Test func aTokenDiesFifteenMinutesAfterItsLastUseAndEveryCallResetsTheClock() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.fileMakerLogIn()
            try await wire.advanceClock(seconds: 14 * 60)
            #expect(try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)]).code == "0")
            try await wire.advanceClock(seconds: 14 * 60)
            #expect(try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)]).code == "0")
            try await wire.advanceClock(seconds: 15 * 60 + 1)
            let expired = try await wire.call(.GET, checkIns + "/records/1", headers: [Wire.bearer(token)])
            #expect(expired.status == 401)
            #expect(expired.code == "952")
        }
    }

    @Test func theSessionLimitRefusesLogInsWith812() async throws {
        try await withEmulator({ $0.seed.filemaker.sessionLimit = 2 }) { emulator in
            let wire = Wire(emulator)
            let first = try await wire.fileMakerLogIn()
            _ = try await wire.fileMakerLogIn()
            let third = try await wire.call(
                .POST, fm + "/sessions", headers: [Wire.basic("switchboard", "fm-demo-Passw0rd!")], json: [String: Any]())
            #expect(third.status == 500)
            #expect(third.code == "812")
            try await wire.call(.DELETE, fm + "/sessions/\(first)")
            _ = try await wire.fileMakerLogIn()
        }
    }

    @Test func createGetEditDeleteAndDuplicate() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let created = try await wire.call(
                .POST, checkIns + "/records", headers: auth,
                json: ["fieldData": ["EventID": "evt-1", "FirstName": "Ana", "ParticipantID": 1000, "Bed": "Bed 3"], "portalData": [:]])
            #expect(created.status == 200)
            let recordId = try #require(created.response["recordId"] as? String)
            #expect(created.response["modId"] as? String == "0")
            let one = try await wire.call(.GET, checkIns + "/records/\(recordId)", headers: auth)
            let info = try #require(one.response["dataInfo"] as? [String: Any])
            #expect(info["foundCount"] as? Int == 1)
            #expect(info["returnedCount"] as? Int == 1)
            #expect(info["table"] as? String == "CheckIns")
            let data = try #require(one.response["data"] as? [[String: Any]])
            let fields = try #require(data.first?["fieldData"] as? [String: Any])
            #expect(fields["FirstName"] as? String == "Ana")
            #expect(fields["ParticipantID"] as? Int == 1000)
            #expect(fields["CheckInID"] as? Int == 13, "the serial field is auto-entered")
            #expect((fields["Created"] as? String)?.count == 19, "creation timestamp MM/dd/yyyy HH:mm:ss")
            #expect(data.first?["recordId"] as? String == recordId)
            #expect(data.first?["modId"] as? String == "0")

            let edited = try await wire.call(
                .PATCH, checkIns + "/records/\(recordId)", headers: auth, json: ["fieldData": ["Bed": "Bed 4"], "modId": "0"])
            #expect(edited.response["modId"] as? String == "1")
            let stale = try await wire.call(
                .PATCH, checkIns + "/records/\(recordId)", headers: auth, json: ["fieldData": ["Bed": "Bed 9"], "modId": "0"])
            #expect(stale.status == 500)
            #expect(stale.code == "306")
            let again = try await wire.call(.GET, checkIns + "/records/\(recordId)", headers: auth)
            let after = try #require((again.response["data"] as? [[String: Any]])?.first?["fieldData"] as? [String: Any])
            #expect(after["Bed"] as? String == "Bed 4", "only the listed field changed, and the stale edit changed nothing")
            #expect(after["FirstName"] as? String == "Ana")

            let duplicateOfSeed = try await wire.call(.POST, checkIns + "/records/2", headers: auth)
            #expect(duplicateOfSeed.code == "504", "the copy repeats the unique EventID")
            let staff = try await wire.call(.POST, fm + "/layouts/Staff/records/1", headers: auth)
            #expect(staff.status == 200)
            #expect(staff.response["modId"] as? String == "0")
            #expect(staff.response["recordId"] as? String == "6")

            let defaults = try await wire.call(.POST, fm + "/layouts/Staff/records", headers: auth, json: ["fieldData": [:]])
            #expect(defaults.code == "0", "{\"fieldData\":{}} creates a record with defaults")

            let deleted = try await wire.call(.DELETE, checkIns + "/records/\(recordId)", headers: auth)
            #expect(deleted.code == "0")
            #expect(try await wire.call(.GET, checkIns + "/records/\(recordId)", headers: auth).code == "101")
            #expect(try await wire.call(.DELETE, checkIns + "/records/\(recordId)", headers: auth).code == "101")
        }
    }

    @Test func writeErrors() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let unknownField = try await wire.call(.POST, checkIns + "/records", headers: auth, json: ["fieldData": ["Nope": "x"]])
            #expect(unknownField.status == 500)
            #expect(unknownField.code == "102")
            let unknownLayout = try await wire.call(.POST, fm + "/layouts/Nope/records", headers: auth, json: ["fieldData": [:]])
            #expect(unknownLayout.status == 500)
            #expect(unknownLayout.code == "105")
            let duplicate = try await wire.call(
                .POST, checkIns + "/records", headers: auth, json: ["fieldData": ["EventID": "0190a1b2-0000-7000-8000-000000000000"]])
            #expect(duplicate.status == 500)
            #expect(duplicate.code == "504")
            let missing = try await wire.call(.POST, checkIns + "/records", headers: auth, json: ["portalData": [:]])
            #expect(missing.status == 400)
            #expect(missing.code == "1708")
            let nullValue = try await wire.call(.POST, checkIns + "/records", headers: auth, json: ["fieldData": ["Bed": NSNull()]])
            #expect(nullValue.code == "1708")
            let syntax = try await wire.call(
                .POST, checkIns + "/records", headers: auth, body: Data("{\"fieldData\":".utf8), contentType: "application/json")
            #expect(syntax.status == 400)
            #expect(syntax.code == "1710")
            let plain = try await wire.call(
                .POST, checkIns + "/records", headers: auth, body: Data("{}".utf8), contentType: "text/plain")
            #expect(plain.status == 415)
            let badModId = try await wire.call(
                .PATCH, checkIns + "/records/1", headers: auth, json: ["fieldData": ["Bed": "x"], "modId": "four"])
            #expect(badModId.code == "1708")
            let wrongMethod = try await wire.call(.PUT, checkIns + "/records/1", headers: auth, json: ["fieldData": [:]])
            #expect(wrongMethod.status == 405)
            let badURL = try await wire.call(.GET, fm + "/layouts/CheckIns/nothing", headers: auth)
            #expect(badURL.status == 404)
        }
    }

    @Test func rangeWithOffsetLimitAndSort() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let first = try await wire.call(.GET, checkIns + "/records", headers: auth)
            let info = try #require(first.response["dataInfo"] as? [String: Any])
            #expect(info["totalRecordCount"] as? Int == 12)
            #expect(info["foundCount"] as? Int == 12)
            #expect(info["returnedCount"] as? Int == 12)
            let sort = "[{\"fieldName\":\"CheckInID\",\"sortOrder\":\"descend\"}]".addingPercentEncoding(
                withAllowedCharacters: .alphanumerics)!
            let page = try await wire.call(.GET, checkIns + "/records?_offset=2&_limit=3&_sort=\(sort)", headers: auth)
            let rows = try #require(page.response["data"] as? [[String: Any]])
            #expect(rows.map { $0["recordId"] as? String } == ["11", "10", "9"])
            #expect((page.response["dataInfo"] as? [String: Any])?["returnedCount"] as? Int == 3)
            let zero = try await wire.call(.GET, checkIns + "/records?_offset=0", headers: auth)
            #expect(zero.status == 400)
            #expect(zero.code == "1708")
            let badSortField = "[{\"fieldName\":\"Nope\"}]".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            #expect(try await wire.call(.GET, checkIns + "/records?_sort=\(badSortField)", headers: auth).code == "102")
        }
    }

    @Test func findWithOrOmitOperatorsSortOffsetAndLimit() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            func ids(_ body: [String: Any]) async throws -> [String] {
                let answer = try await wire.call(.POST, checkIns + "/_find", headers: auth, json: body)
                if answer.code == "401" { return [] }
                #expect(answer.code == "0", "\(answer.text)")
                return (answer.response["data"] as? [[String: Any]] ?? []).compactMap { $0["recordId"] as? String }
            }
            // Seed check-ins 1…12: shelters cycle Riverside, Harbor, Eastside; beds "Bed n".
            #expect(try await ids(["query": [["Shelter": "Harbor"]]]) == ["2", "5", "8", "11"])
            #expect(
                try await ids(["query": [["Shelter": "Harbor"], ["Shelter": "Eastside"]]]) == ["2", "3", "5", "6", "8", "9", "11", "12"])
            #expect(try await ids(["query": [["Shelter": "Harbor"], ["CheckInID": "<9", "omit": "true"]]]) == ["11"])
            #expect(try await ids(["query": [["CheckInID": "3...5"]]]) == ["3", "4", "5"])
            #expect(try await ids(["query": [["CheckInID": ">10"]]]) == ["11", "12"])
            #expect(try await ids(["query": [["CheckInID": ">=11"], ["CheckInID": "<=1"]]]) == ["1", "11", "12"])
            #expect(try await ids(["query": [["Bed": "==Bed 1"]]]) == ["1"], "== matches the whole field")
            #expect(try await ids(["query": [["Bed": "Bed 1"]]]) == ["1", "10", "11", "12"], "plain text matches word beginnings")
            #expect(try await ids(["query": [["FirstName": "J*"]]]) == ["3"])
            #expect(try await ids(["query": [["FirstName": "M@rcus"]]]) == ["2"], "@ is one character")
            #expect(try await ids(["query": [["Notes": "="]]]).count == 12, "= alone finds empty fields")
            #expect(try await ids(["query": [["Notes": "*"]]]).isEmpty)
            #expect(try await ids(["query": [["CheckedInAt": "11/03/2026...11/04/2026"]]]) == ["3", "4"])
            #expect(
                try await ids([
                    "query": [["CheckInID": "*"]], "sort": [["fieldName": "CheckInID", "sortOrder": "descend"]], "offset": "2", "limit": 2,
                ]) == ["11", "10"])
            // A leading omit starts from every record.
            #expect(try await ids(["query": [["Shelter": "Riverside", "omit": "true"]]]).count == 8)

            let none = try await wire.call(.POST, checkIns + "/_find", headers: auth, json: ["query": [["FirstName": "Zebulon"]]])
            #expect(none.status == 500)
            #expect(none.code == "401")
            let messages = try #require(try none.object["messages"] as? [[String: Any]])
            #expect(messages.first?["message"] as? String == "No records match the request")
            let nullCriterion = try await wire.call(.POST, checkIns + "/_find", headers: auth, json: ["query": [["FirstName": NSNull()]]])
            #expect(nullCriterion.code == "1708")
            let unknown = try await wire.call(.POST, checkIns + "/_find", headers: auth, json: ["query": [["Nope": "x"]]])
            #expect(unknown.code == "102")
            let empty = try await wire.call(.POST, checkIns + "/_find", headers: auth, json: ["query": []])
            #expect(empty.code == "1708")
            let info = try await wire.call(
                .POST, checkIns + "/_find", headers: auth, json: ["query": [["Shelter": "Harbor"]], "limit": "1"])
            let dataInfo = try #require(info.response["dataInfo"] as? [String: Any])
            #expect(dataInfo["foundCount"] as? Int == 4)
            #expect(dataInfo["returnedCount"] as? Int == 1)
        }
    }

    @Test func scriptsGlobalsAndMetadata() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let echo = try await wire.call(.GET, checkIns + "/script/Echo%20Parameter?script.param=hello%20there", headers: auth)
            #expect(echo.response["scriptResult"] as? String == "hello there")
            #expect(echo.response["scriptError"] as? String == "0")
            let count = try await wire.call(.GET, checkIns + "/script/Count%20Check-ins", headers: auth)
            #expect(count.response["scriptResult"] as? String == "12")
            let failing = try await wire.call(.GET, checkIns + "/script/Nightly%20Export", headers: auth)
            #expect(failing.response["scriptError"] as? String == "3")
            let missing = try await wire.call(.GET, checkIns + "/script/Nope", headers: auth)
            #expect(missing.status == 500)
            #expect(missing.code == "104")

            let globals = try await wire.call(
                .PATCH, fm + "/globals", headers: auth, json: ["globalFields": ["CheckIns::CurrentShift": "Night"]])
            #expect(globals.code == "0")
            let record = try await wire.call(.GET, checkIns + "/records/1", headers: auth)
            let fields = try #require((record.response["data"] as? [[String: Any]])?.first?["fieldData"] as? [String: Any])
            #expect(fields["CurrentShift"] as? String == "Night", "a global lasts as long as the session")
            let notGlobal = try await wire.call(.PATCH, fm + "/globals", headers: auth, json: ["globalFields": ["CheckIns::Bed": "x"]])
            #expect(notGlobal.code == "1708")
            let noField = try await wire.call(.PATCH, fm + "/globals", headers: auth, json: ["globalFields": ["CheckIns::Nope": "x"]])
            #expect(noField.code == "102")

            let product = try await wire.call(.GET, "/fmi/data/vLatest/productInfo")
            #expect((product.response["productInfo"] as? [String: Any])?["dateFormat"] as? String == "MM/dd/yyyy")
            let databases = try await wire.call(
                .GET, "/fmi/data/vLatest/databases", headers: [Wire.basic("switchboard", "fm-demo-Passw0rd!")])
            #expect((databases.response["databases"] as? [[String: Any]])?.map { $0["name"] as? String } == ["Shelter"])
            #expect(try await wire.call(.GET, "/fmi/data/vLatest/databases").code == "10")
            let layouts = try await wire.call(.GET, fm + "/layouts", headers: auth)
            #expect(
                (layouts.response["layouts"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == [
                    "CheckIns", "Participants", "Staff",
                ])
            let meta = try await wire.call(.GET, checkIns, headers: auth)
            let fieldMeta = try #require(meta.response["fieldMetaData"] as? [[String: Any]])
            #expect(fieldMeta.first { $0["name"] as? String == "EventID" }?["result"] as? String == "text")
            #expect(fieldMeta.first { $0["name"] as? String == "CurrentShift" }?["global"] as? Bool == true)
            #expect(try await wire.call(.GET, fm + "/layouts/Nope", headers: auth).code == "105")
            let scripts = try await wire.call(.GET, fm + "/scripts", headers: auth)
            #expect((scripts.response["scripts"] as? [[String: Any]])?.count == 3)
        }
    }

    @Test func containerUploadTakesAMultipartPartNamedUpload() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let auth = [Wire.bearer(try await wire.fileMakerLogIn())]
            let boundary = "sb-\(UUID().uuidString)"
            let photo = Data((0..<2048).map { UInt8($0 % 251) })
            var body = Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"ana.jpg\"\r\n".utf8)
            body += Data("Content-Type: image/jpeg\r\n\r\n".utf8) + photo + Data("\r\n--\(boundary)--\r\n".utf8)
            let type = "multipart/form-data; boundary=\(boundary)"
            let uploaded = try await wire.call(
                .POST, checkIns + "/records/1/containers/Photo/1", headers: auth, body: body, contentType: type)
            #expect(uploaded.code == "0", "\(uploaded.text)")
            #expect(uploaded.response["modId"] as? String == "1")
            let record = try await wire.call(.GET, checkIns + "/records/1", headers: auth)
            let fields = try #require((record.response["data"] as? [[String: Any]])?.first?["fieldData"] as? [String: Any])
            // An absolute URL of the host and port the client used, fetchable as it is, with
            // no credential (what a client that knows nothing of the emulator does with it).
            let url = try #require(fields["Photo"] as? String)
            #expect(url == "\(emulator.baseURL)/fmi/data/streaming/Shelter/CheckIns/1/Photo")
            let fetched = try await wire.fetch(url)
            #expect(fetched.status == 200)
            #expect(fetched.body == photo)
            #expect(fetched.header("Content-Type") == "image/jpeg")

            // The Host the client sent decides the authority; one that is not a plain host[:port]
            // is not echoed, the listening address stands in.
            func photoURL(host: String) async throws -> String? {
                let answer = try await wire.call(.GET, checkIns + "/records/1", headers: auth + [("Host", host)])
                return ((answer.response["data"] as? [[String: Any]])?.first?["fieldData"] as? [String: Any])?["Photo"] as? String
            }
            #expect(
                try await photoURL(host: "localhost:\(emulator.port)")
                    == "http://localhost:\(emulator.port)/fmi/data/streaming/Shelter/CheckIns/1/Photo")
            #expect(try await photoURL(host: "evil.example/x?y") == url)
            // A record without an upload shows an empty container.
            let other = try await wire.call(.GET, checkIns + "/records/2", headers: auth)
            #expect(((other.response["data"] as? [[String: Any]])?.first?["fieldData"] as? [String: Any])?["Photo"] as? String == "")

            let wrongPart = Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n--\(boundary)--\r\n".utf8)
            #expect(
                try await wire.call(.POST, checkIns + "/records/1/containers/Photo/1", headers: auth, body: wrongPart, contentType: type)
                    .code == "1708")
            #expect(
                try await wire.call(.POST, checkIns + "/records/1/containers/Bed/1", headers: auth, body: body, contentType: type).code
                    == "1708")
            #expect(
                try await wire.call(.POST, checkIns + "/records/1/containers/Nope/1", headers: auth, body: body, contentType: type).code
                    == "102")
            #expect(
                try await wire.call(.POST, checkIns + "/records/99/containers/Photo/1", headers: auth, body: body, contentType: type).code
                    == "101")
            #expect(
                try await wire.call(
                    .POST, checkIns + "/records/1/containers/Photo/1", headers: auth, body: body, contentType: "application/json"
                ).status == 415)
        }
    }

    @Test func walkLogInCreateFindEditStaleEditDeleteLogOut() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let token = try await wire.fileMakerLogIn()
            let auth = [Wire.bearer(token)]
            let eventID = UUID().uuidString.lowercased()
            let created = try await wire.call(
                .POST, checkIns + "/records", headers: auth,
                json: ["fieldData": ["EventID": eventID, "FirstName": "Marcus", "Shelter": "Harbor Family Center"]])
            let recordId = try #require(created.response["recordId"] as? String)
            let found = try await wire.call(.POST, checkIns + "/_find", headers: auth, json: ["query": [["EventID": "==\(eventID)"]]])
            let hit = try #require((found.response["data"] as? [[String: Any]])?.first)
            #expect(hit["recordId"] as? String == recordId)
            let modId = try #require(hit["modId"] as? String)
            let edited = try await wire.call(
                .PATCH, checkIns + "/records/\(recordId)", headers: auth, json: ["fieldData": ["Bed": "Bed 7"], "modId": modId])
            #expect(edited.code == "0")
            let stale = try await wire.call(
                .PATCH, checkIns + "/records/\(recordId)", headers: auth, json: ["fieldData": ["Bed": "Bed 8"], "modId": modId])
            #expect(stale.code == "306")
            #expect(try await wire.call(.DELETE, checkIns + "/records/\(recordId)", headers: auth).code == "0")
            #expect(try await wire.call(.DELETE, fm + "/sessions/\(token)").code == "0")
        }
    }
}
