// What the operator commands (`switchboard status`, `groups`, `dlq`, `auth check`) run with:
// the broker's endpoints and the keys to reach it, from the "operator" section of the
// configuration, else from what `switchboard up` left in its data directory.

public import Configuration
import Foundation
public import SwitchboardRuntime

/// How an operator command reaches the broker.
public struct OperatorConfiguration: Sendable {
    /// Every key of the "operator" section (`service` is `status`'s and `auth check`'s
    /// `--service`). `--data-dir`, `--timeout` and `--insecure` are flags, not keys.
    public static let keys = ["broker_host", "groups", "service", "certificate", "broker_key"]

    /// Where `switchboard up` keeps its state when `--data-dir` is not given.
    public static let defaultDataDirectory = ".switchboard"

    /// The endpoints and the credentials; nil credentials: connect without CURVE.
    public var connection: BrokerConnection

    public init(connection: BrokerConnection) {
        self.connection = connection
    }

    /// The operator commands' configuration: the "operator" section, `SWITCHBOARD_OPERATOR_*`,
    /// and the shared keys among `keys`.
    public static func programConfiguration(
        arguments: [String], environment: [String: String]
    ) throws(ConfigurationError) -> ProgramConfiguration {
        try ProgramConfiguration(program: "operator", keys: keys, arguments: arguments, environment: environment)
    }

    /// Reads how to reach the broker.
    ///
    /// Keys read: `broker_host`, `groups`, `service` (the endpoints; default what a local broker
    /// wrote to `<dataDirectory>/broker/endpoints.json`, else 127.0.0.1 at the broker's ports:
    /// `BrokerEndpoints(reader:dataDirectory:)`); `certificate` and `broker_key`, both or neither
    /// (default: the operator key `switchboard up` made, `<dataDirectory>/keys/secrets/
    /// operator.secret` with `broker.cert` beside it, when both are there; else none).
    ///
    /// - Parameters:
    ///   - dataDirectory: `switchboard up`'s data directory (`--data-dir`).
    ///   - insecure: connect without CURVE (`--insecure`): no credentials are loaded.
    public init(reader: ConfigReader, dataDirectory: String = defaultDataDirectory, insecure: Bool = false) throws(ConfigurationError) {
        let endpoints = try BrokerEndpoints(reader: reader, dataDirectory: dataDirectory)
        let (certificate, brokerKey) = (try reader.nonEmpty("certificate"), try reader.nonEmpty("broker_key"))
        guard !insecure else {
            connection = BrokerConnection(endpoints: endpoints)
            return
        }
        var credentials = try BrokerConnection.credentials(certificate: certificate, brokerKey: brokerKey)
        if credentials == nil {
            let secrets = URL(fileURLWithPath: dataDirectory).appendingPathComponent("keys/secrets")
            let operatorSecret = secrets.appendingPathComponent("operator.secret").path
            let brokerCertificate = secrets.appendingPathComponent("broker.cert").path
            if FileManager.default.fileExists(atPath: operatorSecret), FileManager.default.fileExists(atPath: brokerCertificate) {
                credentials = try BrokerConnection.credentials(certificate: operatorSecret, brokerKey: brokerCertificate)
            }
        }
        connection = BrokerConnection(endpoints: endpoints, credentials: credentials)
    }
}
