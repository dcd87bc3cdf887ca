// The ETO client follows eto.md: the log-in chain SSOAuthenticate → GetSSOEnterprises →
// GetSSOSites → SSOSiteLogin → UpdateCurrentProgram, then calls that carry the site session in
// the `enterpriseGuid` and `securityToken` headers.
//
// Two facts shape it. A wrong password is not an HTTP error: SSOAuthenticate answers 200 with
// the all-zero GUID as the token, so the client must look at the token. And that answer echoes
// the password: the client decodes the token alone and never logs or keeps the body.

public import Foundation
public import Logging
public import SwitchboardHTTP

/// A client of the ETO web services (`…/API/…`).
///
/// Log-in calls (``authenticate(email:password:)``, ``enterprises(sso:)``, ``sites(sso:enterpriseGuid:)``,
/// ``siteLogIn(sso:enterpriseGuid:siteID:utcOffset:)``, ``updateCurrentProgram(_:session:)`` and the whole
/// chain ``logIn(_:)``) return credentials; data calls take a ``CredentialSource`` of
/// ``ETO/SiteSession``. A rejected session is HTTP 401/403 or an HTML log-in page.
public struct ETOClient: Sendable {
    /// The all-zero GUID: SSOAuthenticate's answer to bad credentials.
    public static let deniedToken = "00000000-0000-0000-0000-000000000000"

    public let baseURL: String
    private let transport: BackendTransport

    /// - Parameter baseURL: the API root, e.g. `https://services.etosoftware.com/API`.
    public init(http: SwitchboardHTTPClient, baseURL: String, logger: Logger) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.transport = BackendTransport(http: http, logger: logger)
    }

    private func make(
        _ method: HTTPRequest.Method, _ path: [HTTPRequest.PathSegment], _ operation: String, trailingSlash: Bool = false,
        query: [(name: String, value: String?)] = [], body: HTTPRequest.Body = .none, idempotent: Bool? = nil, secrets: [String] = []
    ) -> HTTPRequest {
        HTTPRequest(
            method, baseURL, path: path, trailingSlash: trailingSlash, query: query, headers: ["Accept": "application/json"], body: body,
            api: .eto, operation: operation, idempotent: idempotent, secrets: secrets)
    }

    private static func sessionAuthorizer(_ session: ETO.SiteSession) -> any HTTPAuthorizer {
        HeaderAuthorizer.eto(enterpriseGuid: session.enterpriseGuid, securityToken: session.securityToken)
    }

    private func send<T: Decodable>(
        _ request: HTTPRequest, _ auth: CredentialSource<ETO.SiteSession>, as type: T.Type
    ) async throws(HTTPError)
        -> T
    {
        let response = try await transport.send(request, auth, authorizer: Self.sessionAuthorizer)
        try response.requireSuccess()
        return try response.decode(T.self)
    }

    /// Whether a token is ETO's "denied": missing, empty, or a GUID of zeros in any spelling.
    static func isDenied(_ token: String?) -> Bool {
        guard let token else { return true }
        let hex = token.filter(\.isHexDigit)
        return hex.isEmpty || hex.allSatisfy { $0 == "0" }
    }

    // MARK: Log-in chain

    /// `POST Security.svc/SSOAuthenticate/`.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` naming the email
    ///   when ETO answers with the all-zero GUID (never retried); other ``HTTPError``s as sent.
    public func authenticate(email: String, password: String) async throws(HTTPError) -> ETO.SSOToken {
        struct Body: Encodable {
            struct Security: Encodable {
                var Email: String
                var Password: String
            }
            var security: Security
        }
        // Only the token and status code are decoded: the body echoes the password.
        struct Answer: Decodable {
            struct Result: Decodable {
                var SSOAuthToken: String?
                var AuthStatusCode: Int?
            }
            var SSOAuthenticateResult: Result
        }
        let body: HTTPRequest.Body
        do { body = try .json(Body(security: .init(Email: email, Password: password))) } catch {
            throw .invalid(make(.post, [], "security.ssoAuthenticate"), "cannot encode the log-in body")
        }
        let request = make(
            .post, ["Security.svc", "SSOAuthenticate"], "security.ssoAuthenticate", trailingSlash: true, body: body, secrets: [password])
        let response = try await transport.send(request)
        try response.requireSuccess()
        let result = try response.decode(Answer.self).SSOAuthenticateResult
        guard !Self.isDenied(result.SSOAuthToken), let token = result.SSOAuthToken else {
            throw .loginRefused(
                response, account: email,
                detail:
                    "wrong email or password (SSOAuthToken is the all-zero GUID, AuthStatusCode \(result.AuthStatusCode.map(String.init) ?? "-"))"
            )
        }
        transport.logger.debug("eto SSO log-in succeeded", metadata: ["eto.account": "\(email)"])
        return ETO.SSOToken(token: token, email: email)
    }

    /// `GET Security.svc/GetSSOEnterprises/{SSOAuthToken}`.
    public func enterprises(sso: ETO.SSOToken) async throws(HTTPError) -> [ETO.Enterprise] {
        let request = make(.get, ["Security.svc", "GetSSOEnterprises", .secret(sso.token)], "security.enterprises")
        let response = try await transport.send(request)
        try response.requireSuccess()
        return try response.decode([ETO.Enterprise].self)
    }

    /// `GET Security.svc/GetSSOSites/{SSOAuthToken}/{enterpriseGuid}`.
    public func sites(sso: ETO.SSOToken, enterpriseGuid: String) async throws(HTTPError) -> [ETO.Site] {
        let request = make(.get, ["Security.svc", "GetSSOSites", .secret(sso.token), .plain(enterpriseGuid)], "security.sites")
        let response = try await transport.send(request)
        try response.requireSuccess()
        return try response.decode([ETO.Site].self)
    }

    /// `GET Security.svc/SSOSiteLogin/{siteId}/{enterpriseGuid}/{SSOAuthToken}/{utcOffset}`: the
    /// site session (ETO answers with a bare JSON string, the security token).
    public func siteLogIn(
        sso: ETO.SSOToken, enterpriseGuid: String, siteID: Int, utcOffset: Int = 0
    ) async throws(HTTPError)
        -> ETO.SiteSession
    {
        let request = make(
            .get,
            [
                "Security.svc", "SSOSiteLogin", .plain(String(siteID)), .plain(enterpriseGuid), .secret(sso.token),
                .plain(String(utcOffset)),
            ],
            "security.siteLogin", secrets: [sso.token])
        let response = try await transport.send(request)
        try response.requireSuccess()
        let token = try response.decode(String.self)
        guard !Self.isDenied(token) else {
            throw .loginRefused(response, account: sso.email, detail: "site \(siteID) log-in refused (the all-zero GUID)")
        }
        return ETO.SiteSession(enterpriseGuid: enterpriseGuid, securityToken: token, siteID: siteID, email: sso.email)
    }

    /// `POST Security.svc/UpdateCurrentProgram/`: selects the program of the session (its
    /// answer is ignored, as every client does). Returns the session with ``ETO/SiteSession/programID`` set.
    public func updateCurrentProgram(_ programID: Int, session: ETO.SiteSession) async throws(HTTPError) -> ETO.SiteSession {
        let body: HTTPRequest.Body
        do { body = try .json(["ProgramID": programID]) } catch {
            throw .invalid(make(.post, [], "security.updateCurrentProgram"), "cannot encode the body")
        }
        // Selecting the same program twice changes nothing: safe to retry.
        let request = make(
            .post, ["Security.svc", "UpdateCurrentProgram"], "security.updateCurrentProgram", trailingSlash: true, body: body,
            idempotent: true)
        let response = try await transport.send(request, .fixed(session), authorizer: Self.sessionAuthorizer)
        try response.requireSuccess()
        var updated = session
        updated.programID = programID
        return updated
    }

    /// The whole chain: SSOAuthenticate → (GetSSOEnterprises when no enterprise is named) →
    /// SSOSiteLogin → UpdateCurrentProgram (when a program is named). What a credential cache
    /// calls to refresh an ETO site session.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidCredentials`` for a wrong
    ///   password; ``HTTPError/Code/invalidRequest`` when no enterprise is named and the
    ///   account has none or several.
    public func logIn(_ account: ETO.Account) async throws(HTTPError) -> ETO.SiteSession {
        let sso = try await authenticate(email: account.email, password: account.password)
        let enterpriseGuid: String
        if let named = account.enterpriseGuid {
            enterpriseGuid = named
        } else {
            let all = try await enterprises(sso: sso)
            guard all.count == 1, let only = all.first else {
                throw .invalid(
                    make(.get, ["Security.svc", "GetSSOEnterprises"], "security.enterprises"),
                    "account \(account.email) has \(all.count) enterprises; name the one to log into")
            }
            enterpriseGuid = only.guid
        }
        var session = try await siteLogIn(sso: sso, enterpriseGuid: enterpriseGuid, siteID: account.siteID, utcOffset: account.utcOffset)
        if let programID = account.programID { session = try await updateCurrentProgram(programID, session: session) }
        transport.logger.info(
            "eto site session opened", metadata: ["eto.account": "\(account.email)", "eto.site": "\(account.siteID)"])
        return session
    }

    // MARK: Catalog

    /// `GET Security.svc/GetSiteInfo/{siteId}`.
    public func siteInfo(siteID: Int, auth: CredentialSource<ETO.SiteSession>) async throws(HTTPError) -> ETO.SiteInfo {
        try await send(
            make(.get, ["Security.svc", "GetSiteInfo", .plain(String(siteID))], "security.siteInfo"), auth, as: ETO.SiteInfo.self)
    }

    /// `GET Form.svc/Forms/Program/GetPrograms/{siteId}`, without disabled programs unless asked.
    public func programs(
        siteID: Int, includeDisabled: Bool = false, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError)
        -> [ETO.Program]
    {
        let all = try await send(
            make(.get, ["Form.svc", "Forms", "Program", "GetPrograms", .plain(String(siteID))], "form.programs"), auth,
            as: [ETO.Program].self)
        return includeDisabled ? all : all.filter { !$0.disabled }
    }

    // MARK: Participants

    /// `GET Actor.svc/participant/{CLID}`.
    public func participant(id: Int, auth: CredentialSource<ETO.SiteSession>) async throws(HTTPError) -> ETO.Participant {
        try await send(make(.get, ["Actor.svc", "participant", .plain(String(id))], "actor.participant"), auth, as: ETO.Participant.self)
    }

    /// `GET Search.svc/Search/{programId}/{searchText}`; `text` must not be empty.
    ///
    /// The search text is a person's name: its segment is redacted like a secret, so that the
    /// errors and request logs of this call (which become dead-letter reasons) never show it.
    public func search(programID: Int, text: String, auth: CredentialSource<ETO.SiteSession>) async throws(HTTPError) -> [ETO.SearchHit] {
        let request = make(.get, ["Search.svc", "Search", .plain(String(programID)), .secret(text)], "search.search")
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw .invalid(request, "the search text is empty") }
        return try await send(request, auth, as: [ETO.SearchHit].self)
    }

    /// `POST Actor.svc/participant/enrollment/`: enrolls a participant; returns the enrollment id.
    public func enroll(
        participantID: Int, programID: Int, startDate: Date, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError)
        -> Int
    {
        struct Body: Encodable {
            var participantID: Int
            var programID: Int
            var startDate: WCFDate
        }
        struct Answer: Decodable {
            struct Result: Decodable { var ID: Int }
            var SaveParticipantEnrollmentResult: Result
        }
        let body: HTTPRequest.Body
        do { body = try .json(Body(participantID: participantID, programID: programID, startDate: WCFDate(startDate))) } catch {
            throw .invalid(make(.post, [], "actor.enroll"), "cannot encode the enrollment")
        }
        let request = make(.post, ["Actor.svc", "participant", "enrollment"], "actor.enroll", trailingSlash: true, body: body)
        return try await send(request, auth, as: Answer.self).SaveParticipantEnrollmentResult.ID
    }

    /// `POST Actor.svc/participant/` with `{"participant":{FirstName, LastName, DateOfBirth,
    /// Gender}}` (the shape public clients send): adds a participant to the session's site, in
    /// no program; returns its CLID and SubjectID. Not retried: a retry after a lost answer
    /// would add the person twice (the caller looks first, by ``participants(siteID:programID:lastName:changedSince:after:take:auth:)``).
    public func addParticipant(
        firstName: String, lastName: String, dateOfBirth: Date, gender: ETO.Gender, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) -> (id: Int, subjectID: Int) {
        struct Body: Encodable {
            struct New: Encodable {
                var FirstName: String
                var LastName: String
                var DateOfBirth: WCFDate
                var Gender: Int
            }
            var participant: New
        }
        struct Answer: Decodable {
            struct Result: Decodable {
                var ID: Int
                var SubjectID: Int
            }
            var SaveParticipantResult: Result
        }
        let body: HTTPRequest.Body
        do {
            body = try .json(
                Body(
                    participant: .init(
                        FirstName: firstName, LastName: lastName, DateOfBirth: WCFDate(dateOfBirth), Gender: gender.rawValue)))
        } catch {
            throw .invalid(make(.post, [], "actor.addParticipant"), "cannot encode the participant")
        }
        // The names are redacted like secrets from whatever this call's errors and logs show.
        let request = make(
            .post, ["Actor.svc", "participant"], "actor.addParticipant", trailingSlash: true, body: body,
            secrets: [firstName, lastName].filter { $0.count > 1 })
        let result = try await send(request, auth, as: Answer.self).SaveParticipantResult
        return (result.ID, result.SubjectID)
    }

    /// One page of `GET Actor.svc/participants/{siteId}` (a call chosen where ETO's public
    /// record is silent; see the emulator README).
    public struct ParticipantPage: Decodable, Sendable {
        public var participants: [ETO.Participant]
        /// The site's last change number when the page was read.
        public var changeMark: Int64

        enum CodingKeys: String, CodingKey {
            case participants = "Participants", changeMark = "ChangeMark"
        }
    }

    /// `GET Actor.svc/participants/{siteId}?ProgramID=&LastName=&ChangedSince=&After=&Take=`:
    /// the site's participants in CLID order after `after`, at most `take`; only those enrolled
    /// in `programID`, named `lastName` (exact), or changed after `changedSince`, when given.
    public func participants(
        siteID: Int, programID: Int? = nil, lastName: String? = nil, changedSince: Int64? = nil, after: Int? = nil, take: Int = 100,
        auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) -> ParticipantPage {
        let request = make(
            .get, ["Actor.svc", "participants", .plain(String(siteID))], "actor.participants",
            query: [
                ("ProgramID", programID.map(String.init)), ("LastName", lastName), ("ChangedSince", changedSince.map(String.init)),
                ("After", after.map(String.init)), ("Take", String(take)),
            ],
            secrets: lastName.map { [$0] } ?? [])
        return try await send(request, auth, as: ParticipantPage.self)
    }

    // MARK: TouchPoints

    /// `POST TouchPoint.svc/TouchPointResponseDelete/` (chosen where the public record is
    /// silent): removes a response. ETO answers 400 when it is not there (any more).
    public func deleteTouchPointResponse(
        touchPointID: Int, responseID: Int64, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError) {
        struct Body: Encodable {
            var TouchPointID: Int
            var TouchPointResponseID: Int64
        }
        struct Answer: Decodable { var DeleteTouchPointResponseResult: Bool }
        let body: HTTPRequest.Body
        do { body = try .json(Body(TouchPointID: touchPointID, TouchPointResponseID: responseID)) } catch {
            throw .invalid(make(.post, [], "touchPoint.delete"), "cannot encode the delete")
        }
        let request = make(
            .post, ["TouchPoint.svc", "TouchPointResponseDelete"], "touchPoint.delete", trailingSlash: true, body: body, idempotent: true)
        _ = try await send(request, auth, as: Answer.self)
    }

    /// `POST TouchPoint.svc/TouchPointResponseAdd/`; returns the new `TouchPointResponseID`.
    /// Not retried: a retry after a lost answer would record the check-in twice.
    public func addTouchPointResponse(
        _ response: ETO.TouchPointResponse, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError)
        -> Int64
    {
        struct Body: Encodable { var TouchPointResponse: ETO.TouchPointResponse }
        struct Answer: Decodable {
            struct Result: Decodable { var TouchPointResponseID: Int64 }
            var AddTouchPointResponseResult: Result
        }
        var new = response
        new.id = nil
        let body: HTTPRequest.Body
        do { body = try .json(Body(TouchPointResponse: new)) } catch {
            throw .invalid(make(.post, [], "touchPoint.add"), "cannot encode the response")
        }
        let request = make(.post, ["TouchPoint.svc", "TouchPointResponseAdd"], "touchPoint.add", trailingSlash: true, body: body)
        return try await send(request, auth, as: Answer.self).AddTouchPointResponseResult.TouchPointResponseID
    }

    /// `GET TouchPoint.svc/ListTouchPointResponses?SubjectID=&TouchPointID=`.
    public func touchPointResponses(
        subjectID: Int, touchPointID: Int? = nil, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError)
        -> [ETO.TouchPointResponse]
    {
        let request = make(
            .get, ["TouchPoint.svc", "ListTouchPointResponses"], "touchPoint.list",
            query: [("SubjectID", String(subjectID)), ("TouchPointID", touchPointID.map(String.init) ?? "")])
        return try await send(request, auth, as: [ETO.TouchPointResponse].self)
    }

    /// `GET TouchPoint.svc/GetTouchPointResponse?TouchPointID=&TouchPointResponseID=`.
    public func touchPointResponse(
        touchPointID: Int, responseID: Int64, auth: CredentialSource<ETO.SiteSession>
    ) async throws(HTTPError)
        -> ETO.TouchPointResponse
    {
        let request = make(
            .get, ["TouchPoint.svc", "GetTouchPointResponse"], "touchPoint.get",
            query: [("TouchPointID", String(touchPointID)), ("TouchPointResponseID", String(responseID))])
        return try await send(request, auth, as: ETO.TouchPointResponse.self)
    }
}
