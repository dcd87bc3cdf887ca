// `switchboard-eto`'s consumer half: a check-in becomes one TouchPoint response, exactly once.
//
// 1. Resolve the participant: by the ETO id the kiosk filled in, else by one exact match of
//    first name, last name (and date of birth when given) among the program's participants.
//    None or several is a dead letter `participant-unmatched` naming the candidates' ids: a
//    check-in is never recorded against a guessed person. The reason never repeats the name or
//    date of birth: dead letters are logged and listed to operators (protocol section 15.4), and
//    the words a person typed stay in the event, which only `dlq show` reveals.
// 2. Look: list the participant's responses to the TouchPoint; one holding this event id in the
//    event-id element means an earlier delivery recorded it (its ACK was lost): done.
// 3. Write, once. A write is never sent twice blindly: when ETO answers with its log-in page the
//    HTTP layer refreshes the session and reports `notResent`, and this recorder looks again
//    (step 2) before writing.

import Foundation
public import Logging
public import SwitchboardBackends
public import SwitchboardHTTP
import SwitchboardProtocol

/// The ETO calls the recorder needs, with a site session chosen per call. The worker's is
/// `ETOClient` with sessions from `auth`, one per site.
public struct ETOSiteAccess: Sendable {
    public let client: ETOClient
    public let session: @Sendable (_ site: Int) -> CredentialSource<ETO.SiteSession>

    public init(client: ETOClient, session: @escaping @Sendable (_ site: Int) -> CredentialSource<ETO.SiteSession>) {
        self.client = client
        self.session = session
    }
}

public struct ETOCheckInRecorder: EventHandler {
    public let eto: ETOSiteAccess
    public let configuration: ETOTouchPointConfiguration
    let logger: Logger

    /// When given, a check-in's site must be one of the enterprise's before a session is opened
    /// for it (a made-up site id would cost auth a log-in chain per delivery).
    let sites: ETOSites?

    public init(eto: ETOSiteAccess, configuration: ETOTouchPointConfiguration, sites: ETOSites? = nil, logger: Logger) {
        self.eto = eto
        self.configuration = configuration
        self.sites = sites
        self.logger = logger
    }

    /// Why a participant could not be resolved.
    struct Unmatched: Error {
        var message: String
    }

    public func handle(_ event: WorkerEvent) async -> Settlement {
        let checkIn = try? JSONDecoder().decode(CheckIn.self, from: event.content)
        // ETO's fault text is a third party's and may quote what was sent (the search text is a
        // last name): whatever a reason holds, the check-in's personal words are taken out.
        return await settle(event).withoutPersonalData(of: checkIn)
    }

    func settle(_ event: WorkerEvent) async -> Settlement {
        guard event.header.type == CheckIn.type, event.header.schema == CheckIn.schema else {
            return .deadLetter(
                code: "unsupported-schema",
                message: "switchboard-eto records \(CheckIn.schema), not \(event.header.type) (\(event.header.schema))")
        }
        let checkIn: CheckIn
        do {
            checkIn = try JSONDecoder().decode(CheckIn.self, from: event.content)
        } catch {
            return .deadLetter(code: "invalid-content", message: "the check-in cannot be read: \(WorkerConfigurationFile.describe(error))")
        }
        guard let site = Int(exactly: checkIn.siteID), let program = Int(exactly: checkIn.programID) else {
            return .deadLetter(code: "invalid-content", message: "site_id or program_id is out of range")
        }
        let auth = eto.session(site)
        if let sites {
            do {
                guard try await sites.contains(site) else {
                    return .deadLetter(code: "unknown-site", message: "the enterprise has no site \(site) (check-in program \(program))")
                }
            } catch {
                return .retry(after: nil, code: "eto-sites", message: "the enterprise's site list could not be read: \(error)")
            }
        }
        do {
            let participant: ETO.Participant
            do {
                participant = try await resolve(checkIn, site: site, program: program, auth: auth)
            } catch let unmatched as Unmatched {
                return .deadLetter(code: "participant-unmatched", message: unmatched.message)
            }
            guard let subject = participant.subjectID else {
                return .deadLetter(code: "participant-unmatched", message: "participant \(participant.id) has no SubjectID in ETO")
            }
            if let existing = try await recorded(event.eventID, subject: subject, auth: auth) {
                logger.info(
                    "check-in was already recorded", metadata: ["event_id": "\(event.eventID)", "eto.response": "\(existing)"])
                return .done
            }
            let response = ETO.TouchPointResponse(
                touchPointID: configuration.touchPointID, subjectID: subject, programID: program,
                created: Timestamp.parse(checkIn.checkedInAt).map { Date(timeIntervalSince1970: Double($0) / 1000) },
                elements: elements(for: checkIn, header: event.header))
            guard let id = try await write(response, eventID: event.eventID, subject: subject, auth: auth) else { return .done }
            logger.info(
                "check-in recorded",
                metadata: ["event_id": "\(event.eventID)", "eto.participant": "\(participant.id)", "eto.response": "\(id)"])
            return .done
        } catch let error as HTTPError {
            return Self.settlement(for: error)
        } catch {
            return .retry(after: nil, code: "eto-error", message: "\(error)")
        }
    }

    /// Adds the response; nil when a look after an unclear rejection found it recorded already.
    func write(
        _ response: ETO.TouchPointResponse, eventID: String, subject: Int, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) -> Int64? {
        do {
            return try await eto.client.addTouchPointResponse(response, auth: auth)
        } catch {
            guard error.code == .notResent else { throw error }
        }
        // The session died under the write; whether ETO kept it is unknown. Look again with the
        // fresh session before writing (once: a second failure is retried by the group).
        if let existing = try await recorded(eventID, subject: subject, auth: auth) {
            logger.info(
                "check-in was recorded before the session ended", metadata: ["event_id": "\(eventID)", "eto.response": "\(existing)"])
            return nil
        }
        return try await eto.client.addTouchPointResponse(response, auth: auth)
    }

    /// The response id holding `eventID` among the subject's responses to the TouchPoint.
    func recorded(_ eventID: String, subject: Int, auth: CredentialSource<ETO.SiteSession>) async throws(HTTPError) -> Int64? {
        let responses = try await eto.client.touchPointResponses(subjectID: subject, touchPointID: configuration.touchPointID, auth: auth)
        return responses.first { response in
            response.elements.contains { $0.elementID == configuration.eventIDElement && $0.value == eventID }
        }.map { $0.id ?? 0 }
    }

    func resolve(_ checkIn: CheckIn, site: Int, program: Int, auth: CredentialSource<ETO.SiteSession>) async throws -> ETO.Participant {
        if let id = checkIn.participant.etoParticipantID {
            guard let clid = Int(exactly: id) else { throw Unmatched(message: "participant id \(id) is out of range") }
            do throws(HTTPError) {
                return try await eto.client.participant(id: clid, auth: auth)
            } catch {
                guard error.status == 400 || error.status == 404 else { throw error }
                throw Unmatched(message: "ETO has no participant \(clid) at site \(site) (HTTP \(error.status ?? 0))")
            }
        }
        guard let first = checkIn.participant.firstName, let last = checkIn.participant.lastName else {
            throw Unmatched(message: "the check-in has neither an ETO participant id nor a full name")
        }
        let hits: [ETO.SearchHit]
        do throws(HTTPError) {
            hits = try await eto.client.search(programID: program, text: last, auth: auth)
        } catch {
            guard error.status == 400 else { throw error }
            // ETO's fault would quote the search text, the last name: its status says enough.
            throw Unmatched(message: "ETO refused the search in program \(program) at site \(site) (HTTP 400)")
        }
        let matches = Self.matches(hits, first: first, last: last, dateOfBirth: checkIn.participant.dateOfBirth)
        guard matches.count == 1, let only = matches.first else {
            throw Unmatched(
                message: Self.unmatchedMessage(
                    site: site, program: program, matches: matches.map(\.clid), sameLastName: hits.map(\.clid),
                    withDateOfBirth: checkIn.participant.dateOfBirth != nil))
        }
        return try await eto.client.participant(id: only.clid, auth: auth)
    }

    /// Why a search by name resolved no single participant, in ids only: an operator finds the
    /// name and date of birth in the event itself (`switchboard dlq show`).
    /// - Parameters:
    ///   - matches: the participants whose name (and date of birth) matched: none or several.
    ///   - sameLastName: every participant the search by last name found, for a near miss.
    static func unmatchedMessage(site: Int, program: Int, matches: [Int], sameLastName: [Int], withDateOfBirth: Bool) -> String {
        func list(_ ids: [Int]) -> String { ids.sorted().prefix(10).map(String.init).joined(separator: ", ") }
        let what = withDateOfBirth ? "first name, last name and date of birth" : "first name and last name"
        if matches.isEmpty {
            let near = sameLastName.isEmpty ? "" : " (participants with the same last name, other details: \(list(sameLastName)))"
            return "no participant of program \(program) at site \(site) has the check-in's \(what)\(near)"
        }
        return
            "\(matches.count) participants of program \(program) at site \(site) have the check-in's \(what): \(list(matches)); record by participant id"
    }

    /// The hits whose names equal the check-in's (ignoring case and surrounding spaces) and whose
    /// date of birth, when the check-in gives one, is that day.
    static func matches(_ hits: [ETO.SearchHit], first: String, last: String, dateOfBirth: String?) -> [ETO.SearchHit] {
        func same(_ a: String, _ b: String) -> Bool {
            a.trimmingCharacters(in: .whitespaces).caseInsensitiveCompare(b.trimmingCharacters(in: .whitespaces)) == .orderedSame
        }
        let day = dateOfBirth.flatMap(Timestamp.parseDate)
        return hits.filter { hit in
            guard same(hit.firstName, first), same(hit.lastName, last) else { return false }
            guard let day else { return true }
            guard let born = hit.dateOfBirth else { return false }
            // A WCF date of birth is midnight in some zone: take the UTC day of noon-ish.
            let milliseconds = Int64((born.date.timeIntervalSince1970 * 1000).rounded()) + 12 * 3_600_000
            return Int(floor(Double(milliseconds) / 86_400_000)) == day
        }
    }

    func elements(for checkIn: CheckIn, header: EventHeader) -> [ETO.ResponseElement] {
        let zone = TimeZone(identifier: configuration.timeZone) ?? TimeZone(secondsFromGMT: 0)!
        var result: [ETO.ResponseElement] = [.text(configuration.eventIDElement, header.eventID)]
        for element in configuration.elements {
            guard let value = FileMakerMapping.value(of: element.source, in: checkIn, header: header) else { continue }
            let kind = FileMakerMapping.sources[element.source] ?? .text
            switch (element.type, value) {
            case (9, .text(let text)):
                if kind == .date, let days = Timestamp.parseDate(text) {
                    result.append(
                        .date(element.id, Date(timeIntervalSince1970: Double(days) * 86_400), timeZone: TimeZone(secondsFromGMT: 0)!))
                } else if let milliseconds = Timestamp.parse(text) {
                    result.append(.date(element.id, Date(timeIntervalSince1970: Double(milliseconds) / 1000), timeZone: zone))
                }
            case (_, .text(let text)):
                result.append(.text(element.id, text))
            case (_, .number(let number)):
                result.append(.text(element.id, number == number.rounded() ? String(Int64(number)) : String(number)))
            }
        }
        return result
    }

    /// How an ETO failure is settled. ETO answers a bad request (a disabled program, an element
    /// that is not part of the TouchPoint) with a 400 WCF fault: no retry changes it.
    public static func settlement(for error: HTTPError) -> Settlement {
        let text = error.description
        switch error.code {
        case .connectionFailed, .timeout, .tls, .decoding, .credentialRejected, .credentialUnavailable, .notResent, .cancelled, .shutDown:
            return .retry(after: Settlement.delay(for: error), code: Settlement.code("eto-\(error.code)"), message: text)
        case .invalidRequest, .invalidConfiguration, .responseTooLarge, .invalidCredentials:
            return .deadLetter(code: Settlement.code("eto-\(error.code)"), message: text)
        default:
            break
        }
        if let status = error.status {
            if status >= 500 || status == 429 || status == 408 { return .retry(after: nil, code: "eto-http-\(status)", message: text) }
            return .deadLetter(code: "eto-http-\(status)", message: text)
        }
        return .retry(after: nil, code: Settlement.code("eto-\(error.code)"), message: text)
    }
}
