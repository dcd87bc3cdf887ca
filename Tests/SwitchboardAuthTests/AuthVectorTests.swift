import Foundation
import SwitchboardAuth
import SwitchboardCredentials
import SwitchboardProtocol
import SwitchboardTesting
import SwitchboardTokens
import Testing

/// The auth vectors a stranger writing a client from `protocol/` alone reads, held to the
/// validation workers apply and to the auth service's fingerprint (protocol/README.md, 14.1).
@Suite("Auth vectors")
struct AuthVectorTests {
    @Test(
        "every auth vector gets its documented verdict from the validation workers apply, naming the field", arguments: try Vectors.auth())
    func vector(_ vector: Vectors.AuthContent) throws {
        do {
            switch vector.schema {
            case "auth.token.v1.json": try AuthContent.validateToken(vector.content)
            case "auth.event.v1.json": try AuthContent.validateEvent(vector.content)
            default:
                Issue.record("\(vector.name): unknown schema \(vector.schema)")
                return
            }
            #expect(vector.valid, "\(vector.name) was accepted")
        } catch {
            #expect(!vector.valid, "\(vector.name) was refused: \(error)")
            if let field = vector.field {
                #expect(error.message.contains("'\(field)'"), "\(vector.name): '\(error.message)' does not name \(field)")
            }
            if let token = vector.token, token.count >= 8 {
                #expect(!error.message.contains(token), "\(vector.name): the error shows the token")
            }
        }
    }

    @Test("every fingerprint beside a token is what the auth service computes for it (section 14.1)", arguments: try Vectors.auth())
    func fingerprint(_ vector: Vectors.AuthContent) throws {
        guard let token = vector.token, let fingerprint = vector.fingerprint else { return }
        let computed = Credential.fingerprint(of: token)
        #expect(computed == Credential(token: token, issuedAt: Date()).fingerprint)
        if vector.rule == "semantic" {
            #expect(computed != fingerprint, "\(vector.name) is meant to break the fingerprint rule")
        } else if vector.valid {
            #expect(computed == fingerprint, "\(vector.name): \(fingerprint) is not the fingerprint of its token (\(computed))")
            // A worker decodes the reply as the token it caches: same token, same fingerprint.
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let reply = try decoder.decode(TokenReply.self, from: vector.content)
            #expect(reply.credential.fingerprint == fingerprint)
        } else {
            // Invalid for another reason (a longer fingerprint): still the token's digits.
            #expect(fingerprint.hasPrefix(computed), "\(vector.name): \(fingerprint) does not start with \(computed)")
        }
    }
}
