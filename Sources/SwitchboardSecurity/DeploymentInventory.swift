// The inventory of a deployment (`switchboard keys`): which hosts there are, which programs each
// runs and which kiosks each site has. Everything `DeploymentKeys` makes follows from it: one
// principal per program instance and per kiosk, the broker's allow-list, one bundle per host.
// See /work/design/issue13-config.md, "Keys for a deployment".

public import Foundation
import SwitchboardProtocol

/// A deployment's hosts and what runs on them, read from a JSON file:
///
/// ```json
/// {
///   "deployment": "riverside-coc",
///   "broker_host": "broker.riverside.example",
///   "hosts": {
///     "broker":    {"programs": ["broker"]},
///     "workers-1": {"programs": ["filemaker", "eto", "directory"]},
///     "site-101":  {"kiosks": ["site-101-kiosk-1"]}
///   }
/// }
/// ```
///
/// Keys read: `deployment` (a name, required), `broker_host` (the broker's DNS name or address,
/// required), `hosts` (an object of host name → `{"programs": [...], "kiosks": [...]}`, at least one
/// of the two on each host). No other key is accepted, so a misspelt one is an error rather than
/// silently nothing.
public struct DeploymentInventory: Sendable, Hashable {
    public struct Host: Sendable, Hashable {
        public var name: String
        public var programs: [String]
        public var kiosks: [String]

        public init(name: String, programs: [String] = [], kiosks: [String] = []) {
            self.name = name
            self.programs = programs
            self.kiosks = kiosks
        }
    }

    /// A principal the inventory asks for: a program on a host, a kiosk, or the broker.
    public struct Principal: Sendable, Hashable {
        /// The certificate's name: `broker`, `<host>-<program>`, or the kiosk's id.
        public var name: String
        public var role: Role
        public var host: String
        /// The file name in the host's bundle, without `.secret`: the program, or the kiosk's id.
        public var file: String
    }

    public var deployment: String
    public var brokerHost: String
    /// Sorted by name.
    public var hosts: [Host]
    /// Every principal, sorted by name; names and bundle files are unique (checked on parsing).
    public private(set) var principals: [Principal] = []

    /// The programs an inventory may name, and the role each one's certificate gets.
    public static let programs: [(program: String, role: Role)] = [
        ("broker", .broker), ("auth", .auth), ("filemaker", .worker(service: "filemaker")), ("eto", .worker(service: "eto")),
        ("directory", .worker(service: "directory")), ("monitor", .monitor), ("admin", .admin),
    ]

    static func role(ofProgram program: String) -> Role? { programs.first { $0.program == program }?.role }

    /// The host the broker runs on.
    public var brokerHostName: String { principals.first { $0.role == .broker }!.host }

    public init(deployment: String, brokerHost: String, hosts: [Host]) throws(DeploymentKeys.Failure) {
        self.deployment = deployment
        self.brokerHost = brokerHost
        self.hosts = hosts.sorted { $0.name < $1.name }
        principals = try Self.principals(of: self.hosts)
    }

    /// Reads and checks an inventory file.
    /// - Throws: `DeploymentKeys.Failure` with code `.invalidInventory`, naming the file and what
    ///   is wrong in it.
    public static func load(_ path: String) throws(DeploymentKeys.Failure) -> DeploymentInventory {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw DeploymentKeys.Failure(.invalidInventory, "cannot read the inventory \(path): \(error.localizedDescription)")
        }
        return try parse(data, source: path)
    }

    /// Parses and checks an inventory; `source` names it in messages.
    public static func parse(_ data: Data, source: String = "inventory") throws(DeploymentKeys.Failure) -> DeploymentInventory {
        func failure(_ message: String) -> DeploymentKeys.Failure { DeploymentKeys.Failure(.invalidInventory, "\(source): \(message)") }
        guard let value = JSONValue.parse(data) else { throw failure("not valid JSON") }
        guard case .object(let top) = value else { throw failure("must be a JSON object") }
        if let unknown = top.keys.sorted().first(where: { !["deployment", "broker_host", "hosts"].contains($0) }) {
            throw failure("unknown key '\(unknown)' (the keys are deployment, broker_host and hosts)")
        }
        guard case .string(let deployment)? = top["deployment"] else {
            throw failure("'deployment' is missing or not a string (the deployment's name, e.g. \"riverside-coc\")")
        }
        guard Certificate.isValidName(deployment) else {
            throw failure("'deployment' must be 1–64 characters of A–Z a–z 0–9 . _ : -; got '\(deployment.prefix(80))'")
        }
        guard case .string(let brokerHost)? = top["broker_host"] else {
            throw failure("'broker_host' is missing or not a string: the broker host's DNS name or address, which clients connect to")
        }
        guard !brokerHost.isEmpty, brokerHost.utf8.count <= 253, !brokerHost.contains(where: { $0.isWhitespace || $0 == "/" }) else {
            throw failure("'broker_host' must be a DNS name or address; got '\(brokerHost.prefix(80))'")
        }
        guard case .object(let hostObjects)? = top["hosts"] else {
            throw failure("'hosts' is missing or not an object (host name → {\"programs\": [...], \"kiosks\": [...]})")
        }
        guard !hostObjects.isEmpty else { throw failure("'hosts' is empty") }
        var hosts: [Host] = []
        for (name, entry) in hostObjects.sorted(by: { $0.key < $1.key }) {
            guard isValidHostName(name) else {
                throw failure(
                    "host name '\(name.prefix(80))' must be 1–48 characters of A–Z a–z 0–9 . _ -, starting with a letter or digit (it names the host's bundle directory)"
                )
            }
            guard case .object(let fields) = entry else {
                throw failure("host '\(name)' must be an object with 'programs' and/or 'kiosks'")
            }
            if let unknown = fields.keys.sorted().first(where: { $0 != "programs" && $0 != "kiosks" }) {
                throw failure("host '\(name)': unknown key '\(unknown)' (a host has 'programs' and/or 'kiosks')")
            }
            func strings(_ key: String) throws(DeploymentKeys.Failure) -> [String] {
                guard let field = fields[key] else { return [] }
                guard case .array(let items) = field else { throw failure("host '\(name)': '\(key)' must be an array of strings") }
                var result: [String] = []
                for item in items {
                    guard case .string(let text) = item else { throw failure("host '\(name)': '\(key)' must be an array of strings") }
                    result.append(text)
                }
                return result
            }
            let host = Host(name: name, programs: try strings("programs"), kiosks: try strings("kiosks"))
            guard !host.programs.isEmpty || !host.kiosks.isEmpty else { throw failure("host '\(name)' has neither programs nor kiosks") }
            hosts.append(host)
        }
        do {
            return try DeploymentInventory(deployment: deployment, brokerHost: brokerHost, hosts: hosts)
        } catch {
            throw failure(error.message)
        }
    }

    /// Host names become directory names (`bundles/<host>`) and the start of principal names.
    static func isValidHostName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.utf8.count <= 48, first.isASCII,
            first.properties.isAlphabetic || ("0"..."9").contains(first)
        else { return false }
        return Certificate.isValidName(name) && !name.contains(":")
    }

    /// Works out every principal and checks that names and bundle files are unique.
    static func principals(of hosts: [Host]) throws(DeploymentKeys.Failure) -> [Principal] {
        func failure(_ message: String) -> DeploymentKeys.Failure { DeploymentKeys.Failure(.invalidInventory, message) }
        var principals: [Principal] = []
        var origin: [String: String] = [:]
        for host in hosts {
            var files: [String: String] = [:]
            func add(_ principal: Principal, from what: String) throws(DeploymentKeys.Failure) {
                guard Certificate.isValidName(principal.name) else {
                    throw failure(
                        "\(what) gives the principal name '\(principal.name)', which is not a valid certificate name (1–64 characters of A–Z a–z 0–9 . _ : -)"
                    )
                }
                // Hidden files are not what an administrator looks for in a bundle.
                guard !principal.name.hasPrefix(".") else { throw failure("\(what): a principal name may not start with '.'") }
                // `<name>.previous.cert` is the file of a key being rotated out (AllowList).
                guard !principal.name.hasSuffix(AllowList.previousSuffix) else {
                    throw failure("\(what): a principal name may not end in '\(AllowList.previousSuffix)' (that names a rotated-out key)")
                }
                if let other = origin[principal.name] {
                    throw failure("duplicate principal name '\(principal.name)': from \(other) and from \(what)")
                }
                if let other = files[principal.file] {
                    throw failure("host '\(host.name)': \(other) and \(what) would both be \(principal.file).secret in its bundle")
                }
                origin[principal.name] = what
                files[principal.file] = what
                principals.append(principal)
            }
            for program in host.programs {
                guard let role = role(ofProgram: program) else {
                    throw failure(
                        "host '\(host.name)': unknown program '\(program.prefix(80))' (programs: \(Self.programs.map(\.program).joined(separator: ", ")))"
                    )
                }
                if role == .broker, let other = principals.first(where: { $0.role == .broker }) {
                    throw failure("two brokers: hosts '\(other.host)' and '\(host.name)' both run the broker (a deployment has one)")
                }
                let name = role == .broker ? "broker" : "\(host.name)-\(program)"
                try add(
                    Principal(name: name, role: role, host: host.name, file: program), from: "program '\(program)' of host '\(host.name)'")
            }
            for kiosk in host.kiosks {
                guard Certificate.isValidName(kiosk) else {
                    throw failure(
                        "host '\(host.name)': kiosk id '\(kiosk.prefix(80))' is not a valid certificate name (1–64 characters of A–Z a–z 0–9 . _ : -)"
                    )
                }
                try add(Principal(name: kiosk, role: .kiosk, host: host.name, file: kiosk), from: "kiosk '\(kiosk)' of host '\(host.name)'")
            }
        }
        guard principals.contains(where: { $0.role == .broker }) else {
            throw failure("no host runs the broker: add \"broker\" to the programs of the broker's host")
        }
        return principals.sorted { $0.name < $1.name }
    }
}
