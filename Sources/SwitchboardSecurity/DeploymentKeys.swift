// The key directory of a deployment (`switchboard keys`): every principal's certificate, the
// broker's allow-list and one bundle per host, made from an inventory and kept consistent by a
// state file. The operations are here rather than in the command so that tests drive them on
// real files without a process.
//
// What is derived and what is not: `deployment.json` (the state), `public/` and `secret/` are
// the record; `allowed/` and `bundles/` are derived from them and rewritten by every operation
// (only files whose bytes change are touched, so the broker's watcher and an rsync to the hosts
// see only real changes). A run cut short is finished by the next one.

import Foundation
import SwitchboardProtocol
import SwitchboardRuntime
import ZeroMQ

/// A deployment's key directory (KEYDIR):
///
/// ```
/// KEYDIR/                      0700
///   deployment.json            0600  the state: deployment, hosts, principals, revocations
///   public/<name>.cert               every principal's public certificate
///   secret/<name>.secret       0600  every principal's secret certificate
///   allowed/<name>.cert              the broker's allow-list: every principal but the broker
///   bundles/<host>/            0700  what goes to one host, and nothing else:
///     broker.cert                    the broker's public certificate
///     <program>.secret         0600  (kiosks: <kiosk-id>.secret) that host's principals
///     broker.secret, allowed/        the broker host's only
/// ```
///
/// Every operation takes a lock on `KEYDIR/.lock`, so two runs cannot interleave.
public struct DeploymentKeys: Sendable {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            let rawValue: String
            /// The inventory file is unreadable, not JSON, or describes an impossible deployment.
            public static let invalidInventory = Code(rawValue: "invalid inventory")
            /// `init` on a KEYDIR that is initialised, or not empty.
            public static let alreadyInitialised = Code(rawValue: "already initialised")
            /// An operation other than `init` on a KEYDIR without `deployment.json`.
            public static let notInitialised = Code(rawValue: "not initialised")
            /// `bundle HOST` for a host the KEYDIR does not know.
            public static let unknownHost = Code(rawValue: "unknown host")
            /// `revoke`, `rotate` or `--reissue` of a name the KEYDIR does not know.
            public static let unknownPrincipal = Code(rawValue: "unknown principal")
            /// Something the state does not allow: revoking the broker, rotating a key twice, an
            /// inventory of another deployment, a principal whose role changed.
            public static let refused = Code(rawValue: "refused")
            /// Another `switchboard keys` holds the KEYDIR's lock.
            public static let busy = Code(rawValue: "busy")
            /// A file or directory cannot be read or written, is open to others, or does not
            /// hold what the state says.
            public static let io = Code(rawValue: "I/O error")
            public var description: String { rawValue }
        }

        public var code: Code
        /// Names what is wrong and, where there is one, what fixes it. Never holds a secret.
        public var message: String
        public var description: String { message }

        public init(_ code: Code, _ message: String) {
            self.code = code
            self.message = message
        }
    }

    /// What `deployment.json` holds.
    public struct State: Codable, Sendable, Hashable {
        public var format = 1
        public var deployment: String
        /// The broker's DNS name or address, as the inventory last gave it.
        public var brokerHost: String
        /// Every host the inventory has named, sorted (hosts are never forgotten: their bundles stay).
        public var hosts: [String]
        /// The principals with a key now, sorted by name.
        public var principals: [Principal]
        /// Every key taken out of the allow-list, oldest first.
        public var revoked: [Revocation]

        public struct Principal: Codable, Sendable, Hashable {
            public var name: String
            /// As `Role.description` writes it.
            public var role: String
            public var host: String
            /// Its file in the host's bundle, without `.secret`.
            public var file: String
            public var publicKey: String
            public var created: String
            /// While a rotation is under way: the old key, allowed as `<name>.previous.cert`.
            public var previousKey: String?
        }

        public struct Revocation: Codable, Sendable, Hashable {
            public var name: String
            public var role: String
            public var host: String
            public var publicKey: String
            public var time: String
            /// `revoked` (`keys revoke NAME`) or `rotated` (`keys revoke NAME --previous`).
            public var reason: String
        }

        public func principal(_ name: String) -> Principal? { principals.first { $0.name == name } }

        /// The host the broker runs on.
        public var brokerHostName: String? { principals.first { $0.name == "broker" }?.host }

        /// When `name` was last revoked, if it has no key now.
        public func revocation(of name: String) -> Revocation? {
            guard principal(name) == nil else { return nil }
            return revoked.last { $0.name == name && $0.reason == "revoked" }
        }
    }

    /// What an operation did, for the command to print. Names and hosts only: no key material.
    public struct Changes: Sendable, Hashable {
        /// Principals given a new key (made, reissued or rotated).
        public var made: [State.Principal] = []
        /// Principals (kiosks, the broker) that moved to another host.
        public var moved: [String] = []
        /// Keys taken out of the allow-list.
        public var revoked: [String] = []
        /// Hosts whose bundle changed.
        public var bundles: [String] = []
        /// Whether `allowed/` changed.
        public var allowList = false
        public var notes: [String] = []
    }

    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    public var stateFile: String { path("deployment.json") }
    public var publicDirectory: String { path("public") }
    public var secretDirectory: String { path("secret") }
    public var allowedDirectory: String { path("allowed") }
    public var bundlesDirectory: String { path("bundles") }
    public func bundleDirectory(_ host: String) -> String { path("bundles/\(host)") }

    func path(_ component: String) -> String { (directory as NSString).appendingPathComponent(component) }
    func publicFile(_ name: String) -> String { (publicDirectory as NSString).appendingPathComponent("\(name).cert") }
    func previousFile(_ name: String) -> String {
        (publicDirectory as NSString).appendingPathComponent("\(name)\(AllowList.previousSuffix).cert")
    }
    func secretFile(_ name: String) -> String { (secretDirectory as NSString).appendingPathComponent("\(name).secret") }

    // MARK: Operations

    /// `keys init`: makes the KEYDIR (0700), a key for every principal of the inventory, the
    /// allow-list and every host's bundle.
    /// - Throws: `.alreadyInitialised` when the KEYDIR holds a deployment already (use `add`) or
    ///   anything else; `.io` when it is open to group or others.
    @discardableResult
    public func initialise(_ inventory: DeploymentInventory) throws(Failure) -> Changes {
        try Files.ensureDirectory(directory, what: "key directory")
        return try locked { () throws(Failure) -> Changes in
            if let state = try? loadState() {
                throw Failure(
                    .alreadyInitialised,
                    "\(directory) already holds the keys of deployment '\(state.deployment)' (\(state.principals.count) principals); run `switchboard keys add` to make keys for what the inventory gained"
                )
            }
            let present = try Files.list(directory).filter { $0 != ".lock" }
            guard present.isEmpty else {
                throw Failure(
                    .alreadyInitialised,
                    "\(directory) is not empty (\(present.prefix(3).joined(separator: ", "))) and holds no deployment.json; name a new or empty directory"
                )
            }
            for directory in [publicDirectory, secretDirectory, allowedDirectory, bundlesDirectory] {
                try Files.ensureDirectory(directory, what: "key directory")
            }
            var state = State(deployment: inventory.deployment, brokerHost: inventory.brokerHost, hosts: [], principals: [], revoked: [])
            try save(state)
            return try apply(inventory, to: &state, reissue: [])
        }
    }

    /// `keys add`: makes keys for the inventory's principals that have none, never for one that
    /// has a key (its key is kept) nor for a revoked one unless it is in `reissue` (it gets a new
    /// key). Moves kiosks and the broker to the host the inventory names now, and rewrites the
    /// allow-list and the bundles that change.
    /// - Throws: `.refused` for an inventory of another deployment, a `reissue` name that is not
    ///   revoked, or a principal whose role changed; `.unknownPrincipal` for a `reissue` name the
    ///   inventory does not hold.
    @discardableResult
    public func add(_ inventory: DeploymentInventory, reissue: Set<String> = []) throws(Failure) -> Changes {
        try locked { () throws(Failure) -> Changes in
            var state = try loadState()
            guard inventory.deployment == state.deployment else {
                throw Failure(
                    .refused,
                    "the inventory is of deployment '\(inventory.deployment)' but \(directory) holds the keys of '\(state.deployment)'")
            }
            return try apply(inventory, to: &state, reissue: reissue)
        }
    }

    /// `keys rotate`: a new key pair for `name`, under the same name and role. Its old key stays
    /// in the allow-list (as `<name>.previous.cert`) until `revoke(name, previousOnly: true)`, so
    /// the program keeps working until it runs with the new key from its bundle. The broker has
    /// no overlap: every host needs the new `broker.cert` before its programs reconnect.
    /// - Throws: `.unknownPrincipal`, or `.refused` when a rotation of `name` is under way.
    @discardableResult
    public func rotate(_ name: String) throws(Failure) -> Changes {
        try locked { () throws(Failure) -> Changes in
            var state = try loadState()
            guard let index = state.principals.firstIndex(where: { $0.name == name }) else { throw unknown(name, in: state) }
            var principal = state.principals[index]
            if principal.previousKey != nil {
                throw Failure(
                    .refused,
                    "'\(name)' is being rotated already: its previous key is still allowed; once \(principal.host) runs with its new key, end that rotation with `switchboard keys revoke \(name) --previous`"
                )
            }
            var changes = Changes()
            let old = try Files.read(publicFile(name))
            if name != "broker" {
                // The old public certificate first: if this run stops here, the next sync still
                // finds every file the state names.
                try Files.write(old, to: previousFile(name), mode: 0o644)
                principal.previousKey = principal.publicKey
            } else {
                changes.notes.append(
                    "the broker has one key at a time: copy every host's bundle (each holds the new broker.cert) and restart the broker with its new broker.secret; clients reconnect once they have the new broker.cert"
                )
            }
            let certificate = try makeKey(name: name, role: role(of: principal))
            principal.publicKey = certificate.publicKey.z85
            principal.created = certificate.created
            state.principals[index] = principal
            try save(state)
            changes.made.append(principal)
            try sync(state, into: &changes)
            return changes
        }
    }

    /// `keys revoke`: takes `name`'s key (and a previous one of a rotation) out of the allow-list
    /// and the broker's bundle, deletes its secret from its host's bundle and from `secret/`, and
    /// records the revocation, so `add` does not bring it back (unless asked with `reissue`).
    /// With `previousOnly`, ends a rotation: only the old key is taken out.
    /// Revoking a name revoked already rewrites the files again and says so.
    /// - Throws: `.unknownPrincipal`; `.refused` for the broker (rotate its key instead) or for
    ///   `previousOnly` with no rotation under way.
    @discardableResult
    public func revoke(_ name: String, previousOnly: Bool = false) throws(Failure) -> Changes {
        try locked { () throws(Failure) -> Changes in
            var state = try loadState()
            var changes = Changes()
            guard let index = state.principals.firstIndex(where: { $0.name == name }) else {
                guard let revocation = state.revocation(of: name) else { throw unknown(name, in: state) }
                changes.notes.append("'\(name)' was revoked already, at \(revocation.time)")
                try sync(state, into: &changes)
                return changes
            }
            guard name != "broker" else {
                throw Failure(
                    .refused,
                    "the broker cannot be revoked: every client needs its key; replace it with `switchboard keys rotate broker`")
            }
            let principal = state.principals[index]
            let now = Timestamp.now()
            func revocation(_ key: String, _ reason: String) -> State.Revocation {
                State.Revocation(name: name, role: principal.role, host: principal.host, publicKey: key, time: now, reason: reason)
            }
            if previousOnly {
                guard let previous = principal.previousKey else {
                    throw Failure(.refused, "'\(name)' has no previous key: no rotation of it is under way")
                }
                state.principals[index].previousKey = nil
                state.revoked.append(revocation(previous, "rotated"))
            } else {
                state.principals.remove(at: index)
                if let previous = principal.previousKey { state.revoked.append(revocation(previous, "rotated")) }
                state.revoked.append(revocation(principal.publicKey, "revoked"))
            }
            // The state first: from here on every sync leaves the key out, even if this run stops.
            try save(state)
            changes.revoked.append(previousOnly ? "\(name)\(AllowList.previousSuffix)" : name)
            try sync(state, into: &changes)
            try Files.remove(previousFile(name))
            if !previousOnly {
                try Files.remove(secretFile(name))
                try Files.remove(publicFile(name))
            }
            return changes
        }
    }

    /// `keys bundle`: writes `host`'s bundle again from the KEYDIR (and the allow-list, so a
    /// broker host's bundle matches it).
    /// - Throws: `.unknownHost` for a host no inventory has named.
    @discardableResult
    public func bundle(_ host: String) throws(Failure) -> Changes {
        try locked { () throws(Failure) -> Changes in
            let state = try loadState()
            guard state.hosts.contains(host) else {
                throw Failure(.unknownHost, "no host '\(host)' in \(directory) (hosts: \(state.hosts.joined(separator: ", ")))")
            }
            var changes = Changes()
            changes.allowList = try syncAllowed(state, into: allowedDirectory)
            if try syncBundle(host, state) { changes.bundles.append(host) }
            return changes
        }
    }

    /// Reads `deployment.json`.
    /// - Throws: `.notInitialised` when there is none.
    public func state() throws(Failure) -> State { try loadState() }

    // MARK: Applying an inventory

    private func apply(_ inventory: DeploymentInventory, to state: inout State, reissue: Set<String>) throws(Failure) -> Changes {
        var changes = Changes()
        let wanted = Dictionary(uniqueKeysWithValues: inventory.principals.map { ($0.name, $0) })
        for name in reissue.sorted() {
            guard wanted[name] != nil else {
                throw Failure(.unknownPrincipal, "--reissue \(name): the inventory has no principal '\(name)'")
            }
            guard state.revocation(of: name) != nil else {
                let why =
                    state.principal(name) != nil
                    ? "it has a key; replace that with `switchboard keys rotate \(name)`" : "it has never had a key"
                throw Failure(.refused, "--reissue \(name): '\(name)' is not revoked (\(why))")
            }
        }
        // Check everything before the first file is written.
        var next = state.principals
        var toMake: [DeploymentInventory.Principal] = []
        for principal in inventory.principals {
            if let index = next.firstIndex(where: { $0.name == principal.name }) {
                let existing = next[index]
                guard existing.role == principal.role.description else {
                    throw Failure(
                        .refused,
                        "'\(principal.name)' has a key of role \(existing.role), and the inventory now makes it \(principal.role); revoke it first (`switchboard keys revoke \(principal.name)`) and give the new principal another name"
                    )
                }
                if existing.host != principal.host {
                    changes.moved.append(principal.name)
                    changes.notes.append("moved '\(principal.name)' from host \(existing.host) to host \(principal.host)")
                    next[index].host = principal.host
                    next[index].file = principal.file
                }
            } else if let revocation = state.revocation(of: principal.name), !reissue.contains(principal.name) {
                changes.notes.append(
                    "skipped '\(principal.name)': revoked at \(revocation.time); `switchboard keys add --reissue \(principal.name)` gives it a new key"
                )
            } else {
                toMake.append(principal)
            }
        }
        let planned =
            next
            + toMake.map {
                State.Principal(name: $0.name, role: $0.role.description, host: $0.host, file: $0.file, publicKey: "", created: "")
            }
        var files: [String: String] = [:]
        for principal in planned.sorted(by: { $0.name < $1.name }) {
            let key = "\(principal.host)/\(principal.file)"
            if let other = files[key] {
                throw Failure(
                    .refused,
                    "'\(other)' and '\(principal.name)' would both be \(principal.file).secret in the bundle of host \(principal.host); revoke '\(other)' first or rename one"
                )
            }
            files[key] = principal.name
        }
        for principal in state.principals where wanted[principal.name] == nil {
            changes.notes.append(
                "'\(principal.name)' (host \(principal.host)) is not in the inventory any more; it stays allowed until `switchboard keys revoke \(principal.name)`"
            )
        }
        if state.brokerHost != inventory.brokerHost {
            if !state.principals.isEmpty {
                changes.notes.append("broker_host is now \(inventory.brokerHost) (was \(state.brokerHost))")
            }
            state.brokerHost = inventory.brokerHost
        }
        state.principals = next
        state.hosts = Array(Set(state.hosts + inventory.hosts.map(\.name))).sorted()
        try save(state)
        // One principal at a time, saved as it is made: a run that stops keeps what it made.
        for principal in toMake {
            let certificate = try makeKey(name: principal.name, role: principal.role)
            let record = State.Principal(
                name: principal.name, role: principal.role.description, host: principal.host, file: principal.file,
                publicKey: certificate.publicKey.z85, created: certificate.created)
            state.principals.append(record)
            state.principals.sort { $0.name < $1.name }
            try save(state)
            changes.made.append(record)
        }
        try sync(state, into: &changes)
        return changes
    }

    /// A new key pair for `name`, written to `public/` and `secret/` (replacing what is there).
    private func makeKey(name: String, role: Role) throws(Failure) -> Certificate {
        let keys: CurveKeyPair
        do {
            keys = try CurveKeyPair.generate()
        } catch {
            throw Failure(.io, "cannot make a CURVE key pair: \(error)")
        }
        let certificate = Certificate(name: name, role: role, keys: keys)
        try Files.write(certificate.json(secret: true), to: secretFile(name), mode: 0o600)
        try Files.write(certificate.json(secret: false), to: publicFile(name), mode: 0o644)
        return certificate
    }

    private func role(of principal: State.Principal) throws(Failure) -> Role {
        guard let role = Role(principal.role) else {
            throw Failure(.io, "\(stateFile): principal '\(principal.name)' has an unknown role '\(principal.role)'")
        }
        return role
    }

    private func unknown(_ name: String, in state: State) -> Failure {
        Failure(
            .unknownPrincipal,
            "no principal '\(name)' in \(directory) (names: broker, <host>-<program>, kiosk ids; `switchboard keys list --dir \(directory)` lists them)"
        )
    }

    // MARK: Derived files

    /// Rewrites `allowed/` and every host's bundle; notes what changed.
    private func sync(_ state: State, into changes: inout Changes) throws(Failure) {
        changes.allowList = try syncAllowed(state, into: allowedDirectory)
        for host in state.hosts {
            if try syncBundle(host, state) { changes.bundles.append(host) }
        }
    }

    /// Makes `directory` hold exactly the allow-list the state says: each principal's public
    /// certificate but the broker's, and the previous one of a rotation.
    /// - Returns: whether any file changed.
    private func syncAllowed(_ state: State, into directory: String) throws(Failure) -> Bool {
        try Files.ensureDirectory(directory, what: "allow-list directory")
        var wanted: [(file: String, data: Data)] = []
        for principal in state.principals where principal.name != "broker" {
            if let previous = principal.previousKey {
                let data = try checkedPublic(previousFile(principal.name), principal, key: previous)
                wanted.append(("\(principal.name)\(AllowList.previousSuffix).cert", data))
            }
            wanted.append(("\(principal.name).cert", try checkedPublic(publicFile(principal.name), principal, key: principal.publicKey)))
        }
        // A rotation's previous file before the new key replaces `<name>.cert`, so a broker
        // reloading in between still finds the old key.
        func rank(_ file: String) -> (Int, String) { (file.hasSuffix("\(AllowList.previousSuffix).cert") ? 0 : 1, file) }
        wanted.sort { rank($0.file) < rank($1.file) }
        var changed = false
        for (file, data) in wanted {
            if try Files.write(data, to: (directory as NSString).appendingPathComponent(file), mode: 0o644) { changed = true }
        }
        let keep = Set(wanted.map(\.file))
        for file in try Files.list(directory) where (file.hasSuffix(".cert") && !keep.contains(file)) || Files.isLeftOver(file) {
            if try Files.remove((directory as NSString).appendingPathComponent(file)) { changed = true }
        }
        return changed
    }

    /// Makes `bundles/<host>` hold exactly that host's secrets, `broker.cert`, and on the broker's
    /// host `broker.secret` and `allowed/`.
    /// - Returns: whether any file changed.
    private func syncBundle(_ host: String, _ state: State) throws(Failure) -> Bool {
        try Files.ensureDirectory(bundlesDirectory, what: "bundles directory")
        let bundle = bundleDirectory(host)
        try Files.ensureDirectory(bundle, what: "bundle directory")
        guard let broker = state.principal("broker") else { throw Failure(.io, "\(stateFile) holds no broker") }
        var wanted: [String: (data: Data, mode: mode_t)] = [
            "broker.cert": (try checkedPublic(publicFile("broker"), broker, key: broker.publicKey), 0o644)
        ]
        for principal in state.principals where principal.host == host {
            wanted["\(principal.file).secret"] = (try checkedSecret(principal), 0o600)
        }
        var changed = false
        for (file, content) in wanted.sorted(by: { $0.key < $1.key }) {
            if try Files.write(content.data, to: (bundle as NSString).appendingPathComponent(file), mode: content.mode) { changed = true }
        }
        for file in try Files.list(bundle)
        where ((file.hasSuffix(".secret") || file.hasSuffix(".cert")) && wanted[file] == nil) || Files.isLeftOver(file) {
            if try Files.remove((bundle as NSString).appendingPathComponent(file)) { changed = true }
        }
        let allowed = (bundle as NSString).appendingPathComponent("allowed")
        if state.brokerHostName == host {
            if try syncAllowed(state, into: allowed) { changed = true }
        } else if FileManager.default.fileExists(atPath: allowed) {
            // The broker moved away from this host.
            for file in try Files.list(allowed) where file.hasSuffix(".cert") {
                try Files.remove((allowed as NSString).appendingPathComponent(file))
            }
            try? FileManager.default.removeItem(atPath: allowed)
            changed = true
        }
        return changed
    }

    /// The bytes of a public certificate file, checked to be `principal`'s with `key`.
    private func checkedPublic(_ path: String, _ principal: State.Principal, key: String) throws(Failure) -> Data {
        let data = try Files.read(path)
        let certificate: Certificate
        do {
            certificate = try Certificate.parse(data, path: path, secret: false)
        } catch {
            throw Failure(.io, "\(error)")
        }
        try check(certificate, path: path, principal, key: key)
        return data
    }

    /// The bytes of a principal's secret certificate, checked to be private and its own.
    private func checkedSecret(_ principal: State.Principal) throws(Failure) -> Data {
        let path = secretFile(principal.name)
        let certificate: Certificate
        do {
            certificate = try Certificate.load(secretFile: path)
        } catch {
            throw Failure(.io, "\(error)")
        }
        try check(certificate, path: path, principal, key: principal.publicKey)
        return try Files.read(path)
    }

    private func check(_ certificate: Certificate, path: String, _ principal: State.Principal, key: String) throws(Failure) {
        guard certificate.name == principal.name, certificate.role.description == principal.role, certificate.publicKey.z85 == key else {
            throw Failure(
                .io,
                "\(path) is not the certificate \(stateFile) records for '\(principal.name)' (name, role or key differ); was the KEYDIR edited by hand?"
            )
        }
    }

    // MARK: State and lock

    private func loadState() throws(Failure) -> State {
        guard FileManager.default.fileExists(atPath: stateFile) else {
            throw Failure(
                .notInitialised,
                "\(directory) holds no deployment.json: make it with `switchboard keys init --inventory FILE --dir \(directory)`")
        }
        let data = try Files.read(stateFile)
        do {
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            let state = try decoder.decode(State.self, from: data)
            guard state.format == 1 else {
                throw Failure(.io, "\(stateFile) is of format \(state.format); this switchboard reads format 1")
            }
            return state
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(.io, "\(stateFile) is not a deployment state file: \(error)")
        }
    }

    private func save(_ state: State) throws(Failure) {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(state) + Data("\n".utf8)
        } catch {
            throw Failure(.io, "cannot encode \(stateFile): \(error)")
        }
        try Files.write(data, to: stateFile, mode: 0o600)
    }

    /// Runs `body` holding the KEYDIR's lock, once the KEYDIR is known to exist and be private.
    private func locked<T>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        guard FileManager.default.fileExists(atPath: directory) else {
            throw Failure(
                .notInitialised,
                "there is no key directory \(directory): make it with `switchboard keys init --inventory FILE --dir \(directory)`")
        }
        try Files.ensureDirectory(directory, what: "key directory")
        let lock = try Files.Lock(path(".lock"))
        defer { lock.release() }
        return try body()
    }
}
