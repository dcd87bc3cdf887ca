import ArgumentParser
import Foundation
import SwitchboardProtocol
import SwitchboardSecurity
import ZeroMQ

/// `switchboard keygen`: a CURVE certificate for a principal.
struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Make a certificate (CURVE key pair) for a principal.",
        discussion: """
            Writes <out>/<name>.cert (public: copy it into the broker's certificate
            directory to allow the principal) and <out>/<name>.secret (mode 0600: give
            it only to the principal's program). Roles: kiosk, worker:<service>, auth,
            monitor, admin, broker. A worker gets tokens from auth only for its own
            service's back end (worker:eto: eto) unless --backends lists others. --out is created with mode 0700 when missing. An
            existing directory that group or others can enter, read or write is refused,
            not changed (it may be shared on purpose): run chmod 700 on it, or name a
            new directory.
            """)

    @Option(help: "The principal's name (a kiosk id, a worker name).") var name: String
    @Option(help: "kiosk, worker:<service>, auth, monitor, admin or broker.") var role: String
    @Option(help: "The directory the two files go to: created 0700; an existing one must be 0700 (no access for group or others).")
    var out: String
    @Option(help: "Expiry, as an RFC 3339 time (2027-01-01T00:00:00Z).") var expires: String?
    @Option(help: "Expiry, in days from now.") var days: Int?
    @Option(
        help:
            "Workers only: the back ends (eto, filemaker, directory, sap; comma-separated) whose tokens auth may hand this principal; default: its own service's."
    )
    var backends: String?

    var backendList: [String]? {
        backends.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    func validate() throws {
        guard Certificate.isValidName(name) else { throw ValidationError("--name must be 1–64 characters of A–Z a–z 0–9 . _ : -") }
        guard Role(role) != nil else {
            throw ValidationError(
                "--role must be kiosk, worker:<service> (a service not named \(Role.reservedServices.sorted().joined(separator: ", "))), auth, monitor, admin or broker; got '\(role)'"
            )
        }
        if expires != nil && days != nil { throw ValidationError("give --expires or --days, not both") }
        if let expires, Timestamp.parse(expires) == nil { throw ValidationError("--expires '\(expires)' is not an RFC 3339 time") }
        if let days, days < 1 { throw ValidationError("--days must be at least 1") }
        if let backendList, let role = Role(role), let problem = Certificate.backendsProblem(backendList, role: role) {
            throw ValidationError("--backends: \(problem)")
        }
    }

    func run() throws {
        var expiry: Date?
        if let expires, let milliseconds = Timestamp.parse(expires) { expiry = Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        if let days { expiry = Date(timeIntervalSinceNow: Double(days) * 86_400) }
        let certificate = Certificate(
            name: name, role: Role(role)!, keys: try CurveKeyPair.generate(), expires: expiry, backends: backendList)
        do {
            let (publicPath, secretPath) = try certificate.write(to: out)
            print("public certificate: \(publicPath)")
            print("secret certificate: \(secretPath) (mode 0600)")
            print("public key: \(certificate.publicKey.z85)")
        } catch let failure as Certificate.Failure {
            throw ValidationError(failure.description)
        }
    }
}
