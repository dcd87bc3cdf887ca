import Foundation
public import ZeroMQ

/// What a client program (kiosk, monitor, worker, `switchboard status`) needs to reach a broker
/// that runs CURVE: its own secret certificate and the broker's public key.
public struct ClientCredentials: Sendable {
    public let certificate: Certificate
    public let brokerKey: CurveKey

    /// The options a client socket sets before it connects.
    public var socketOptions: [SocketOption] {
        guard let secretKey = certificate.secretKey else { return [] }
        return [.curvePublicKey(certificate.publicKey), .curveSecretKey(secretKey), .curveServerKey(brokerKey)]
    }

    public init(certificate: Certificate, brokerKey: CurveKey) {
        self.certificate = certificate
        self.brokerKey = brokerKey
    }

    /// Reads the credentials a program's settings name (keys `certificate` and `broker_key`).
    /// The broker key is a `.cert` file or the 40 Z85 characters.
    /// - Returns: nil when neither is given (a broker run with `--insecure`).
    /// - Throws: a `Certificate.Failure` that names the file or value and what is wrong.
    public static func load(certificate: String?, brokerKey: String?) throws -> ClientCredentials? {
        switch (certificate, brokerKey) {
        case (nil, nil):
            return nil
        case (nil, _):
            throw Certificate.Failure(
                "a broker key was given but no certificate: pass --certificate (or SWITCHBOARD_CERTIFICATE) with this program's .secret file"
            )
        case (_, nil):
            throw Certificate.Failure(
                "a certificate was given but no broker key: pass --broker-key (or SWITCHBOARD_BROKER_KEY) with the broker's .cert file or public key"
            )
        case (let path?, let key?):
            let loaded = try Certificate.load(secretFile: path)
            return ClientCredentials(certificate: loaded, brokerKey: try parseBrokerKey(key))
        }
    }

    static func parseBrokerKey(_ text: String) throws -> CurveKey {
        if text.count == 40, let key = try? CurveKey(z85: text) { return key }
        guard FileManager.default.fileExists(atPath: text) else {
            throw Certificate.Failure("broker key '\(text.prefix(60))' is neither a 40-character Z85 key nor a readable .cert file")
        }
        let certificate = try Certificate.load(publicFile: text)
        guard certificate.role == .broker else {
            throw Certificate.Failure("\(text) is the certificate of '\(certificate.name)' (role \(certificate.role)), not of a broker")
        }
        return certificate.publicKey
    }
}
