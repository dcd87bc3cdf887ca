// The bodies of `token.get` (protocol/README.md section 14), shared by the worker that asks and
// `switchboard-auth`, which answers.

public import Foundation
public import SwitchboardCredentials

/// The `token.get` request.
package struct KeyRequest: Codable {
    package var backend: String
    package var account: String
    /// Which part of the back end (ETO: a site id); absent for the account's default.
    package var scope: String?
    /// The fingerprint of a token a back end rejected (token.get only).
    package var rejected: String?
    /// With `rejected`: the token had worked before it was rejected (token.get only).
    package var worked: Bool?
}

/// The `token.get` reply. It carries the secret, and goes only to workers (the broker lets no
/// other role call `auth`); it is never logged or published.
public struct TokenReply: Codable, Sendable {
    public var backend: String
    public var account: String
    public var token: String
    public var fingerprint: String
    public var issuedAt: Date
    public var expiresAt: Date?
    public var headers: [String: String]
    public var attributes: [String: String]

    enum CodingKeys: String, CodingKey {
        case backend, account, token, fingerprint, headers, attributes
        case issuedAt = "issued_at"
        case expiresAt = "expires_at"
    }

    package init(key: CredentialKey, credential: Credential) {
        backend = key.backend
        account = key.account
        token = credential.token
        fingerprint = credential.fingerprint
        issuedAt = credential.issuedAt
        expiresAt = credential.expiresAt
        headers = credential.headers
        attributes = credential.attributes
    }

    public var credential: Credential {
        Credential(token: token, issuedAt: issuedAt, expiresAt: expiresAt, headers: headers, attributes: attributes)
    }
}
