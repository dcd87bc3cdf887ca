import Foundation
public import SwitchboardBus
import SwitchboardCredentials
import SwitchboardProtocol

/// `auth.token.issued`, `auth.token.refreshed` and `auth.login.failed` events, written to the
/// auth manager's outbox (delivered by its `OutboxSender`). They say which account, when, and a
/// fingerprint; never the token, a header value or a password.
public struct AuthEvents: Sendable {
    public enum Kind: String, Sendable {
        case issued = "auth.token.issued"
        case refreshed = "auth.token.refreshed"
        case loginFailed = "auth.login.failed"
    }

    public let outbox: Outbox

    public init(outbox: Outbox) { self.outbox = outbox }

    struct Content: Encodable {
        var backend: String
        var account: String
        var fingerprint: String?
        var expiresAt: String?
        var reason: String?
        var at: String

        enum CodingKeys: String, CodingKey {
            case backend, account, fingerprint, reason, at
            case expiresAt = "expires_at"
        }
    }

    func publish(_ kind: Kind, key: CredentialKey, credential: Credential?, reason: String?) async {
        let formatter = ISO8601DateFormatter()
        let content = Content(
            backend: key.backend, account: key.account, fingerprint: credential?.fingerprint,
            expiresAt: credential?.expiresAt.map { formatter.string(from: $0) }, reason: reason, at: formatter.string(from: Date()))
        guard let data = try? WireJSON.encode(content) else { return }
        _ = try? await outbox.enqueue([.init(type: kind.rawValue, schema: "\(kind.rawValue)/1", content: data, key: key.description)])
    }
}
