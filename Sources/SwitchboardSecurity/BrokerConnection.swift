// How a client program reaches the broker: its endpoints, and for a broker that runs CURVE this
// program's certificate and the broker's key. The kiosk, the monitor and the operator commands
// read it the same way from their configuration; each lists which endpoint keys it knows.

public import Configuration
public import SwitchboardRuntime
public import ZeroMQ

/// The broker as a client program reaches it: where, and with which keys.
public struct BrokerConnection: Sendable {
    /// The broker's endpoints (`BrokerEndpoints(reader:dataDirectory:)`).
    public var endpoints: BrokerEndpoints
    /// `certificate` and `broker_key`: this program's secret certificate and the broker's public
    /// certificate or key; nil when neither is given (a broker run with `--insecure`).
    public var credentials: ClientCredentials?

    /// The options a client socket sets before it connects: none without credentials.
    public var socketOptions: [SocketOption] { credentials?.socketOptions ?? [] }

    public init(endpoints: BrokerEndpoints = BrokerEndpoints(), credentials: ClientCredentials? = nil) {
        self.endpoints = endpoints
        self.credentials = credentials
    }

    /// Reads how to reach the broker.
    ///
    /// Keys read: `broker_host` and the endpoints the program knows (`ingest`, `fanout`,
    /// `replay`, `service`, `groups`; `BrokerEndpoints(reader:dataDirectory:)`: default the
    /// broker's ports on 127.0.0.1, or what a local broker wrote under `dataDirectory`);
    /// `certificate` (this program's `.secret` file) and `broker_key` (the broker's `.cert` file
    /// or its 40-character public key), both or neither (default neither: no CURVE).
    ///
    /// - Throws: a `ConfigurationError` naming the key, or what is wrong with a certificate.
    public init(reader: ConfigReader, dataDirectory: String? = nil) throws(ConfigurationError) {
        endpoints = try BrokerEndpoints(reader: reader, dataDirectory: dataDirectory)
        credentials = try Self.credentials(certificate: try reader.nonEmpty("certificate"), brokerKey: try reader.nonEmpty("broker_key"))
    }

    /// `ClientCredentials.load`, its failure as a configuration error.
    static func credentials(certificate: String?, brokerKey: String?) throws(ConfigurationError) -> ClientCredentials? {
        do {
            return try ClientCredentials.load(certificate: certificate, brokerKey: brokerKey)
        } catch {
            throw ConfigurationError("\(error)")
        }
    }
}
