// `switchboard-eto`'s consumer half: a check-in becomes one TouchPoint response, exactly once.
//
// 1. Resolve the participant: by the ETO id the kiosk filled in, else by one exact match of
//    first name, last name (and date of birth when given) among the program's participants.
//    None or several is a dead letter `participant-unmatched` naming the candidates' ids: a
//    check-in is never recorded against a guessed person. The reason never repeats the name or
//    date of birth: dead letters are logged and listed to operators (protocol section 15.4), and
//    the words a person typed stay in the event, which only `dlq show` reveals. The participant's
//    SubjectID (what responses are recorded against) is read from ETO, unless this worker read it
//    in the last 10 minutes (`ETOSubjects`).
// 2. Look, only when an earlier attempt may have written: list the participant's responses to
//    the TouchPoint; one holding this event id in the event-id element means an earlier
//    delivery recorded it (its ACK was lost): done. The list is the subject's whole history, so
//    it is skipped when nothing can have written yet: the broker says this is the event's first
//    delivery to any member (DELIVER's `first`, protocol section 15.2: attempt 1, not a replay,
//    journaled since the broker started and the group was made or reset), and the worker's
//    memory (`ETOCheckInStore`) holds neither its response nor a note that its write started.
//    Without that memory every delivery looks. So a check-in on the normal path costs the same
//    calls (the participant, unless remembered; the write) whatever the participant's history;
//    a redelivery, a replay, or a worker restarted after sending pays the look.
// 3. Write, once: note in the memory that the write starts (committed first, in the commit that
//    reads the memory when the delivery comes, unless a response or early void is there; that
//    commit outlives the process and does not wait for an fsync: see `ETOCheckInStore`),
//    ask the fence, then send. A write is never sent twice blindly: when ETO answers with its
//    log-in page the HTTP layer refreshes the session and reports `notResent`, and this recorder
//    looks again (step 2) before writing.
// 4. Remember (event id → response; the note is forgotten) and put `eto.response.recorded` in
//    the outbox, in one commit (the memory's tables are in the outbox's file); only then is the
//    event acknowledged. A crash anywhere before makes the event come again, find its response
//    (this worker's memory, or step 2: a redelivery is never `first`, and a note left by a crash
//    makes this worker look), and publish with `created: false`.
// 5. Between 3 and 4, after a write that may have raced with another member's (a redelivery,
//    whose earlier holder may have had a write on its way, or this member lost the delivery
//    while it wrote), look once more: of several responses holding the event id the lowest
//    stands and the others are deleted (every look does that). A write held up by a partition
//    lands when it heals, after the broker gave the event to another member, which looked and
//    wrote meanwhile; the fence cannot stop a request already sent.
//
// A walk-in (`participant.new: true`) is looked for first among all the site's participants (not
// only the program's) with the same first name, last name and date of birth: one is used (and
// enrolled in the program when it is not), none is added and enrolled, several is
// `participant-unmatched`. Because the add is found again by the same look, a crash between add
// and enrollment, or a redelivery, never makes a second person. An add may still be on its way
// when the look finds no one: this worker's own (noted in the memory before it is sent), or,
// for a delivery the broker does not call `first`, another member's; either is waited out
// (`eto-add-in-doubt`, `addInDoubt`) before this worker adds. Two kiosks' walk-ins of the same
// person share an ordering key, so the group has only one in flight and the second finds the
// first. `eto.participant.created` is published before the response is written.
//
// A void (`checkin.voided`) deletes the response its check-in became (found in the memory) and
// publishes `eto.response.voided`. A void with no response to delete is remembered, and the
// check-in, when it comes later (replayed from the dead letters), is not recorded.

import Foundation
public import Logging
public import SwitchboardBackends
import SwitchboardHTTP
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

    /// Which response each check-in became, and voids that came first; without it (tests of the
    /// recording alone) voids are dead letters.
    let store: ETOCheckInStore?

    /// Puts an event in the worker's outbox.
    let publish: @Sendable (ETOPublication) async throws -> Void

    /// How long after a walk-in's participant add was sent a delivery that finds no one waits
    /// before adding: an add held up on its way (its worker killed) can still land in ETO. At
    /// least the HTTP client's request time-out.
    let addInDoubt: Duration

    /// The SubjectIDs of participants read lately (`subjectLifetime`, at most 20,000): their
    /// next check-ins skip reading the participant.
    let subjects: ETOSubjects

    public init(
        eto: ETOSiteAccess, configuration: ETOTouchPointConfiguration, sites: ETOSites? = nil, store: ETOCheckInStore? = nil,
        addInDoubt: Duration = .seconds(40), subjectLifetime: Duration = .seconds(600), logger: Logger,
        publish: @escaping @Sendable (ETOPublication) async throws -> Void = { _ in }
    ) {
        self.addInDoubt = addInDoubt
        self.subjects = ETOSubjects(lifetime: subjectLifetime)
        self.eto = eto
        self.configuration = configuration
        self.sites = sites
        self.store = store
        self.logger = logger
        self.publish = publish
    }

    /// The group's topics.
    public static let topics = [CheckIn.type, CheckInVoid.type]

    /// A failure to put an event in the outbox or to use the check-in memory: retried.
    struct Local: Error {
        var code: String
        var message: String
        var after: Duration = .seconds(1)
    }

    func publishing(_ make: @autoclosure () throws -> ETOPublication) async throws(Local) {
        do {
            try await publish(try make())
        } catch {
            throw Local(code: "outbox", message: "the event could not be put in the outbox: \(error)")
        }
    }

    func storing<T>(_ body: () async throws -> T) async throws(Local) -> T {
        do {
            return try await body()
        } catch {
            throw Local(code: "eto-store", message: "the check-in memory in \(store?.path ?? "?") could not be used: \(error)")
        }
    }

    /// Now, in milliseconds since 1970, as the memory's notes keep it.
    static func now() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// The broker may have given the delivery to another member (this worker could not reach it
    /// for its liveness period): nothing is written for it here (protocol section 15.3,
    /// **Fencing**). ETO has no uniqueness of its own, so two members writing at once would make
    /// two responses, or two people.
    struct NotHeld: Error {}

    static func fence(_ event: WorkerEvent) async throws(NotHeld) {
        guard await event.mayAct() else { throw NotHeld() }
    }

    /// Why a participant could not be resolved.
    struct Unmatched: Error {
        var message: String
    }

    public func handle(_ event: WorkerEvent) async -> Settlement {
        if event.header.type == CheckInVoid.type {
            // A void's reason is personal data, and no message here repeats it.
            return await void(event)
        }
        let content = CheckIn.read(event.content)
        // ETO's fault text is a third party's and may quote what was sent (the search text is a
        // last name): whatever a reason holds, the check-in's personal words are taken out.
        return await settle(event, content).withoutPersonalData(of: try? content.get())
    }

    func settle(_ event: WorkerEvent, _ content: Result<CheckIn, any Error>) async -> Settlement {
        guard event.header.type == CheckIn.type, event.header.schema == CheckIn.schema else {
            return .deadLetter(
                code: "unsupported-schema",
                message: "switchboard-eto records \(CheckIn.schema), not \(event.header.type) (\(event.header.schema))")
        }
        let checkIn: CheckIn
        do {
            checkIn = try content.get()
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
            var memory: ETOCheckInStore.Memory?
            if let store { memory = try await storing({ try await store.memory(of: event.eventID, notingWriteAt: Self.now()) }) }
            if let void = memory?.earlyVoid {
                logger.info(
                    "check-in was voided before it came; not recorded", metadata: ["event_id": "\(event.eventID)", "void": "\(void)"])
                return .done
            }
            let stored = memory?.response
            if let void = stored?.voidEventID {
                // Recorded, then voided (its response deleted): a redelivery must not record it again.
                logger.info(
                    "check-in was recorded and voided; not recorded again", metadata: ["event_id": "\(event.eventID)", "void": "\(void)"])
                return .done
            }
            let participant: (id: Int, subjectID: Int?)
            do {
                if checkIn.participant.isWalkIn {
                    let (found, created) = try await walkIn(checkIn, event: event, site: site, program: program, auth: auth)
                    participant = (found.id, found.subjectID)
                    if let subject = found.subjectID { subjects.remember(subject, site: site, participant: found.id) }
                    try await publishing(
                        try ETOPublication(
                            ETOParticipantCreated(
                                eventID: event.eventID, participantID: found.id, siteID: site, programID: program,
                                firstName: found.firstName, lastName: found.lastName,
                                dateOfBirth: checkIn.participant.dateOfBirth ?? found.dateOfBirth.map(ETOService.day) ?? "",
                                gender: checkIn.participant.gender, created: created),
                            key: event.header.key))
                    logger.info(
                        created ? "walk-in participant added" : "walk-in participant found",
                        metadata: ["event_id": "\(event.eventID)", "eto.participant": "\(found.id)"])
                } else {
                    participant = try await resolve(checkIn, site: site, program: program, auth: auth)
                }
            } catch let unmatched as Unmatched {
                return .deadLetter(code: "participant-unmatched", message: unmatched.message)
            }
            guard let subject = participant.subjectID else {
                return .deadLetter(code: "participant-unmatched", message: "participant \(participant.id) has no SubjectID in ETO")
            }
            let outcome: (id: Int64, created: Bool)
            if let stored, stored.subjectID == subject, stored.touchPointID == configuration.touchPointID {
                // This worker wrote it and remembered it; the settle was lost.
                outcome = (stored.responseID, false)
            } else if mayHaveWritten(event, memory: memory),
                let existing = try await recorded(event.eventID, subject: subject, auth: auth)
            {
                outcome = (existing, false)
            } else {
                if let store, memory?.noted != true {
                    try await storing { try await store.writing(event.eventID, at: Self.now()) }
                }
                try await Self.fence(event)
                let response = ETO.TouchPointResponse(
                    touchPointID: configuration.touchPointID, subjectID: subject, programID: program,
                    created: Timestamp.parse(checkIn.checkedInAt).map { Date(timeIntervalSince1970: Double($0) / 1000) },
                    elements: elements(for: checkIn, header: event.header))
                let written = try await write(response, eventID: event.eventID, subject: subject, auth: auth)
                if written.created, await mayHaveRaced(event),
                    let kept = try await recorded(event.eventID, subject: subject, auth: auth), kept != written.id
                {
                    // Another member's response landed first and stands; this one was deleted.
                    outcome = (kept, false)
                } else {
                    outcome = written
                }
            }
            let (id, created) = outcome
            let publication = try ETOPublication(
                ETOResponseRecorded(
                    eventID: event.eventID, busSeq: event.header.busSeq, siteID: site, programID: program,
                    participantID: participant.id, touchPointID: configuration.touchPointID, responseID: id, created: created),
                key: event.header.key)
            let record = ETOCheckInStore.Recorded(
                checkInEventID: event.eventID, siteID: site, subjectID: subject, participantID: participant.id,
                touchPointID: configuration.touchPointID, responseID: id)
            if let store, store.outbox != nil {
                // One commit: the response remembered and its event in the outbox.
                try await storing { try await store.recorded(record, publishing: publication.outboxEvent) }
            } else {
                if let store { try await storing { try await store.recorded(record) } }
                try await publishing(publication)
            }
            logger.info(
                created ? "check-in recorded" : "check-in was already recorded",
                metadata: ["event_id": "\(event.eventID)", "eto.participant": "\(participant.id)", "eto.response": "\(id)"])
            return .done
        } catch let error as HTTPError {
            return SettlementRules.eto.settlement(for: error)
        } catch let local as Local {
            return .retry(after: local.after, code: local.code, message: local.message)
        } catch is NotHeld {
            return Self.notHeld(event)
        } catch {
            return .retry(after: nil, code: "eto-error", message: "\(error)")
        }
    }

    /// What a delivery the fence stopped settles as. Its settle is not sent when the delivery went
    /// to another member; a NACK that does go out (a graceful stop while in doubt) hands it on.
    static func notHeld(_ event: WorkerEvent) -> Settlement {
        .retry(
            after: nil, code: "not-held",
            message:
                "the broker may have given delivery \(event.attempt) to another member while this worker could not reach it; nothing written"
        )
    }

    /// Whether an earlier attempt may have written this check-in's response, so that ETO must be
    /// looked at before writing (step 2). False only when the broker says no member was given the
    /// event before (`firstDelivery`, attempt 1) and the memory holds neither the event's
    /// response nor a note that its write started (`memory`, read when the delivery came);
    /// always true without the memory.
    func mayHaveWritten(_ event: WorkerEvent, memory: ETOCheckInStore.Memory?) -> Bool {
        guard event.firstDelivery, event.attempt == 1, let memory, memory.response == nil else { return true }
        return memory.writeStarted
    }

    /// Whether another member may have written this check-in's response while this one wrote it
    /// (step 5): the event was delivered before (to a member whose write may still have been on
    /// its way when the broker took the event back: a partition holds a request up for as long
    /// as it lasts, and it lands once the path heals), or this member lost the delivery while
    /// its own write was on its way (asked after the write: false once the broker gave it to
    /// another member). On the normal path (a first delivery, held throughout) it costs no call.
    func mayHaveRaced(_ event: WorkerEvent) async -> Bool {
        if !event.firstDelivery || event.attempt > 1 { return true }
        return !(await event.mayAct())
    }

    /// Adds the response; `created` is false when a look after an unclear rejection found it
    /// recorded already.
    func write(
        _ response: ETO.TouchPointResponse, eventID: String, subject: Int, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) -> (id: Int64, created: Bool) {
        do {
            return (try await eto.client.addTouchPointResponse(response, auth: auth), true)
        } catch {
            guard error.code == .notResent else { throw error }
        }
        // The session died under the write; whether ETO kept it is unknown. Look again with the
        // fresh session before writing (once: a second failure is retried by the group).
        if let existing = try await recorded(eventID, subject: subject, auth: auth) {
            logger.info(
                "check-in was recorded before the session ended", metadata: ["event_id": "\(eventID)", "eto.response": "\(existing)"])
            return (existing, false)
        }
        return (try await eto.client.addTouchPointResponse(response, auth: auth), true)
    }

    // MARK: Walk-ins

    /// The walk-in's participant: the one of the site with its first name, last name and date of
    /// birth (enrolled in the program when it is not), or a new one, added and enrolled.
    /// - Returns: the participant, and whether this call added it.
    func walkIn(
        _ checkIn: CheckIn, event: WorkerEvent, site: Int, program: Int, auth: CredentialSource<ETO.SiteSession>
    ) async throws -> (ETO.Participant, created: Bool) {
        let eventID = event.eventID
        guard let first = checkIn.participant.firstName, let last = checkIn.participant.lastName,
            let born = checkIn.participant.dateOfBirth, let day = Timestamp.parseDate(born)
        else { throw Unmatched(message: "a walk-in needs a first name, a last name and a date of birth") }
        let sameLastName = try await allParticipants(site: site, program: nil, lastName: last, auth: auth)
        let matches = sameLastName.filter { p in
            Self.same(p.firstName, first) && Self.same(p.lastName, last) && p.dateOfBirth.map(Self.utcDay) == day
        }
        guard matches.count <= 1 else {
            let ids = matches.map(\.id).sorted().prefix(10).map(String.init).joined(separator: ", ")
            throw Unmatched(
                message:
                    "\(matches.count) participants at site \(site) have the walk-in's first name, last name and date of birth: \(ids); record by participant id"
            )
        }
        let start = Date(timeIntervalSince1970: Double(Timestamp.parse(checkIn.checkedInAt) ?? 0) / 1000)
        if let only = matches.first {
            let enrolled = try await allParticipants(site: site, program: program, lastName: last, auth: auth).contains { $0.id == only.id }
            if !enrolled { try await enroll(only.id, program: program, site: site, lastName: last, start: start, auth: auth) }
            return (try await eto.client.participant(id: only.id, auth: auth), false)
        }
        let gender: ETO.Gender =
            switch checkIn.participant.gender ?? "" {
            case "female": .female
            case "male": .male
            default: .unknown
            }
        if let store {
            // An earlier delivery sent an add that may still land: wait it out, then look again.
            let now = Self.now()
            if let sent = try await storing({ try await store.addSent(eventID) }) {
                let waited = Duration.milliseconds(max(0, now - sent))
                if waited < addInDoubt {
                    throw Local(
                        code: "eto-add-in-doubt",
                        message: "an earlier delivery's participant add may still land in ETO; looking again before adding",
                        after: addInDoubt - waited)
                }
            } else if !event.firstDelivery {
                // Another member may have been given this event before and sent an add that is
                // still on its way (held up by a partition, it lands when the link comes back;
                // the fence cannot stop a request already sent). That member sent it before the
                // broker took its delivery back, so before this delivery came: it lands within
                // `addInDoubt` of now. Wait that out once, noted like an add of this worker's own,
                // then look again.
                try await storing { try await store.adding(eventID, at: now) }
                throw Local(
                    code: "eto-add-in-doubt",
                    message: "another member may have sent this walk-in's participant add before; looking again before adding",
                    after: addInDoubt)
            }
        }
        try await Self.fence(event)
        if let store { try await storing { try await store.adding(eventID, at: Self.now()) } }
        let added = try await eto.client.addParticipant(
            firstName: first.trimmingCharacters(in: .whitespaces), lastName: last.trimmingCharacters(in: .whitespaces),
            dateOfBirth: Date(timeIntervalSince1970: Double(day) * 86_400), gender: gender, auth: auth)
        // A crash here leaves a participant in no program: the redelivery finds it (the look
        // above is site-wide) and enrolls it.
        try await enroll(added.id, program: program, site: site, lastName: last, start: start, auth: auth)
        return (try await eto.client.participant(id: added.id, auth: auth), true)
    }

    /// Enrolls; a refusal (400) is fine when the participant turns out to be enrolled after all
    /// (an earlier delivery's enrollment, delayed, landed in between).
    func enroll(
        _ participant: Int, program: Int, site: Int, lastName: String, start: Date, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) {
        do throws(HTTPError) {
            _ = try await eto.client.enroll(participantID: participant, programID: program, startDate: start, auth: auth)
        } catch {
            guard error.status == 400 else { throw error }
            let enrolled = try await allParticipants(site: site, program: program, lastName: lastName, auth: auth)
            guard enrolled.contains(where: { $0.id == participant }) else { throw error }
        }
    }

    /// Every page of the site's participants with this last name (and in this program).
    func allParticipants(
        site: Int, program: Int?, lastName: String, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) -> [ETO.Participant] {
        var all: [ETO.Participant] = []
        var after: Int?
        while true {
            let page = try await eto.client.participants(
                siteID: site, programID: program, lastName: lastName.trimmingCharacters(in: .whitespaces), after: after, take: 500,
                auth: auth)
            all += page.participants
            guard page.participants.count == 500, let last = page.participants.last else { return all }
            after = last.id
        }
    }

    static func same(_ a: String, _ b: String) -> Bool {
        a.trimmingCharacters(in: .whitespaces).caseInsensitiveCompare(b.trimmingCharacters(in: .whitespaces)) == .orderedSame
    }

    /// The UTC day (days since 1970) of a WCF date of birth, which is midnight in some zone.
    static func utcDay(_ date: WCFDate) -> Int {
        let milliseconds = Int64((date.date.timeIntervalSince1970 * 1000).rounded()) + 12 * 3_600_000
        return Int(floor(Double(milliseconds) / 86_400_000))
    }

    // MARK: Voids

    func void(_ event: WorkerEvent) async -> Settlement {
        guard event.header.schema == CheckInVoid.schema else {
            return .deadLetter(
                code: "unsupported-schema", message: "switchboard-eto applies \(CheckInVoid.schema), not \(event.header.schema)")
        }
        let void: CheckInVoid
        do {
            void = try JSONDecoder().decode(CheckInVoid.self, from: event.content)
        } catch {
            return .deadLetter(code: "invalid-content", message: "the void cannot be read: \(WorkerConfigurationFile.describe(error))")
        }
        guard let store else {
            return .deadLetter(code: "void-unsupported", message: "this worker keeps no record of responses, so it cannot apply voids")
        }
        do {
            guard let recorded = try await storing({ try await store.response(of: void.checkInEventID) }) else {
                // No response to delete (the check-in is dead-lettered, or not here yet): the void
                // wins when the check-in comes.
                try await storing { try await store.voidedEarly(void.checkInEventID, by: event.eventID, at: void.voidedAt) }
                try await publishing(
                    try ETOPublication(
                        ETOResponseVoided(
                            eventID: event.eventID, checkInEventID: void.checkInEventID, busSeq: event.header.busSeq, responseID: nil,
                            action: .neverRecorded), key: event.header.key))
                logger.info(
                    "void came before its check-in was recorded; the check-in will not be",
                    metadata: ["event_id": "\(event.eventID)", "checkin_event_id": "\(void.checkInEventID)"])
                return .done
            }
            if recorded.voidEventID == nil {
                try await delete(recorded)
                try await storing { try await store.voided(void.checkInEventID, by: event.eventID) }
            }
            try await publishing(
                try ETOPublication(
                    ETOResponseVoided(
                        eventID: event.eventID, checkInEventID: void.checkInEventID, busSeq: event.header.busSeq,
                        responseID: recorded.responseID, action: .deleted), key: event.header.key))
            logger.info(
                "check-in voided: response deleted",
                metadata: [
                    "event_id": "\(event.eventID)", "checkin_event_id": "\(void.checkInEventID)", "eto.response": "\(recorded.responseID)",
                ])
            return .done
        } catch let error as HTTPError {
            return SettlementRules.eto.settlement(for: error)
        } catch let local as Local {
            return .retry(after: local.after, code: local.code, message: local.message)
        } catch {
            return .retry(after: nil, code: "eto-error", message: "\(error)")
        }
    }

    /// Deletes a response; one already gone (an earlier delivery deleted it, its ACK was lost)
    /// counts as deleted.
    func delete(_ recorded: ETOCheckInStore.Recorded) async throws(HTTPError) {
        try await delete(touchPointID: recorded.touchPointID, responseID: recorded.responseID, auth: eto.session(recorded.siteID))
    }

    /// Deletes a response; one already gone (ETO's 400, then not found) counts as deleted.
    func delete(touchPointID: Int, responseID: Int64, auth: CredentialSource<ETO.SiteSession>) async throws(HTTPError) {
        let refusal: HTTPError
        do throws(HTTPError) {
            try await eto.client.deleteTouchPointResponse(touchPointID: touchPointID, responseID: responseID, auth: auth)
            return
        } catch {
            guard error.status == 400 else { throw error }
            refusal = error
        }
        do throws(HTTPError) {
            _ = try await eto.client.touchPointResponse(touchPointID: touchPointID, responseID: responseID, auth: auth)
        } catch {
            if error.status == 400 || error.status == 404 { return }
            throw error
        }
        // Still there: ETO's refusal stands (a dead letter naming its status).
        throw refusal
    }

    /// The response id holding `eventID` among the subject's responses to the TouchPoint. When
    /// two members wrote it (step 5) there are several: the lowest id (ETO numbers responses in
    /// the order it stores them, so the first to land) is kept, and the others are deleted here,
    /// by whichever member looks; each member that writes in such a race looks after its write
    /// landed, so the later of two writes always meets the earlier.
    func recorded(_ eventID: String, subject: Int, auth: CredentialSource<ETO.SiteSession>) async throws(HTTPError) -> Int64? {
        let responses = try await eto.client.touchPointResponses(subjectID: subject, touchPointID: configuration.touchPointID, auth: auth)
        let holding = responses.filter { response in
            response.elements.contains { $0.elementID == configuration.eventIDElement && $0.value == eventID }
        }.map { $0.id ?? 0 }.sorted()
        guard let kept = holding.first else { return nil }
        for extra in holding.dropFirst() {
            try await delete(touchPointID: configuration.touchPointID, responseID: extra, auth: auth)
            logger.warning(
                "a check-in had two ETO responses (two members wrote it at once); the later one is deleted",
                metadata: ["event_id": "\(eventID)", "eto.response": "\(kept)", "eto.deleted": "\(extra)"])
        }
        return kept
    }

    /// The check-in's participant (step 1): its CLID, and its SubjectID, read from ETO unless
    /// `subjects` has it.
    func resolve(
        _ checkIn: CheckIn, site: Int, program: Int, auth: CredentialSource<ETO.SiteSession>
    ) async throws -> (id: Int, subjectID: Int?) {
        if let id = checkIn.participant.etoParticipantID {
            guard let clid = Int(exactly: id) else { throw Unmatched(message: "participant id \(id) is out of range") }
            do throws(HTTPError) {
                return try await subject(of: clid, site: site, auth: auth)
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
        return try await subject(of: only.clid, site: site, auth: auth)
    }

    /// The participant's SubjectID: remembered, or read (and remembered).
    func subject(
        of participant: Int, site: Int, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) -> (id: Int, subjectID: Int?) {
        if let subject = subjects.subject(site: site, participant: participant) { return (participant, subject) }
        let read = try await eto.client.participant(id: participant, auth: auth)
        if let subject = read.subjectID { subjects.remember(subject, site: site, participant: read.id) }
        return (read.id, read.subjectID)
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
}
