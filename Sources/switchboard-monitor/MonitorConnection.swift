// How every monitor command finds the broker and who it is there: the same layers as every
// program (defaults < file < environment < flags), in the file's "monitor" section and the
// shared keys at its top; an endpoint none of them sets (nor broker_host) comes from what a
// local broker wrote to <data-dir>/broker/endpoints.json, as for the operator commands and the
// kiosk, so the monitor finds `switchboard up --port N`'s broker from up's directory.

import ArgumentParser
import Foundation
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

struct MonitorConnection: ParsableArguments {
    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"monitor\" section, and the shared keys at its top.")
    var config: String?
    @Option(
        name: .customLong("broker-host"), help: "The broker's host name or address: its endpoints at the default ports (default 127.0.0.1)."
    )
    var brokerHost: String?
    @Option(help: "The broker's fan-out endpoint (default tcp://<broker-host>:5561).") var fanout: String?
    @Option(help: "The broker's replay endpoint (default tcp://<broker-host>:5562).") var replay: String?
    @Option(help: "The broker's consumer-group endpoint (default tcp://<broker-host>:5564).") var groups: String?
    @Option(help: "The broker's service endpoint, for services and workers (default tcp://<broker-host>:5563).") var service: String?
    @Option(
        name: .customLong("data-dir"),
        help:
            "Where `switchboard up` keeps its state: an endpoint not given by flag, environment, file or --broker-host comes from its broker/endpoints.json."
    )
    var dataDirectory = ".switchboard"
    @Option(help: "This monitor's (or an admin's) secret certificate, for a broker that runs CURVE.") var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's .cert file or public key.") var brokerKey: String?

    static let flagNames = [
        "broker_host": "--broker-host", "fanout": "--fanout", "replay": "--replay", "groups": "--groups", "service": "--service",
        "certificate": "--certificate", "broker_key": "--broker-key", "listen": "--listen",
    ]

    struct Settings {
        var layers: ConfigurationLayers
        var endpoints: BrokerEndpoints
        var credentials: ClientCredentials?
        var socketOptions: [SocketOption] { credentials?.socketOptions ?? [] }
    }

    /// Reads the layers; `extra` holds a subcommand's own flags by key (`listen`).
    func settings(extra: [String: String?] = [:]) throws -> Settings {
        var given: [String: String?] = [
            "broker_host": brokerHost, "fanout": fanout, "replay": replay, "groups": groups, "service": service,
            "certificate": certificate, "broker_key": brokerKey,
        ]
        given.merge(extra) { _, new in new }
        do {
            let layers = try ConfigurationLayers(
                program: "monitor", file: config, keys: Array(Self.flagNames.keys), flags: given.compactMapValues { $0 },
                flagNames: Self.flagNames)
            let credentials = try ClientCredentials.load(
                certificate: try layers.nonEmpty("certificate"), brokerKey: try layers.nonEmpty("broker_key"), environment: [:])
            return Settings(
                layers: layers, endpoints: try BrokerEndpoints(layers: layers, dataDirectory: dataDirectory), credentials: credentials)
        } catch let failure as ConfigurationLayers.Failure {
            throw ValidationError(failure.description)
        } catch let failure as Certificate.Failure {
            throw ValidationError(failure.description)
        }
    }

    func validate() throws {
        _ = try settings()
    }
}
