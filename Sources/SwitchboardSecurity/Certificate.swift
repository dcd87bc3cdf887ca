public import Foundation
public import SwitchboardProtocol
import SwitchboardRuntime
public import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// What a principal is, and so what it may do (protocol/README.md, section 13).
public enum Role: Sendable, Hashable, CustomStringConvertible {
    /// A check-in kiosk or outreach phone.
    case kiosk
    /// A worker serving one service (`worker:eto`).
    case worker(service: String)
    /// The credential manager: the only server of the `auth` service.
    case auth
    /// An operator's read-only tool.
    case monitor
    /// An operator with replay of dead letters.
    case admin
    /// The broker itself.
    case broker

    public init?(_ text: String) {
        switch text {
        case "kiosk": self = .kiosk
        case "auth": self = .auth
        case "monitor": self = .monitor
        case "admin": self = .admin
        case "broker": self = .broker
        default:
            guard text.hasPrefix("worker:") else { return nil }
            let service = String(text.dropFirst("worker:".count))
            guard Operation.isValid(service), !service.hasPrefix("mmi."), !Self.reservedServices.contains(service) else { return nil }
            self = .worker(service: service)
        }
    }

    /// Names no worker may serve under: `auth` is auth's own role, and a worker publishes its
    /// service's events (`S.*`), so a worker named after another family could state kiosks'
    /// check-ins, the Directory's people or the broker's own dead letters and refusals.
    public static let reservedServices: Set<String> = ["auth", "checkin", "person", "dlq", "security", "groups", "broker"]

    public var description: String {
        switch self {
        case .kiosk: "kiosk"
        case .worker(let service): "worker:\(service)"
        case .auth: "auth"
        case .monitor: "monitor"
        case .admin: "admin"
        case .broker: "broker"
        }
    }
}

/// A principal's certificate: its name, role, CURVE public key and optional expiry. The public
/// part is a `<name>.cert` file; the secret part (with the secret key) a `<name>.secret` file of
/// mode 0600. A directory of public certificates is the broker's allow-list.
public struct Certificate: Sendable, Hashable {
    public var name: String
    public var role: Role
    public var publicKey: CurveKey
    public var secretKey: CurveKey?
    public var created: String
    public var expires: Date?
    /// The back ends whose tokens `auth` hands this principal (`token.get`, protocol 14.1);
    /// only for `worker:*` roles. nil: the worker's own service (`worker:eto` gets `eto`).
    public var backends: [String]?

    /// The back ends this principal may have tokens for: `backends`, else its own service for a
    /// worker, else none (only workers call `auth`).
    public var tokenBackends: Set<String> {
        guard case .worker(let service) = role else { return [] }
        return Set(backends ?? [service])
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    public init(
        name: String, role: Role, keys: CurveKeyPair, created: String = Timestamp.now(), expires: Date? = nil, backends: [String]? = nil
    ) {
        self.name = name
        self.role = role
        self.publicKey = keys.publicKey
        self.secretKey = keys.secretKey
        self.created = created
        self.expires = expires
        self.backends = backends
    }

    /// Back-end names as `auth` knows them (protocol 14.1), and as `backends` may list them.
    public static let knownBackends: Set<String> = ["eto", "filemaker", "directory", "sap"]

    /// Why `backends` cannot be a certificate's for `role` (nil: it can).
    public static func backendsProblem(_ backends: [String], role: Role) -> String? {
        guard case .worker = role else { return "only a worker:<service> certificate may name back ends, not role \(role)" }
        guard !backends.isEmpty else { return "back ends must name at least one of \(knownBackends.sorted().joined(separator: ", "))" }
        if let unknown = backends.first(where: { !knownBackends.contains($0) }) {
            return "unknown back end '\(unknown.prefix(40))' (one of \(knownBackends.sorted().joined(separator: ", ")))"
        }
        return nil
    }

    /// Principal names: what the ZAP handler gives as `User-Id`, and what a producer must call itself.
    public static func isValidName(_ name: String) -> Bool { Producer.isValid(name) }

    public func isExpired(at date: Date = Date()) -> Bool { expires.map { $0 <= date } ?? false }

    public var keyPair: CurveKeyPair? { secretKey.map { CurveKeyPair(publicKey: publicKey, secretKey: $0) } }

    // MARK: Files

    /// Writes `<directory>/<name>.cert` (0644) and `<directory>/<name>.secret` (0600), in a
    /// directory of mode 0700 (created so when missing).
    /// - Returns: the two paths.
    /// - Throws: `Failure` when `directory` exists and group or others can enter, read or write
    ///   it (naming it and `chmod 700`): the secret key would sit where others can list it, or
    ///   replace it.
    @discardableResult
    public func write(to directory: String) throws -> (public: String, secret: String) {
        do {
            try PrivateFiles.ensureDirectory(directory, what: "key directory")
        } catch {
            throw Failure(error.message)
        }
        let publicPath = (directory as NSString).appendingPathComponent("\(name).cert")
        let secretPath = (directory as NSString).appendingPathComponent("\(name).secret")
        for path in [publicPath, secretPath] where FileManager.default.fileExists(atPath: path) {
            throw Failure("\(path) exists already; remove it first to make a new key for '\(name)'")
        }
        // 0644 whatever the umask: a copy keeps the mode, and the broker refuses an allow-list
        // certificate that group or others can write (protocol/README.md, 13.6).
        guard FileManager.default.createFile(atPath: publicPath, contents: json(secret: false), attributes: [.posixPermissions: 0o644])
        else { throw Failure("cannot write \(publicPath)") }
        // Created 0600 from the start: the secret is never readable by others, not even briefly.
        guard FileManager.default.createFile(atPath: secretPath, contents: json(secret: true), attributes: [.posixPermissions: 0o600])
        else { throw Failure("cannot write \(secretPath)") }
        return (publicPath, secretPath)
    }

    func json(secret: Bool) -> Data {
        var object: [String: JSONValue] = [
            "name": .string(name), "role": .string(role.description), "public_key": .string(publicKey.z85),
            "created": .string(created),
        ]
        if let expires { object["expires"] = .string(Timestamp.format(expires)) }
        if let backends { object["backends"] = .array(backends.map { .string($0) }) }
        if secret, let secretKey { object["secret_key"] = .string(secretKey.z85) }
        var writer = JSONWriter()
        writer.value(.object(object))
        return writer.data + Data("\n".utf8)
    }

    /// Reads a public `.cert` file.
    public static func load(publicFile path: String) throws -> Certificate {
        try parse(try read(path), path: path, secret: false)
    }

    /// Reads a `.secret` file; refuses one that group or others can read.
    public static func load(secretFile path: String) throws -> Certificate {
        var info = stat()
        guard stat(path, &info) == 0 else { throw Failure("cannot read secret certificate \(path): \(String(cString: strerror(errno)))") }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw Failure(
                "secret certificate \(path) is readable by group or others (mode \(String(mode, radix: 8))); run chmod 600 on it")
        }
        return try parse(try read(path), path: path, secret: true)
    }

    static func read(_ path: String) throws -> Data {
        do {
            return try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw Failure("cannot read certificate \(path): \(error.localizedDescription)")
        }
    }

    static func parse(_ data: Data, path: String, secret: Bool) throws -> Certificate {
        guard case .object(let object)? = JSONValue.parse(data) else { throw Failure("\(path) is not a JSON object") }
        func string(_ key: String) throws -> String {
            guard case .string(let value)? = object[key] else { throw Failure("\(path): field '\(key)' is missing or not a string") }
            return value
        }
        let name = try string("name")
        guard isValidName(name) else { throw Failure("\(path): field 'name' must be 1–64 characters of A–Z a–z 0–9 . _ : -") }
        let roleText = try string("role")
        guard let role = Role(roleText) else {
            throw Failure(
                "\(path): field 'role' must be kiosk, worker:<service> (a service not named \(Role.reservedServices.sorted().joined(separator: ", "))), auth, monitor, admin or broker; got '\(roleText)'"
            )
        }
        let publicKey: CurveKey
        do {
            publicKey = try CurveKey(z85: try string("public_key"))
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure("\(path): field 'public_key' is not a 40-character Z85 key")
        }
        var expires: Date?
        if object["expires"] != nil {
            guard let milliseconds = Timestamp.parse(try string("expires")) else {
                throw Failure("\(path): field 'expires' is not an RFC 3339 time")
            }
            expires = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        }
        var backends: [String]?
        if let value = object["backends"] {
            guard case .array(let items) = value else { throw Failure("\(path): field 'backends' must be an array of back-end names") }
            let names = items.compactMap { item -> String? in if case .string(let name) = item { name } else { nil } }
            guard names.count == items.count else { throw Failure("\(path): field 'backends' must be an array of back-end names") }
            if let problem = backendsProblem(names, role: role) { throw Failure("\(path): field 'backends': \(problem)") }
            backends = names
        }
        var certificate = Certificate(
            name: name, role: role, keys: CurveKeyPair(publicKey: publicKey, secretKey: publicKey), created: (try? string("created")) ?? "",
            expires: expires, backends: backends)
        certificate.secretKey = nil
        if secret {
            let secretKey: CurveKey
            do {
                secretKey = try CurveKey(z85: try string("secret_key"))
            } catch let failure as Failure {
                throw failure
            } catch {
                throw Failure("\(path): field 'secret_key' is not a 40-character Z85 key")
            }
            // The pair must belong together: a secret file with someone else's public key is a mistake.
            guard (try? CurveKeyPair(secretKey: secretKey).publicKey) == publicKey else {
                throw Failure("\(path): 'secret_key' does not belong to 'public_key'")
            }
            certificate.secretKey = secretKey
        }
        return certificate
    }
}
