import Foundation
import SwitchboardBackends
import SwitchboardHTTP
import Testing

/// The seed documents' flows through our clients. Each returns every secret it used or was
/// given, so the redaction test can look for them in logs and errors.
enum Flows {
    static func eto(_ h: Harness) async throws -> [String] {
        let eto = h.eto
        let sso = try await eto.authenticate(email: Seed.etoEmail, password: Seed.etoPassword)
        let enterprises = try await eto.enterprises(sso: sso)
        #expect(enterprises == [ETO.Enterprise(guid: Seed.enterprise, name: "Riverside Continuum of Care")])
        let sites = try await eto.sites(sso: sso, enterpriseGuid: Seed.enterprise)
        #expect(sites.map(\.id) == [101, 102, 103])
        var session = try await eto.siteLogIn(sso: sso, enterpriseGuid: Seed.enterprise, siteID: 101, utcOffset: -300)
        #expect(session.siteID == 101 && session.programID == nil)

        let programs = try await eto.programs(siteID: 101, auth: .fixed(session))
        #expect(programs.map(\.id) == [792, 793], "the disabled program 794 is dropped")
        let everything = try await eto.programs(siteID: 101, includeDisabled: true, auth: .fixed(session))
        #expect(everything.first { $0.id == 794 }?.disabled == true)
        #expect(everything.first { $0.id == 792 }?.guid == "d23f0824-128b-4f33-8c5c-7fd0a6a3a450")

        session = try await eto.updateCurrentProgram(792, session: session)
        #expect(session.programID == 792)
        let info = try await eto.siteInfo(siteID: 101, auth: .fixed(session))
        #expect(info.idleTimeoutMinutes == 20 && info.securityTokenRecycleIntervalMinutes == 60)

        let ana = try await eto.participant(id: 1000, auth: .fixed(session))
        #expect(ana.firstName == "Ana" && ana.lastName == "Ortiz" && ana.gender == .male && ana.subjectID == 5000)
        #expect(ana.dateOfBirth?.milliseconds == 193_881_600_000)

        let hits = try await eto.search(programID: 792, text: "Ortiz", auth: .fixed(session))
        #expect(hits.map(\.clid) == [1000])
        #expect(hits.first?.programStartDate?.milliseconds == 1_484_028_633_406)

        // Devon Hart (1003) is in 792 only; enroll him in Street Outreach.
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let enrollment = try await eto.enroll(participantID: 1003, programID: 793, startDate: start, auth: .fixed(session))
        #expect(enrollment >= 200)
        #expect(try await eto.search(programID: 793, text: "Hart", auth: .fixed(session)).map(\.clid) == [1003])

        let created = Date(timeIntervalSince1970: 1_762_000_000)
        let response = ETO.TouchPointResponse(
            touchPointID: 54, subjectID: 5000, programID: 792, created: created,
            elements: [
                .text(819, "Bed 12"), .singleChoice(814, choiceID: 1278),
                .date(820, created, timeZone: TimeZone(identifier: "America/Chicago")!),
            ])
        let id = try await eto.addTouchPointResponse(response, auth: .fixed(session))
        let listed = try await eto.touchPointResponses(subjectID: 5000, touchPointID: 54, auth: .fixed(session))
        #expect(listed.count == 2, "the seed response and ours")
        let ours = try #require(listed.first { $0.id == id })
        #expect(ours.elements.first { $0.elementID == 819 }?.value == "Bed 12")
        #expect(ours.elements.first { $0.elementID == 814 }?.choiceIDs == [1278])
        #expect(ours.elements.first { $0.elementID == 820 }?.value == "11/01/2025")
        #expect(ours.created?.milliseconds == 1_762_000_000_000)
        let one = try await eto.touchPointResponse(touchPointID: 54, responseID: id, auth: .fixed(session))
        #expect(one == ours)

        // The whole chain in one call, as a credential cache refreshes it.
        let chained = try await eto.logIn(ETO.Account(email: Seed.etoEmail, password: Seed.etoPassword, siteID: 102, programID: 801))
        #expect(chained.enterpriseGuid == Seed.enterprise && chained.siteID == 102 && chained.programID == 801)
        return [Seed.etoPassword, sso.token, session.securityToken, chained.securityToken]
    }

    static func fileMaker(_ h: Harness) async throws -> [String] {
        let fm = h.fileMaker()
        #expect(try await fm.productInfo().version.isEmpty == false)
        #expect(try await fm.databases(account: Seed.fmAccount, password: Seed.fmPassword) == ["Shelter"])
        let session = try await fm.logIn(account: Seed.fmAccount, password: Seed.fmPassword)
        #expect(session.idleLifetime == .seconds(900))
        #expect(try await fm.validateSession(session))
        let auth = CredentialSource.fixed(session)

        let eventID = UUID().uuidString.lowercased()
        let reference = try await fm.create(
            layout: "CheckIns",
            fieldData: [
                "EventID": .text(eventID), "ParticipantID": 1000, "FirstName": "Ana", "LastName": "Ortiz",
                "Shelter": "Riverside Emergency Shelter", "Bed": "Bed 12", "CheckedInAt": "11/20/2026 21:30:00",
            ], auth: auth)
        #expect(reference.modId == "0")
        let created = try await fm.record(layout: "CheckIns", id: reference.recordId, auth: auth)
        let serial = try #require(created["CheckInID"]?.number)
        #expect(created["EventID"] == .text(eventID))

        // (Riverside AND CheckInID ≥ 4) OR EventID == ours OR CheckInID in 1...2, then omit Omar.
        let found = try await fm.find(
            layout: "CheckIns",
            [
                .matching(("Shelter", "Riverside")).and("CheckInID", FileMaker.Find.greaterThan("4", orEqual: true)),
                .matching(("EventID", FileMaker.Find.equals(eventID))),
                .matching(("CheckInID", FileMaker.Find.range("1", "2"))),
                .omitting(("FirstName", "Omar")),
            ], sort: [FileMaker.SortField("CheckInID")], auth: auth)
        #expect(found.data.compactMap { $0["CheckInID"]?.number } == [1, 2, 4, 7, serial])
        #expect(found.dataInfo.foundCount == 5 && found.dataInfo.table == "CheckIns")

        let none = try await fm.find(layout: "CheckIns", [.matching(("LastName", "Nobodyhere"))], auth: auth)
        #expect(none.isEmpty && none.dataInfo.foundCount == 0, "no match is an empty found set, not an error")

        let page = try await fm.records(layout: "CheckIns", offset: 2, limit: 3, sort: [.init("CheckInID", .descend)], auth: auth)
        #expect(page.data.compactMap { $0["CheckInID"]?.number } == [12, 11, 10])

        let modId = try await fm.edit(layout: "CheckIns", id: reference.recordId, fieldData: ["Bed": "Bed 14"], modId: "0", auth: auth)
        #expect(modId == "1")
        let stale = await #expect(throws: HTTPError.self) {
            try await fm.edit(layout: "CheckIns", id: reference.recordId, fieldData: ["Bed": "Bed 99"], modId: "0", auth: auth)
        }
        #expect(stale?.vendorCode == "306" && stale?.status == 500 && stale?.attempts == 1)
        #expect(try await fm.record(layout: "CheckIns", id: reference.recordId, auth: auth)["Bed"] == "Bed 14")

        // A check-in cannot be duplicated (EventID is unique: 504); a staff record can.
        let notUnique = await #expect(throws: HTTPError.self) {
            try await fm.duplicate(layout: "CheckIns", id: reference.recordId, auth: auth)
        }
        #expect(notUnique?.vendorCode == "504")
        let copy = try await fm.duplicate(layout: "Staff", id: "1", auth: auth)
        let copied = try await fm.record(layout: "Staff", id: copy.recordId, auth: auth)
        #expect(copied["Name"] == "Grace Lin" && copy.recordId != "1")

        let echo = try await fm.runScript(layout: "CheckIns", name: "Echo Parameter", parameter: "a&b c=d é", auth: auth)
        #expect(echo.scriptResult == "a&b c=d é" && echo.succeeded)
        #expect(try await fm.runScript(layout: "CheckIns", name: "Count Check-ins", auth: auth).scriptResult == "13")
        let failing = try await fm.runScript(layout: "CheckIns", name: "Nightly Export", auth: auth)
        #expect(!failing.succeeded && failing.scriptError == "3")
        #expect(Set(try await fm.scripts(auth: auth).map(\.name)) == ["Echo Parameter", "Count Check-ins", "Nightly Export"])

        try await fm.setGlobals(["CheckIns::CurrentShift": "Night"], auth: auth)
        #expect(try await fm.record(layout: "CheckIns", id: "1", auth: auth)["CurrentShift"] == "Night")

        let photo = Data((0..<512).map { UInt8($0 % 251) })
        let uploaded = try await fm.uploadContainer(
            layout: "CheckIns", id: reference.recordId, field: "Photo", data: photo, filename: "photo.png", contentType: "image/png",
            auth: auth)
        #expect(uploaded == "2")
        // The field holds an absolute URL, fetched as it is.
        let streamURL = try #require(try await fm.record(layout: "CheckIns", id: reference.recordId, auth: auth)["Photo"]?.text)
        #expect(streamURL.hasPrefix(h.base + "/fmi/data/streaming/"))
        let streamed = try await h.http.execute(
            SwitchboardHTTP.HTTPRequest(.get, streamURL, api: .fileMaker, operation: "container.stream"))
        #expect(streamed.body == photo)

        #expect(try await fm.layouts(auth: auth).map(\.name).contains("CheckIns"))
        let fields = try await fm.layoutMetadata(layout: "CheckIns", auth: auth).fieldMetaData
        #expect(fields.first { $0.name == "Photo" }?.result == "container")
        #expect(fields.first { $0.name == "CurrentShift" }?.global == true)

        // Idempotent writes.
        let second = UUID().uuidString.lowercased()
        let first = try await fm.createIfAbsent(
            layout: "CheckIns", uniqueField: "EventID", value: second, fieldData: ["FirstName": "Mei", "Bed": "Bed 3"], auth: auth)
        #expect(first.created)
        #expect(try await fm.record(layout: "CheckIns", id: first.reference.recordId, auth: auth)["FirstName"] == "Mei")
        let again = try await fm.createIfAbsent(
            layout: "CheckIns", uniqueField: "EventID", value: second, fieldData: ["FirstName": "Mei", "Bed": "Bed 3"], auth: auth)
        #expect(!again.created && again.reference.recordId == first.reference.recordId)

        try await fm.delete(layout: "Staff", id: copy.recordId, auth: auth)
        try await fm.delete(layout: "CheckIns", id: reference.recordId, auth: auth)
        let gone = await #expect(throws: HTTPError.self) { try await fm.record(layout: "CheckIns", id: reference.recordId, auth: auth) }
        #expect(gone?.vendorCode == "101")

        try await fm.logOut(session)
        #expect(try await fm.validateSession(session) == false)
        return [Seed.fmPassword, session.token]
    }

    /// A password with every character the seed client broke on.
    static let trickyPassword = "p&ss #word+1 é/ü?=%"

    static func directory(_ h: Harness) async throws -> [String] {
        let directory = h.directory
        let name = "night desk #\(UUID().uuidString.prefix(8)) & co"
        let created = try await directory.createUser(name: name, password: trickyPassword)
        let key = try await directory.logIn(user: name, password: trickyPassword)
        #expect(key == created && !key.key.isEmpty)
        let auth = CredentialSource.fixed(key)
        #expect(try await directory.people(auth: auth).isEmpty)
        let person = try await directory.addPerson(name: "Noor Haddad", office: "Street Outreach, van 3", auth: auth)
        #expect(person.name == "Noor Haddad" && person.office == "Street Outreach, van 3")
        #expect(try await directory.people(auth: auth) == [person])
        try await directory.deletePerson(id: person.id, auth: auth)
        #expect(try await directory.people(auth: auth).isEmpty)

        let seeded = try await directory.logIn(user: Seed.directoryUser, password: Seed.directoryPassword)
        #expect(try await directory.people(auth: .fixed(seeded)).map(\.name).contains("Grace Lin"))
        return [trickyPassword, Seed.directoryPassword, key.key, seeded.key]
    }

    static func sap(_ h: Harness) async throws -> [String] {
        let sap = h.sap
        let connection = try await sap.register(
            user: Seed.sapUser, password: Seed.sapPassword, device: SAP.Device(deviceType: "Android", deviceModel: "Kiosk 7"))
        #expect(connection.userName == Seed.sapUser && connection.deviceModel == "Kiosk 7")
        #expect(try await sap.check(connection.id) == .valid)
        #expect(try await sap.connection(connection.id)?.id == connection.id)
        #expect(try await sap.serviceRoot(auth: .fixed(connection.id)).contains("Shelters"))
        #expect(try await sap.delete(connection.id))
        #expect(try await sap.check(connection.id) == .gone)
        #expect(try await sap.connection(connection.id) == nil)
        #expect(try await sap.delete(connection.id) == false)
        return [Seed.sapPassword, connection.id.value]
    }
}
