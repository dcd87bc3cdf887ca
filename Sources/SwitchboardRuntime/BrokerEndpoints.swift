// Where a client program finds the broker: one host name for the five endpoints, each of which
// can still be set alone.

public import Configuration
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

    /// The endpoints of a broker on `host` at the default ports; with several hosts separated by
    /// commas (a broker pair, `a,b`), each endpoint lists every host's, in that order.
    public init(host: String = "127.0.0.1") {
        let hosts = host.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        func at(_ name: String) -> String {
            (hosts.isEmpty ? [host] : hosts).map { host in
                // An IPv6 address goes in brackets: tcp://[::1]:5560.
                let written = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
                return "tcp://\(written):\(Self.defaultPorts[name] ?? 0)"
            }.joined(separator: ",")
        }
        ingest = at("ingest")
        fanout = at("fanout")
        replay = at("replay")
        service = at("service")
        groups = at("groups")
    }

    /// The keys these come from: `broker_host`, then one key per endpoint.
    public static let keys = ["broker_host", "ingest", "fanout", "replay", "service", "groups"]

    /// Reads the endpoints a client program connects to.
    ///
    /// Keys read: `broker_host` (the broker's host name or address, or several separated by
    /// commas for a broker pair; default 127.0.0.1), which gives every endpoint at its default
    /// port (5560 ingest, 5561 fanout, 5562 replay, 5563 service, 5564 groups); `ingest`,
    /// `fanout`, `replay`, `service`, `groups`, each a ZeroMQ endpoint (or several separated by
    /// commas) overriding its own. A client given several uses one at a time (protocol section 3).
    ///
    /// With `dataDirectory`, an endpoint that neither its own key nor `broker_host` sets comes
    /// from what a local broker wrote to `<dataDirectory>/broker/endpoints.json` (`switchboard
    /// up`'s, at whatever `--port`), else the default. So a program run beside `up` reaches its
    /// broker with no endpoint given, as the operator commands do, and anything said explicitly
    /// still wins over the file.
    public init(reader: ConfigReader, dataDirectory: String? = nil) throws(ConfigurationError) {
        let host = try reader.nonEmpty("broker_host")
        if let host,
            host.contains("/") || host.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty })
                || host.trimmingCharacters(in: .whitespaces).contains(" ")
        {
            throw ConfigurationError(key: "broker_host", "must be a host name or address, or several separated by commas, got '\(host)'")
        }
        self.init(host: host ?? "127.0.0.1")
        let written = host == nil ? dataDirectory.flatMap(Self.written(dataDirectory:)) ?? [:] : [:]
        func read(_ key: String, into endpoint: inout String) throws(ConfigurationError) {
            if let value = try reader.endpoints(key) {
                endpoint = value
            } else if let value = written[key] {
                endpoint = value
            }
        }
        try read("ingest", into: &ingest)
        try read("fanout", into: &fanout)
        try read("replay", into: &replay)
        try read("service", into: &service)
        try read("groups", into: &groups)
    }
}

extension BrokerEndpoints {
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
