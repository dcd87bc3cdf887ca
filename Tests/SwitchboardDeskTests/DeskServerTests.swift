import Foundation
import Logging
import SwitchboardBus
import SwitchboardDesk
import SwitchboardEmulators
import SwitchboardKiosk
import SwitchboardProtocol
import SwitchboardTesting
import Synchronization
import Testing

/// The desk's HTTP interface, through a real HTTP client against the real server over a real
/// outbox and SQLite store.
@Suite("Front desk: sign-in, forms, outbox", .serialized, .timeLimit(.minutes(5)))
struct DeskServerTests {
    @Test("accounts: a PBKDF2 hash in a 0600 file, a staff id, the right password only; a taken name refused")
    func accounts() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        let attributes = try FileManager.default.attributesOfItem(atPath: harness.usersPath)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let text = try String(contentsOfFile: harness.usersPath, encoding: .utf8)
        #expect(!text.contains(DeskHarness.password))
        #expect(harness.account.staffID.wholeMatch(of: /staff-[0-9a-f]{8}/) != nil)
        #expect(harness.account.iterations >= 210_000)
        var accounts = try DeskAccounts(path: harness.usersPath)
        #expect(await accounts.verify(name: DeskHarness.staffName, password: DeskHarness.password)?.staffID == harness.account.staffID)
        #expect(await accounts.verify(name: DeskHarness.staffName, password: "wrong password") == nil)
        #expect(await accounts.verify(name: "nobody", password: DeskHarness.password) == nil)
        #expect(throws: DeskAccounts.Failure.self) { _ = try accounts.add(name: DeskHarness.staffName, password: "another one") }
        #expect(try accounts.remove(name: DeskHarness.staffName))
        #expect(try DeskAccounts(path: harness.usersPath).accounts.isEmpty)
    }

    @Test("no session: pages redirect to sign-in, the event stream answers 401; security headers on every answer")
    func withoutSession() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.run { client in
            let page = try await client.get("/")
            #expect(page.status == 303)
            #expect(page.location == "/signin")
            #expect(try await client.get("/events").status == 401)
            let signIn = try await client.get("/signin")
            #expect(signIn.status == 200)
            #expect(signIn.body.contains("<label for=\"password\">"))
            let csp = signIn.headers["content-security-policy"] ?? ""
            #expect(csp.contains("default-src 'self'"))
            #expect(csp.contains("frame-ancestors 'none'"))
            #expect(signIn.headers["x-content-type-options"] == "nosniff")
            #expect(signIn.headers["referrer-policy"] != nil)
            #expect(!signIn.body.contains("<script>"))  // no inline script: only /desk.js
            #expect(try await client.get("/desk.js").status == 200)
        }
    }

    @Test("sign-in: a wrong password refused; five wrong lock the name even for the right password; an unknown name locks alike")
    func lockOut() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.run { client in
            let wrong = try await client.post("/signin", ["name": DeskHarness.staffName, "password": "not it at all"])
            #expect(wrong.status == 401)
            #expect(wrong.body.contains("Wrong name or password"))
            for _ in 1..<4 { _ = try await client.post("/signin", ["name": DeskHarness.staffName, "password": "not it at all"]) }
            let fifth = try await client.post("/signin", ["name": DeskHarness.staffName, "password": "not it at all"])
            #expect(fifth.status == 429)
            let right = try await client.post("/signin", ["name": DeskHarness.staffName, "password": DeskHarness.password])
            #expect(right.status == 429)
            #expect(right.body.contains("locked"))
            // A name that does not exist says the same, so the page does not tell which exist.
            var unknown: DeskClient.Answer?
            for _ in 1...5 { unknown = try await client.post("/signin", ["name": "Nobody Here", "password": "not it at all"]) }
            #expect(unknown?.status == 429)
            #expect(unknown?.body == right.body)
        }
        #expect(harness.leaks(["not it at all", "Nobody Here"]).isEmpty)
    }

    @Test(
        "every state-changing route (sign-in, sign-out, check-in, walk-in, void) refuses a cross-site POST; those of a session also one without its CSRF token"
    )
    func everyRouteRefusesCrossSite() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.run { client in
            let csrf = try await client.signIn()
            let forms: [(String, [String: String])] = [
                ("/checkin", ["participant_id": "1003"]),
                ("/walkin", ["first_name": "Pia", "last_name": "Holm", "date_of_birth": "1970-01-02"]),
                ("/void", ["event_id": "019ac1d2-3e4f-7a00-8b00-0123456789ab", "reason": "mistake"]),
                ("/signout", [:]),
            ]
            for (path, form) in forms {
                #expect(try await client.post(path, form).status == 403, "\(path) without the CSRF token")
                var withToken = form
                withToken["csrf"] = csrf
                #expect(try await client.post(path, withToken, origin: "http://evil.example").status == 403, "\(path) cross-site")
                #expect(try await client.post(path, withToken, withOrigin: false).status == 403, "\(path) without an Origin")
            }
            // Still signed in (the refused sign-out did nothing), and nothing was saved.
            #expect(try await client.get("/").status == 200)
            #expect(try await harness.outbox.counts().pending == 0)
            let signIn = ["name": harness.account.name, "password": DeskHarness.password]
            #expect(try await client.post("/signin", signIn, origin: "http://evil.example").status == 403)
            #expect(try await client.post("/signin", signIn, withOrigin: false).status == 403)
        }
    }

    @Test("a POST without the CSRF token, or from another origin, is refused; with both it lands in the outbox with recorded_by")
    func csrfAndOrigin() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.store.upsert([RosterPerson(participantID: 1003, firstName: "José", lastName: "Núñez", dateOfBirth: "1984-02-29")])
        try await harness.run { client in
            let csrf = try await client.signIn()
            let form = ["participant_id": "1003", "bed": "B-4", "notes": "late arrival"]
            #expect(try await client.post("/checkin", form).status == 403)
            var withToken = form
            withToken["csrf"] = csrf
            let crossSite = try await client.post("/checkin", withToken, origin: "http://evil.example")
            #expect(crossSite.status == 403)
            #expect(try await client.post("/checkin", withToken, withOrigin: false).status == 403)
            #expect(try await harness.outbox.counts().pending == 0)
            let saved = try await client.post("/checkin", withToken)
            #expect(saved.status == 303)
            let pending = try await harness.outbox.pending(limit: 10)
            #expect(pending.count == 1)
            let checkIn = try JSONDecoder().decode(CheckIn.self, from: pending[0].content)
            #expect(checkIn.recordedBy == harness.account.staffID)
            #expect(checkIn.participant.etoParticipantID == 1003)
            #expect(checkIn.bed == "B-4")
            #expect(checkIn.siteID == 101 && checkIn.programID == 793)
            let page = try await client.get("/")
            #expect(page.body.contains("José Núñez"))
            #expect(page.body.contains("Saved on this desk"))
        }
        #expect(harness.leaks(["José", "Núñez", "1984-02-29", "late arrival"]).isEmpty)
    }

    @Test("walk-in: a check-in with participant.new, offline too; a missing field is named; void once, a second void refused")
    func walkInAndVoid() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.run(connected: { false }) { client in
            let csrf = try await client.signIn()
            let missing = try await client.post(
                "/walkin", ["csrf": csrf, "first_name": "Mara", "last_name": "Quist", "date_of_birth": ""])
            #expect(missing.status == 422)
            #expect(missing.body.contains("Date of birth is required"))
            let future = try await client.post(
                "/walkin", ["csrf": csrf, "first_name": "Mara", "last_name": "Quist", "date_of_birth": "2999-01-01"])
            #expect(future.status == 422)
            #expect(future.body.contains("Date of birth must not be in the future"))
            let saved = try await client.post(
                "/walkin",
                ["csrf": csrf, "first_name": "Mara", "last_name": "Quist", "date_of_birth": "1979-06-30", "gender": "female", "bed": "12"])
            #expect(saved.status == 303)
            let page = try await client.get("/")
            #expect(page.body.contains("Offline: the broker does not answer"))
            #expect(page.body.contains("1 waiting"))
            let entries = try await harness.outbox.pending(limit: 10)
            let walkIn = try JSONDecoder().decode(CheckIn.self, from: entries[0].content)
            #expect(walkIn.participant.isWalkIn)
            #expect(walkIn.participant.gender == "female")
            #expect(walkIn.participant.etoParticipantID == nil)
            #expect(walkIn.recordedBy == harness.account.staffID)

            let noReason = try await client.post("/void", ["csrf": csrf, "event_id": entries[0].eventID, "reason": " "])
            #expect(noReason.status == 409)
            #expect(noReason.body.contains("Reason is required"))
            #expect(try await client.post("/void", ["csrf": csrf, "event_id": entries[0].eventID, "reason": "wrong person"]).status == 303)
            let again = try await client.post("/void", ["csrf": csrf, "event_id": entries[0].eventID, "reason": "wrong person"])
            #expect(again.status == 409)
            #expect(again.body.contains("voided already"))
            let both = try await harness.outbox.pending(limit: 10)
            #expect(both.count == 2)
            #expect(both[1].type == CheckInVoid.type)
            let void = try JSONDecoder().decode(CheckInVoid.self, from: both[1].content)
            #expect(void.checkInEventID == entries[0].eventID)
            #expect(void.recordedBy == harness.account.staffID)
            #expect(try await harness.store.checkIn(entries[0].eventID)?.key == CheckInForm.orderingKey(walkIn))
            #expect(try await client.get("/").body.contains("Voided: saved on this desk"))
        }
        #expect(harness.leaks(["Mara", "Quist", "1979-06-30", "wrong person"]).isEmpty)
    }

    @Test("search: the kept roster by accent- and case-insensitive prefix of first or last name, and date of birth")
    func search() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.store.upsert([
            RosterPerson(participantID: 1, firstName: "José", lastName: "Núñez", dateOfBirth: "1984-02-29"),
            RosterPerson(participantID: 2, firstName: "Joseph", lastName: "Smith", dateOfBirth: "1990-01-01"),
            RosterPerson(participantID: 3, firstName: "Ana", lastName: "Nunn"),
        ])
        #expect(try await harness.store.search(name: "jose", dateOfBirth: nil).map(\.participantID) == [1, 2])
        #expect(try await harness.store.search(name: "NUN", dateOfBirth: nil).map(\.participantID).sorted() == [1, 3])
        #expect(try await harness.store.search(name: "jos nu", dateOfBirth: nil).map(\.participantID) == [1])
        #expect(try await harness.store.search(name: "jos", dateOfBirth: "1990-01-01").map(\.participantID) == [2])
        #expect(try await harness.store.search(name: "%", dateOfBirth: nil).isEmpty)
        try await harness.run { client in
            _ = try await client.signIn()
            let page = try await client.get("/?name=nunez&dob=")
            #expect(page.body.contains("José"))
            #expect(page.body.contains("Roster: never updated"))
        }
    }

    @Test("the event stream: a session's first frame holds today's check-ins with their states and the banner")
    func eventStream() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.run(connected: { false }) { client in
            #expect(try await client.firstEvent() == "status 401")
            let csrf = try await client.signIn()
            #expect(
                try await client.post("/walkin", ["csrf": csrf, "first_name": "Ola", "last_name": "Berg", "date_of_birth": "1999-09-09"])
                    .status == 303)
            let id = try #require(try await harness.outbox.pending(limit: 1).first?.eventID)
            let frame = try await client.firstEvent()
            #expect(frame.hasPrefix("data: {"))
            #expect(frame.contains("\"\(id)\":{\"kind\":\"saved\""))
            #expect(frame.contains("Offline: the broker does not answer"))
            #expect(!frame.contains("Ola") && !frame.contains("1999-09-09"), "the stream carries states, not people")
        }
    }

    @Test("under TLS: the page over HTTPS, the session cookie Secure, HttpOnly and SameSite=Strict; the Origin is https")
    func tls() async throws {
        let harness = try DeskHarness()
        defer { harness.directory.remove() }
        try await harness.run(tls: try EmulatorTLS.generate()) { client in
            #expect(client.base.hasPrefix("https://"))
            let csrf = try await client.signIn()
            let cookie = try #require(client.setCookie.withLock { $0 })
            #expect(cookie.contains("; Secure") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))
            #expect(
                try await client.post("/walkin", ["csrf": csrf, "first_name": "Ola", "last_name": "Berg", "date_of_birth": "1999-09-09"])
                    .status == 303)
            let plain = client.base.replacingOccurrences(of: "https://", with: "http://")
            #expect(
                try await client.post(
                    "/walkin", ["csrf": csrf, "first_name": "A", "last_name": "B", "date_of_birth": "1999-09-09"], origin: plain
                )
                .status == 403)
        }
    }

    @Test("--listen other than loopback needs --tls-cert and --tls-key, named in the refusal")
    func listen() throws {
        #expect(throws: Never.self) { try DeskListen.check(host: "127.0.0.1", certificate: nil, key: nil) }
        #expect(throws: Never.self) { try DeskListen.check(host: "::1", certificate: nil, key: nil) }
        do {
            try DeskListen.check(host: "0.0.0.0", certificate: nil, key: nil)
            Issue.record("0.0.0.0 without TLS was accepted")
        } catch {
            #expect(error.description.contains("--tls-cert"))
            #expect(error.description.contains("--tls-key"))
        }
        #expect(throws: Never.self) { try DeskListen.check(host: "10.0.0.5", certificate: "c.pem", key: "k.pem") }
    }

    @Test("sessions: idle sign-out; the lock-out ends after its time")
    func sessions() throws {
        let clock = ManualClock()
        let sessions = DeskSessions(idle: .seconds(600), lockOut: .seconds(900), now: { clock.now })
        let account = try DeskAccount.make(name: "x", password: "not used here")
        guard case .signedIn(let session) = sessions.signIn(name: "x", client: "c", account: account) else {
            Issue.record("not signed in")
            return
        }
        #expect(session.id.count == 64 && session.csrf.count == 64)
        clock.advance(.seconds(599))
        #expect(sessions.session(session.id) != nil)
        clock.advance(.seconds(601))
        #expect(sessions.session(session.id) == nil)
        for _ in 1...5 { _ = sessions.signIn(name: "x", client: "c", account: nil) }
        #expect(sessions.signIn(name: "x", client: "c", account: account) == .locked)
        clock.advance(.seconds(901))
        if case .signedIn = sessions.signIn(name: "x", client: "c", account: account) {} else { Issue.record("still locked") }
        // Across names from one client: the client's limit.
        for index in 0..<20 { _ = sessions.signIn(name: "guess-\(index)", client: "d", account: nil) }
        #expect(sessions.signIn(name: "x", client: "d", account: account) == .locked)
    }
}

/// A clock the test moves.
final class ManualClock: Sendable {
    private let start = ContinuousClock.now
    private let offset = Mutex<Duration>(.zero)
    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
    func advance(_ by: Duration) { offset.withLock { $0 += by } }
}
