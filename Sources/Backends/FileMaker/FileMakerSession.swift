public import Foundation

extension FileMaker {
    /// A Data API session token. It dies 15 minutes after the last call that used it (every
    /// call resets the clock), so whoever keeps it should note when it was last used and log in
    /// again, rather than send a token that is probably dead; see ``isProbablyExpired(lastUsed:now:margin:)``.
    public struct Session: Sendable, Hashable, CustomStringConvertible {
        public var token: String
        public var account: String
        public var database: String
        public var issuedAt: Date
        /// How long the token lives without use: 15 minutes on every FileMaker Server.
        public var idleLifetime: Duration

        public static let defaultIdleLifetime: Duration = .seconds(15 * 60)

        public init(token: String, account: String, database: String, issuedAt: Date = Date(), idleLifetime: Duration = defaultIdleLifetime)
        {
            self.token = token
            self.account = account
            self.database = database
            self.issuedAt = issuedAt
            self.idleLifetime = idleLifetime
        }

        /// Whether a token last used at `lastUsed` has (nearly) reached its idle lifetime at
        /// `now`; `margin` covers clock skew and the call's own travel time.
        public func isProbablyExpired(lastUsed: Date, now: Date = Date(), margin: Duration = .seconds(30)) -> Bool {
            let limit = Double((idleLifetime - margin).components.seconds)
            return now.timeIntervalSince(lastUsed) >= limit
        }

        public var description: String { "FileMaker.Session(account: \(account), database: \(database), token: \(redactedText))" }
    }
}
