// Who is signed in at the desk, and who may try. Sessions live in memory only (a restart signs
// everyone out, which on a shared device is no loss). The promises, whatever the inputs:
//  - a session id and its CSRF token are 256 random bits each, made here and nowhere else;
//  - a session unused for `idle` is gone: the next request with it is as one without;
//  - after `accountLimit` wrong passwords for a name (known or not: the answer must not tell
//    which), that name is locked for `lockOut`, even with the right password;
//  - after `clientLimit` wrong passwords from one client address within `lockOut`, that client
//    is locked likewise, so guessing across many names is slowed too.

import Foundation
import Synchronization

public final class DeskSessions: Sendable {
    public struct Session: Sendable, Hashable {
        public var id: String
        public var staffID: String
        public var csrf: String
        var lastSeen: ContinuousClock.Instant
    }

    public enum SignIn: Sendable, Hashable {
        case signedIn(Session)
        case refused
        case locked
    }

    struct Failures {
        var count = 0
        var since: ContinuousClock.Instant
        var lockedUntil: ContinuousClock.Instant?
    }

    struct State {
        var sessions: [String: Session] = [:]
        var byName: [String: Failures] = [:]
        var byClient: [String: Failures] = [:]
    }

    public let idle: Duration
    public let lockOut: Duration
    public let accountLimit: Int
    public let clientLimit: Int
    private let state = Mutex(State())
    private let now: @Sendable () -> ContinuousClock.Instant

    public init(
        idle: Duration = .seconds(600), lockOut: Duration = .seconds(900), accountLimit: Int = 5, clientLimit: Int = 20,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.idle = idle
        self.lockOut = lockOut
        self.accountLimit = accountLimit
        self.clientLimit = clientLimit
        self.now = now
    }

    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Whether `name` or `client` may try a password now.
    public func isLocked(name: String, client: String) -> Bool {
        let now = now()
        return state.withLock { state in
            [state.byName[name], state.byClient[client]].contains { ($0?.lockedUntil).map { $0 > now } ?? false }
        }
    }

    /// Records the outcome of a password check (`account` nil: wrong name or password).
    public func signIn(name: String, client: String, account: DeskAccount?) -> SignIn {
        let now = now()
        let lockOut = lockOut
        return state.withLock { state in
            func locked(_ failures: Failures?) -> Bool { (failures?.lockedUntil).map { $0 > now } ?? false }
            if locked(state.byName[name]) || locked(state.byClient[client]) { return .locked }
            guard let account else {
                func count(_ failures: inout Failures?, limit: Int) {
                    var current = failures ?? Failures(since: now)
                    if now - current.since > lockOut { current = Failures(since: now) }
                    current.count += 1
                    if current.count >= limit { current.lockedUntil = now + lockOut }
                    failures = current
                }
                count(&state.byName[name], limit: accountLimit)
                count(&state.byClient[client], limit: clientLimit)
                return locked(state.byName[name]) || locked(state.byClient[client]) ? .locked : .refused
            }
            state.byName[name] = nil
            let session = Session(id: Self.randomToken(), staffID: account.staffID, csrf: Self.randomToken(), lastSeen: now)
            state.sessions[session.id] = session
            return .signedIn(session)
        }
    }

    /// The live session with this id, its idle time restarted; nil when none or idle too long.
    public func session(_ id: String) -> Session? {
        let now = now()
        return state.withLock { state in
            guard var session = state.sessions[id] else { return nil }
            guard now - session.lastSeen <= idle else {
                state.sessions[id] = nil
                return nil
            }
            session.lastSeen = now
            state.sessions[id] = session
            return session
        }
    }

    /// Whether the session is alive, without restarting its idle time (the event stream asks
    /// this: an open page is not use).
    func peek(_ id: String) -> Bool {
        let now = now()
        return state.withLock { state in
            guard let session = state.sessions[id], now - session.lastSeen <= idle else { return false }
            return true
        }
    }

    public func signOut(_ id: String) {
        _ = state.withLock { $0.sessions.removeValue(forKey: id) }
    }
}
