// Where a client program finds the broker: one host name for the five endpoints, each of which
// can still be set alone.

import Foundation

/// The broker's five endpoints as a client connects to them.
public struct BrokerEndpoints: Sendable, Equatable {
    public var ingest: String
    public var fanout: String
    public var replay: String
    public var service: String
    public var groups: String

    /// The broker's ports when nothing else is said (protocol/README.md, section 3).
    public static let defaultPorts = ["ingest": 5560, "fanout": 5561, "replay": 5562, "service": 5563, "groups": 5564]

    /// The endpoints of a broker on `host` at the default ports.
    public init(host: String = "127.0.0.1") {
        // An IPv6 address goes in brackets: tcp://[::1]:5560.
        let written = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        func at(_ name: String) -> String { "tcp://\(written):\(Self.defaultPorts[name] ?? 0)" }
        ingest = at("ingest")
        fanout = at("fanout")
        replay = at("replay")
        service = at("service")
        groups = at("groups")
    }

    /// The keys these come from: `broker_host`, then one key per endpoint.
    public static let keys = ["broker_host", "ingest", "fanout", "replay", "service", "groups"]

    /// From `broker_host` (default 127.0.0.1), each endpoint overridden by its own key.
    public init(layers: ConfigurationLayers) throws(ConfigurationLayers.Failure) {
        let host = try layers.nonEmpty("broker_host") ?? "127.0.0.1"
        guard !host.contains("/"), !host.contains(" ") else {
            throw ConfigurationLayers.Failure(
                "broker_host from \(try layers.lookup("broker_host")?.source ?? "?") must be a host name or address, got '\(host)'")
        }
        self.init(host: host)
        if layers.keys.contains("ingest"), let value = try layers.endpoint("ingest") { ingest = value }
        if layers.keys.contains("fanout"), let value = try layers.endpoint("fanout") { fanout = value }
        if layers.keys.contains("replay"), let value = try layers.endpoint("replay") { replay = value }
        if layers.keys.contains("service"), let value = try layers.endpoint("service") { service = value }
        if layers.keys.contains("groups"), let value = try layers.endpoint("groups") { groups = value }
    }
}

extension BrokerEndpoints {
    /// From the layers as `init(layers:)` reads them; an endpoint that neither its own key nor
    /// `broker_host` sets comes from what a local broker wrote to
    /// `<dataDirectory>/broker/endpoints.json` (`switchboard up`'s, at whatever `--port`), else
    /// the default. So a program run beside `up` reaches its broker with no endpoint given, as
    /// the operator commands do, and anything said explicitly still wins over the file.
    public init(layers: ConfigurationLayers, dataDirectory: String) throws(ConfigurationLayers.Failure) {
        try self.init(layers: layers)
        guard try layers.lookup("broker_host") == nil,
            let written = Self.written(dataDirectory: dataDirectory)
        else { return }
        func unset(_ key: String) throws(ConfigurationLayers.Failure) -> Bool {
            guard layers.keys.contains(key) else { return true }
            return try layers.lookup(key) == nil
        }
        if try unset("ingest"), let value = written["ingest"] { ingest = value }
        if try unset("fanout"), let value = written["fanout"] { fanout = value }
        if try unset("replay"), let value = written["replay"] { replay = value }
        if try unset("service"), let value = written["service"] { service = value }
        if try unset("groups"), let value = written["groups"] { groups = value }
    }

    /// The endpoints a broker wrote to `<dataDirectory>/broker/endpoints.json`, by name; nil
    /// when there is no such file or it cannot be read (no local broker: the defaults apply).
    public static func written(dataDirectory: String) -> [String: String]? {
        let file = URL(fileURLWithPath: dataDirectory).appendingPathComponent("broker/endpoints.json")
        guard let data = try? Data(contentsOf: file) else { return nil }
        return try? JSONDecoder().decode([String: String].self, from: data)
    }
}

/// Whether an endpoint can be reached only from this machine.
public enum EndpointReach {
    /// True for `ipc://`, `inproc://` and `tcp://` on a loopback address, `localhost` or the
    /// loopback interface `lo`; false for every other host, `*` and `0.0.0.0` among them.
    public static func isLocal(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
        guard endpoint.hasPrefix("tcp://") else { return false }
        var host = String(endpoint.dropFirst("tcp://".count))
        // A source address first (tcp://src;dst) belongs to connects, not binds: judge the last part.
        if let semicolon = host.lastIndex(of: ";") { host = String(host[host.index(after: semicolon)...]) }
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        let lowered = host.lowercased()
        if lowered == "localhost" || lowered == "lo" || lowered == "::1" { return true }
        let parts = lowered.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
