// `switchboard-eto`'s service half: the `eto` service on the service plane, so kiosks and other
// programs can ask ETO questions without an ETO account (protocol/README.md section 16). Every
// operation only reads (section 13 lets kiosks call them), and every answer is built from ETO's
// own data through this worker's site sessions.

public import Foundation
public import Logging
public import SwitchboardBackends
public import SwitchboardBus
import SwitchboardHTTP
public import SwitchboardProtocol

public struct ETOService: Sendable {
    public let eto: ETOSiteAccess
    /// A session opening the account's SSO level (`token.get` scope `sso`), for the site list.
    let sso: @Sendable (_ rejected: ETO.SSOToken?) async throws -> (token: ETO.SSOToken, enterprise: String)
    let logger: Logger
    /// The enterprise's sites: a site id a caller names must be one before a session is opened.
    public let sites: ETOSites

    public init(
        eto: ETOSiteAccess, sso: @escaping @Sendable (_ rejected: ETO.SSOToken?) async throws -> (token: ETO.SSOToken, enterprise: String),
        sites: ETOSites? = nil, logger: Logger
    ) {
        self.eto = eto
        self.sso = sso
        self.logger = logger
        self.sites = sites ?? ETOSites { try await Self.siteList(eto: eto, sso: sso) }
    }

    /// Refuses a site the enterprise does not have, before any session is opened for it.
    func requireSite(_ site: Int) async throws {
        guard try await sites.contains(site) else {
            throw ServiceError(status: ServiceStatus.notFound, code: "not-found", message: "the enterprise has no site \(site)")
        }
    }

    public static let operations = ["sites.list", "programs.list", "participants.search", "participant.get", "participants.list"]

    public typealias Site = ETOServiceContent.Site
    public typealias Program = ETOServiceContent.Program
    public typealias Participant = ETOServiceContent.Participant
    typealias SiteQuery = ETOServiceContent.SiteQuery
    typealias SearchQuery = ETOServiceContent.SearchQuery
    typealias ParticipantQuery = ETOServiceContent.ParticipantQuery

    // MARK: Handling

    /// The handler a `ServiceWorker` for service `eto` runs.
    public func handle(_ request: ServiceRequest, _ partials: PartialReplies) async throws -> Data {
        // The words of a search, so that no reply's error repeats them (ETO's fault text may
        // quote the search URL, which holds the last name).
        var personal: [String] = []
        do {
            switch request.operation {
            case "sites.list":
                let list = try await Self.siteList(eto: eto, sso: sso)
                return try WireJSON.encode(ETOServiceContent.Sites(sites: list.map { Site(siteID: $0.id, name: $0.name) }))
            case "programs.list":
                let query = try Self.decode(SiteQuery.self, request, needs: "{site_id}")
                try await requireSite(query.siteID)
                let programs = try await eto.client.programs(siteID: query.siteID, auth: eto.session(query.siteID))
                return try WireJSON.encode(ETOServiceContent.Programs(programs: programs.map { Program(programID: $0.id, name: $0.name) }))
            case "participants.search":
                let query = try Self.decode(
                    SearchQuery.self, request, needs: "{site_id, program_id, first_name, last_name, date_of_birth?}")
                guard !query.lastName.trimmingCharacters(in: .whitespaces).isEmpty,
                    !query.firstName.trimmingCharacters(in: .whitespaces).isEmpty
                else {
                    throw ServiceError(
                        status: ServiceStatus.badRequest, code: "bad-request", message: "first_name and last_name must not be blank")
                }
                if let dob = query.dateOfBirth, Timestamp.parseDate(dob) == nil {
                    throw ServiceError(status: ServiceStatus.badRequest, code: "bad-request", message: "date_of_birth must be YYYY-MM-DD")
                }
                personal = [query.firstName, query.lastName] + (query.dateOfBirth.map { [$0] } ?? [])
                try await requireSite(query.siteID)
                let hits = try await eto.client.search(programID: query.programID, text: query.lastName, auth: eto.session(query.siteID))
                let matches = ETOCheckInRecorder.matches(hits, first: query.firstName, last: query.lastName, dateOfBirth: query.dateOfBirth)
                return try WireJSON.encode(
                    ETOServiceContent.Participants(
                        participants: matches.map {
                            Participant(
                                participantID: $0.clid, firstName: $0.firstName, lastName: $0.lastName,
                                dateOfBirth: $0.dateOfBirth.map(Self.day))
                        }))
            case "participant.get":
                let query = try Self.decode(ParticipantQuery.self, request, needs: "{site_id, participant_id}")
                try await requireSite(query.siteID)
                let p = try await eto.client.participant(id: query.participantID, auth: eto.session(query.siteID))
                return try WireJSON.encode(
                    Participant(participantID: p.id, firstName: p.firstName, lastName: p.lastName, dateOfBirth: p.dateOfBirth.map(Self.day))
                )
            case "participants.list":
                let query = try Self.decode(
                    ETOServiceContent.RosterQuery.self, request, needs: "{site_id, program_id?, since?, after?, limit?}")
                return try WireJSON.encode(try await roster(query))
            default:
                throw ServiceError(
                    status: ServiceStatus.notFound, code: "unknown-operation",
                    message: "eto has no operation '\(request.operation.prefix(60))' (it has \(Self.operations.joined(separator: ", ")))")
            }
        } catch let error as HTTPError {
            throw Self.serviceError(error, hiding: personal)
        } catch let error as ServiceError {
            throw error
        } catch {
            // No session could be had (auth refused or did not answer): ETO is unavailable to us.
            throw ServiceError(
                status: ServiceStatus.unavailable, code: "eto-unavailable", message: "no ETO session: \(error)", retryable: true)
        }
    }

    /// `participants.list`: a page of the site's participants in participant id order. A cursor
    /// (`next`, `after`) is `c1.<last id>.<since or ->.<mark>`, a mark `m1.<ETO change number>`:
    /// the mark of every page is the first page's, so nothing changed while paging is missed by
    /// the next listing `since` it.
    func roster(_ query: ETOServiceContent.RosterQuery) async throws -> ETOServiceContent.Roster {
        func bad(_ field: String, _ why: String) -> ServiceError {
            ServiceError(status: ServiceStatus.badRequest, code: "bad-request", message: "\(field) \(why)")
        }
        let limit = query.limit ?? 200
        guard (1...500).contains(limit) else { throw bad("limit", "must be 1 to 500") }
        guard query.siteID > 0 else { throw bad("site_id", "must be a positive id") }
        if let program = query.programID, program < 1 { throw bad("program_id", "must be a positive id") }
        var since: Int64?
        if let text = query.since {
            guard let mark = Self.parseMark(text) else { throw bad("since", "is not a mark from participants.list") }
            since = mark
        }
        var after: Int?
        var mark: Int64?
        if let text = query.after {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4, parts[0] == "c1", let id = Int(parts[1]), let cursorMark = Int64(parts[3]),
                parts[2] == "-" ? since == nil : Int64(parts[2]) == since
            else { throw bad("after", "is not the next of a page of this listing (same since)") }
            (after, mark) = (id, cursorMark)
        }
        try await requireSite(query.siteID)
        // One more than asked tells whether a next page exists; at ETO's cap of 500 a one-row
        // look after the page does.
        let session = eto.session(query.siteID)
        let take = min(limit + 1, 500)
        let page = try await eto.client.participants(
            siteID: query.siteID, programID: query.programID, changedSince: since, after: after, take: take, auth: session)
        let shown = page.participants.prefix(limit)
        let listingMark = mark ?? page.changeMark
        var more = page.participants.count > limit
        if !more, take == limit, shown.count == limit, let last = shown.last {
            more = try await !eto.client.participants(
                siteID: query.siteID, programID: query.programID, changedSince: since, after: last.id, take: 1, auth: session
            ).participants.isEmpty
        }
        var next: String?
        if more, let last = shown.last {
            next = "c1.\(last.id).\(since.map(String.init) ?? "-").\(listingMark)"
        }
        return ETOServiceContent.Roster(
            participants: shown.map { p in
                ETOServiceContent.RosterEntry(
                    participantID: p.id, firstName: p.firstName, lastName: p.lastName, dateOfBirth: p.dateOfBirth.map(Self.day),
                    gender: p.gender.map {
                        switch $0 {
                        case .female: "female"
                        case .male: "male"
                        case .unknown: "unknown"
                        }
                    })
            }, next: next, mark: "m1.\(listingMark)")
    }

    static func parseMark(_ text: String) -> Int64? {
        guard text.hasPrefix("m1."), let value = Int64(text.dropFirst(3)), value >= 0 else { return nil }
        return value
    }

    public static func siteList(
        eto: ETOSiteAccess, sso: @Sendable (_ rejected: ETO.SSOToken?) async throws -> (token: ETO.SSOToken, enterprise: String)
    ) async throws -> [ETO.Site] {
        let (token, enterprise) = try await sso(nil)
        do throws(HTTPError) {
            return try await eto.client.sites(sso: token, enterpriseGuid: enterprise)
        } catch {
            guard error.status == 401 || error.status == 403 else { throw error }
        }
        let (fresh, freshEnterprise) = try await sso(token)
        return try await eto.client.sites(sso: fresh, enterpriseGuid: freshEnterprise)
    }

    static func day(_ date: WCFDate) -> String {
        let milliseconds = Int64((date.date.timeIntervalSince1970 * 1000).rounded()) + 12 * 3_600_000
        let days = Int(floor(Double(milliseconds) / 86_400_000))
        let formatted = Timestamp.format(milliseconds: Int64(days) * 86_400_000)
        return String(formatted.prefix(10))
    }

    static func decode<T: Decodable>(_ type: T.Type, _ request: ServiceRequest, needs: String) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: request.content)
        } catch {
            // The decoder names the field and what it expected, never the value sent.
            throw ServiceError(
                status: ServiceStatus.badRequest, code: "bad-request",
                message: "\(request.operation) needs \(needs): \(WorkerConfigurationFile.describe(error))")
        }
    }

    /// ETO's refusals in service terms: a 400/404 from ETO is the caller's (an unknown site,
    /// program or participant), the rest is ETO being unavailable.
    /// - Parameter hiding: words of the request that must not come back in the message (a
    ///   searched name), whatever ETO's message quotes.
    static func serviceError(_ error: HTTPError, hiding personal: [String] = []) -> ServiceError {
        var failure = serviceErrorQuoting(error)
        failure.failure.message = Settlement.removing(personal.filter { !$0.isEmpty }, from: failure.failure.message)
        return failure
    }

    private static func serviceErrorQuoting(_ error: HTTPError) -> ServiceError {
        let detail = error.vendorMessage ?? error.message
        if let status = error.status, status == 400 || status == 404 {
            return ServiceError(status: ServiceStatus.notFound, code: "not-found", message: "ETO: \(detail)")
        }
        if error.code == .credentialUnavailable || error.code == .invalidCredentials {
            return ServiceError(
                status: ServiceStatus.unavailable, code: "eto-unavailable", message: "no ETO session: \(detail)", retryable: true)
        }
        return ServiceError(status: ServiceStatus.badGateway, code: "eto-error", message: "ETO failed: \(error)", retryable: true)
    }
}
