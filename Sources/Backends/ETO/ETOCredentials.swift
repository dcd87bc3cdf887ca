// ETO's log-in gives two credentials in turn: an SSO token (for choosing an enterprise and a
// site) and a site session (for everything else). Both are secrets; their descriptions never
// show them.

public import Foundation

extension ETO {
    /// What the log-in chain needs: the account and where to log in.
    public struct Account: Sendable, Hashable, CustomStringConvertible {
        public var email: String
        public var password: String
        /// The enterprise to log into; `nil` picks the account's only enterprise (and fails when
        /// it has several).
        public var enterpriseGuid: String?
        public var siteID: Int
        /// The program `UpdateCurrentProgram` selects; `nil` selects none.
        public var programID: Int?
        /// Sent to `SSOSiteLogin`; its unit is undocumented (clients send minutes or hours from GMT).
        public var utcOffset: Int

        public init(email: String, password: String, enterpriseGuid: String? = nil, siteID: Int, programID: Int? = nil, utcOffset: Int = 0)
        {
            self.email = email
            self.password = password
            self.enterpriseGuid = enterpriseGuid
            self.siteID = siteID
            self.programID = programID
            self.utcOffset = utcOffset
        }

        public var description: String {
            "ETO.Account(email: \(email), password: \(redactedText), site: \(siteID), program: \(programID.map(String.init) ?? "-"))"
        }
    }

    /// The token `SSOAuthenticate` returns. Its lifetime is undocumented; a 401 on one of the
    /// SSO calls means it is gone.
    public struct SSOToken: Sendable, Hashable, CustomStringConvertible {
        public var token: String
        public var email: String
        public var issuedAt: Date

        public init(token: String, email: String, issuedAt: Date = Date()) {
            self.token = token
            self.email = email
            self.issuedAt = issuedAt
        }

        public var description: String { "ETO.SSOToken(email: \(email), token: \(redactedText))" }
    }

    /// A site session: what every call after the log-in chain sends (`enterpriseGuid` and
    /// `securityToken` headers). ETO recycles the security token after the site's
    /// `SecurityTokenRecycleIntervalInMinutes` and drops it after `IdleTimeout_ThresholdInMinutes`
    /// idle (see ``ETOClient/siteInfo(siteID:auth:)``); logging into the web application ends it too.
    public struct SiteSession: Sendable, Hashable, CustomStringConvertible {
        public var enterpriseGuid: String
        public var securityToken: String
        public var siteID: Int
        /// The program selected with `UpdateCurrentProgram`, if any.
        public var programID: Int?
        public var email: String
        public var issuedAt: Date

        public init(
            enterpriseGuid: String, securityToken: String, siteID: Int, programID: Int? = nil, email: String, issuedAt: Date = Date()
        ) {
            self.enterpriseGuid = enterpriseGuid
            self.securityToken = securityToken
            self.siteID = siteID
            self.programID = programID
            self.email = email
            self.issuedAt = issuedAt
        }

        public var description: String {
            "ETO.SiteSession(email: \(email), enterprise: \(enterpriseGuid), site: \(siteID), program: \(programID.map(String.init) ?? "-"), securityToken: \(redactedText))"
        }
    }
}
