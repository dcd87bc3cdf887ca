import Foundation
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardProtocol
import Synchronization
import Testing

@testable import SwitchboardWorkers

/// The workers' decisions as values: which failure is retried, which becomes a dead letter, what
/// a mapping accepts. No socket, no server.
@Suite("Worker rules")
struct RuleTests {
    func error(_ code: HTTPError.Code, status: Int? = nil, vendor: String? = nil, api: APIProfile = .fileMaker) -> HTTPError {
        HTTPError(
            code, context: .init(api: api, operation: "records.create", method: "POST", redactedURL: "https://fm/records"), status: status,
            vendorCode: vendor, message: "test")
    }

    func isRetry(_ settlement: Settlement) -> Bool {
        if case .retry = settlement { return true }
        return false
    }

    @Test(
        "FileMaker: connection trouble, 5xx, 429, 952 and host errors are retried; missing fields, validation and 4xx are dead letters with the code"
    )
    func fileMakerSettlements() {
        for retried in [
            error(.connectionFailed), error(.timeout), error(.credentialRejected, status: 401, vendor: "952"),
            error(.httpStatus, status: 503), error(.httpStatus, status: 502), error(.httpStatus, status: 429),
            error(.vendor, status: 500, vendor: "812"), error(.vendor, status: 500, vendor: "802"), error(.credentialUnavailable),
        ] {
            #expect(
                isRetry(SettlementRules.fileMaker.settlement(for: retried)),
                "\(retried.code) \(retried.status ?? 0) \(retried.vendorCode ?? "-")")
        }
        let cases: [(HTTPError, String)] = [
            (error(.vendor, status: 500, vendor: "102"), "filemaker-102"), (error(.vendor, status: 500, vendor: "105"), "filemaker-105"),
            (error(.vendor, status: 500, vendor: "507"), "filemaker-507"), (error(.vendor, status: 400, vendor: "1708"), "filemaker-1708"),
            (error(.httpStatus, status: 404), "filemaker-http-404"), (error(.invalidRequest), "filemaker-invalid-request"),
        ]
        for (failure, code) in cases {
            let settlement = SettlementRules.fileMaker.settlement(for: failure)
            // A validation refusal (5xx) is told in codes: FileMaker's message may quote the value.
            if failure.vendorCode?.hasPrefix("5") == true {
                #expect(settlement.code == code && !"\(settlement)".contains(failure.description), "\(settlement)")
            } else {
                #expect(settlement == .deadLetter(code: code, message: failure.description))
            }
        }
    }

    @Test("a refresh limit's failure is retried when the limit frees up (1 s to 10 min); others after the group's back-off")
    func refreshLimitWaits() {
        let now = Date()
        func limited(in seconds: TimeInterval?) -> HTTPError {
            var failure = error(.credentialUnavailable)
            failure.retryAfter = seconds.map { now.addingTimeInterval($0) }
            return failure
        }
        #expect(Settlement.delay(for: limited(in: 20.5), now: now) == .milliseconds(20_500))
        #expect(Settlement.delay(for: limited(in: -3), now: now) == .seconds(1))
        #expect(Settlement.delay(for: limited(in: 86_400), now: now) == .seconds(600))
        #expect(Settlement.delay(for: limited(in: nil), now: now) == nil)
        for settlement in [
            SettlementRules.fileMaker.settlement(for: limited(in: 30)), SettlementRules.eto.settlement(for: limited(in: 30)),
            SettlementRules.directory.settlement(for: limited(in: 30)),
        ] {
            guard case .retry(let delay, _, _) = settlement, let delay else {
                Issue.record("\(settlement)")
                continue
            }
            #expect(delay > .seconds(25) && delay <= .seconds(30), "\(delay)")
        }
        guard case .retry(nil, _, _) = SettlementRules.fileMaker.settlement(for: limited(in: nil)) else {
            Issue.record("without a time, the group's back-off")
            return
        }
    }

    @Test("every settlement the three workers' rules make is one the broker takes: codes of a–z 0–9 -, messages of at most 1000 characters")
    func settlementsAreWireSafe() throws {
        let kinds: [HTTPError.Code] = [
            .connectionFailed, .timeout, .tls, .httpStatus, .vendor, .decoding, .responseTooLarge, .credentialRejected, .invalidCredentials,
            .credentialUnavailable, .invalidRequest, .invalidConfiguration, .cancelled, .shutDown, .notResent,
        ]
        var settlements: [Settlement] = []
        for kind in kinds {
            for (status, vendor) in [(nil, nil), (503, nil), (500, "952"), (500, "102"), (400, "1708"), (404, nil)] as [(Int?, String?)] {
                let failure = error(kind, status: status, vendor: vendor)
                settlements += [
                    SettlementRules.fileMaker.settlement(for: failure), SettlementRules.eto.settlement(for: failure),
                    SettlementRules.directory.settlement(for: failure),
                ]
            }
        }
        let long = Settlement.deadLetter(code: "eto-http-400", message: String(repeating: "é", count: 5000))
        settlements.append(long)
        for settlement in settlements.map(\.wireSafe) {
            switch settlement {
            case .done: break
            case .retry(_, let code, let message), .deadLetter(let code, let message):
                #expect(SettleHeader.isValidCode(code), "\(code)")
                #expect(message.unicodeScalars.count <= 1000)
            }
        }
        #expect(Settlement.code("filemaker-connectionFailed") == "filemaker-connection-failed")
        #expect(Settlement.code("eto-notResent") == "eto-not-resent")
        #expect(Settlement.code("9 lives!") == "error-9-lives")
        // The rules produce valid codes themselves; wireSafe is the guard, not the fix.
        #expect(SettlementRules.fileMaker.settlement(for: error(.connectionFailed)).code == "filemaker-connection-failed")
    }

    @Test("ETO: a write not sent again after the log-in page is retried (it looks first next time); a 400 fault is a dead letter")
    func etoSettlements() {
        #expect(isRetry(SettlementRules.eto.settlement(for: error(.notResent, status: 200, api: .eto))))
        #expect(isRetry(SettlementRules.eto.settlement(for: error(.httpStatus, status: 503, api: .eto))))
        #expect(isRetry(SettlementRules.eto.settlement(for: error(.connectionFailed, api: .eto))))
        #expect(SettlementRules.eto.settlement(for: error(.vendor, status: 400, api: .eto)).code == "eto-http-400")
    }

    @Test(
        "ETO's table: connection trouble, a write not sent again, 5xx, 429 and 408 are retried; a bad request and other statuses are dead letters"
    )
    func etoTable() {
        let rules = SettlementRules.eto
        for retried in [
            error(.timeout, api: .eto), error(.credentialRejected, status: 401, api: .eto), error(.notResent, status: 302, api: .eto),
            error(.httpStatus, status: 500, api: .eto), error(.httpStatus, status: 429, api: .eto),
            error(.httpStatus, status: 408, api: .eto),
            error(.credentialUnavailable, api: .eto),
        ] {
            #expect(isRetry(rules.settlement(for: retried)), "\(retried.code) \(retried.status ?? 0)")
        }
        for (failure, code) in [
            (error(.vendor, status: 400, api: .eto), "eto-http-400"), (error(.httpStatus, status: 404, api: .eto), "eto-http-404"),
            (error(.invalidCredentials, api: .eto), "eto-invalid-credentials"),
            (error(.responseTooLarge, api: .eto), "eto-response-too-large"),
        ] {
            #expect(rules.settlement(for: failure) == .deadLetter(code: code, message: failure.description))
        }
        #expect(rules.settlement(for: error(.notResent, api: .eto)).code == "eto-not-resent")
    }

    @Test("the Directory's table: connection trouble, 5xx, 429 and 408 are retried; a refused request is a dead letter carrying the status")
    func directoryTable() {
        let rules = SettlementRules.directory
        for retried in [
            error(.connectionFailed, api: .directory), error(.tls, api: .directory), error(.notResent, status: 401, api: .directory),
            error(.httpStatus, status: 503, api: .directory), error(.httpStatus, status: 408, api: .directory),
        ] {
            #expect(isRetry(rules.settlement(for: retried)), "\(retried.code) \(retried.status ?? 0)")
        }
        for (failure, code) in [
            (error(.httpStatus, status: 409, api: .directory), "directory-http-409"),
            (error(.httpStatus, status: 400, api: .directory), "directory-http-400"),
            (error(.invalidRequest, api: .directory), "directory-invalid-request"),
        ] {
            #expect(rules.settlement(for: failure) == .deadLetter(code: code, message: failure.description))
        }
    }

    @Test("where the tables differ: only FileMaker reads its own codes, and only ETO and the Directory retry a write not sent again")
    func tablesDiffer() {
        // A FileMaker "layout missing" is a dead letter for FileMaker; for the others the status decides.
        let missing = error(.vendor, status: 500, vendor: "105")
        #expect(SettlementRules.fileMaker.settlement(for: missing) == .deadLetter(code: "filemaker-105", message: missing.description))
        #expect(SettlementRules.eto.settlement(for: missing) == .retry(after: nil, code: "eto-http-500", message: missing.description))
        #expect(
            SettlementRules.directory.settlement(for: missing)
                == .retry(after: nil, code: "directory-http-500", message: missing.description))
        // `notResent` (only ETO's client raises it today): FileMaker settles it by its status.
        let notResent = error(.notResent, status: 401)
        #expect(
            SettlementRules.fileMaker.settlement(for: notResent) == .deadLetter(code: "filemaker-http-401", message: notResent.description))
        #expect(
            SettlementRules.eto.settlement(for: notResent) == .retry(after: nil, code: "eto-not-resent", message: notResent.description))
        #expect(
            SettlementRules.directory.settlement(for: notResent)
                == .retry(after: nil, code: "directory-not-resent", message: notResent.description))
    }

    @Test("without a certificate, two workers of one service publish under different names, and a restart keeps its name")
    func anonymousProducers() {
        let one = WorkerRuntime.anonymousProducer(service: "filemaker", host: "host-a", dataDirectory: "/var/lib/switchboard/fm-1")
        let two = WorkerRuntime.anonymousProducer(service: "filemaker", host: "host-a", dataDirectory: "/var/lib/switchboard/fm-2")
        let elsewhere = WorkerRuntime.anonymousProducer(service: "filemaker", host: "host-b", dataDirectory: "/var/lib/switchboard/fm-1")
        #expect(Set([one, two, elsewhere]).count == 3)
        #expect(one == WorkerRuntime.anonymousProducer(service: "filemaker", host: "host-a", dataDirectory: "/var/lib/switchboard/fm-1"))
        #expect(Producer.isValid(one) && one.hasPrefix("filemaker-worker-"))
    }

    @Test("a FileMaker mapping is refused for an unknown source, a bad time zone, or the event id field mapped twice, naming the setting")
    func mappingValidation() throws {
        try FileMakerMapping.default.validate()
        var mapping = FileMakerMapping.default
        mapping.checkins.fields["Shoe"] = "participant.shoe_size"
        #expect(throws: WorkerConfigurationError.self) { try mapping.validate() }
        do { try mapping.validate() } catch {
            #expect(error.description.contains("checkins.fields.Shoe: unknown source 'participant.shoe_size'"))
        }
        mapping = .default
        mapping.checkins.timeZone = "Mars/Olympus"
        do { try mapping.validate() } catch { #expect(error.description.contains("time_zone 'Mars/Olympus'")) }
        mapping = .default
        mapping.checkins.fields["EventID"] = "$event_id"
        do { try mapping.validate() } catch { #expect(error.description.contains("event_id_field")) }
    }

    @Test(
        "check-in values reach FileMaker in its formats: dates MM/DD/YYYY, timestamps in the mapping's zone, numbers as text in text fields"
    )
    func mappingConversion() throws {
        var mapping = FileMakerMapping.default
        mapping.checkins.timeZone = "America/Los_Angeles"
        mapping.checkins.fields["Shelter"] = "site_id"
        mapping.checkins.fields["Bed"] = "participant.date_of_birth"
        let checkIn = CheckIn(
            participant: .init(etoParticipantID: 1000, firstName: "Ana", lastName: "Ortiz", dateOfBirth: "1976-02-22"), siteID: 101,
            programID: 792, kioskID: "riverside-1", checkedInAt: "2026-11-22T05:04:00.123456Z")
        let header = EventHeader(type: CheckIn.type, producer: "riverside-1", producerSeq: 1, schema: CheckIn.schema, session: "s")
        let data = mapping.fieldData(for: checkIn, header: header, textFields: ["Shelter", "FirstName", "LastName", "Notes", "Bed"])
        #expect(data["CheckedInAt"] == .text("11/21/2026 21:04:00"), "05:04 UTC is 21:04 the evening before in Los Angeles")
        #expect(data["ParticipantID"] == .number(1000))
        #expect(data["Shelter"] == .text("101"))
        #expect(data["Bed"] == .text("1976-02-22"), "a date into a text field stays as written")
        #expect(data["Notes"] == nil, "no notes: the field keeps its default")
        #expect(FileMakerMapping.convert(.text("1976-02-22"), kind: .date, zone: .gmt) == .text("02/22/1976"))
    }

    @Test("a TouchPoint configuration is refused for a duplicate element, an unknown source or a date element fed a name")
    func touchPointValidation() throws {
        try ETOTouchPointConfiguration.default.validate()
        var configuration = ETOTouchPointConfiguration.default
        configuration.elements.append(.init(id: 822, type: 5, source: "notes"))
        do { try configuration.validate() } catch { #expect(error.description.contains("822 is used twice")) }
        configuration = .default
        configuration.elements.append(.init(id: 819, type: 9, source: "participant.first_name"))
        do { try configuration.validate() } catch {
            #expect(error.description.contains("a date element (type 9) needs a date or timestamp source"))
        }
        configuration = .default
        configuration.elements.append(.init(id: 814, type: 4, source: "notes"))
        do { try configuration.validate() } catch { #expect(error.description.contains("type 4 is not supported")) }
    }

    @Test("participant matching: exact names ignoring case and spaces, and the date of birth when given")
    func participantMatching() {
        func hit(_ id: Int, _ first: String, _ last: String, _ born: String) -> ETO.SearchHit {
            let days = Timestamp.parseDate(born)!
            return ETO.SearchHit(
                clid: id, firstName: first, lastName: last, dateOfBirth: WCFDate(Date(timeIntervalSince1970: Double(days) * 86_400)))
        }
        let hits = [hit(1, "Ana", "Ortiz", "1976-02-22"), hit(2, "Ana", "Ortiz", "1980-01-01"), hit(3, "Anabel", "Ortiz", "1976-02-22")]
        #expect(ETOCheckInRecorder.matches(hits, first: " ana ", last: "ORTIZ", dateOfBirth: nil).map(\.clid) == [1, 2])
        #expect(ETOCheckInRecorder.matches(hits, first: "Ana", last: "Ortiz", dateOfBirth: "1980-01-01").map(\.clid) == [2])
        #expect(ETOCheckInRecorder.matches(hits, first: "Ana", last: "Ortiz", dateOfBirth: "1999-09-09").isEmpty)
    }
}

@Suite("One handler per event id in a process")
struct EventGateTests {
    /// Records the order of entering and leaving, shared by the tasks.
    final class Trace: Sendable {
        let steps = Synchronization.Mutex<[String]>([])
        func add(_ step: String) { steps.withLock { $0.append(step) } }
        var all: [String] { steps.withLock { $0 } }
    }

    @Test("a second delivery of an event waits for the first handler; other events do not wait; the table empties")
    func secondWaits() async throws {
        let gate = EventGate()
        let trace = Trace()
        await gate.enter("e1")
        trace.add("first in")
        let second = Task {
            await gate.enter("e1")
            trace.add("second in")
            gate.leave("e1")
        }
        // Another event passes while e1 is held.
        await gate.enter("e2")
        trace.add("other in")
        gate.leave("e2")
        // The second delivery is queued behind the first (the table shows it waiting).
        while gate.waiting(for: "e1") < 1 { await Task.yield() }
        #expect(trace.all == ["first in", "other in"])
        trace.add("first out")
        gate.leave("e1")
        await second.value
        #expect(trace.all == ["first in", "other in", "first out", "second in"], "\(trace.all)")
        #expect(gate.held == 0)
    }

    @Test("many deliveries of one event run one at a time, in turn")
    func oneAtATime() async throws {
        let gate = EventGate()
        final class Running: Sendable {
            let state = Synchronization.Mutex((now: 0, most: 0, done: 0))
        }
        let running = Running()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    await gate.enter("e")
                    running.state.withLock {
                        $0.now += 1; $0.most = max($0.most, $0.now)
                    }
                    await Task.yield()
                    running.state.withLock {
                        $0.now -= 1; $0.done += 1
                    }
                    gate.leave("e")
                }
            }
        }
        let result = running.state.withLock { $0 }
        #expect(result.most == 1 && result.done == 50 && gate.held == 0, "\(result)")
    }
}
