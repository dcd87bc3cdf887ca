import Foundation
public import SwitchboardTokens

/// The back-end accounts `switchboard-auth` holds: the only place Switchboard keeps passwords.
///
/// They come from a JSON file that only its owner may read (0600, like our certificates' secret
/// files), or from the environment variable `SWITCHBOARD_AUTH_ACCOUNTS` holding the same JSON;
/// never from flags, which every user of the machine can read in the process list. The format
/// is `AuthAccounts.example` (protocol/README.md, section 14.5).
public struct AuthAccount: Codable, Sendable, Hashable, CustomStringConvertible {
    public var backend: String
    public var account: String
    public var password: String
    public var baseURL: String
    /// Back-end settings that are not secret (database, enterprise, site, program, application).
    public var options: [String: String]

    enum CodingKeys: String, CodingKey {
        case backend, account, password, options
        case baseURL = "base_url"
    }

    public init(backend: String, account: String, password: String, baseURL: String, options: [String: String] = [:]) {
        self.backend = backend
        self.account = account
        self.password = password
        self.baseURL = baseURL
        self.options = options
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        backend = try container.decode(String.self, forKey: .backend)
        account = try container.decode(String.self, forKey: .account)
        password = try container.decode(String.self, forKey: .password)
        baseURL = try container.decode(String.self, forKey: .baseURL)
        options = try container.decodeIfPresent([String: String].self, forKey: .options) ?? [:]
    }

    /// `filemaker/switchboard at https://…`: never the password.
    public var description: String { "\(backend)/\(account) at \(baseURL)" }

    public func option(_ name: String) throws(AuthError) -> String {
        guard let value = options[name], !value.isEmpty else {
            throw AuthError(.configuration, "account \(backend)/\(account) needs options.\(name)")
        }
        return value
    }
}

public struct AuthAccounts: Sendable {
    public var accounts: [AuthAccount]

    public static let environmentVariable = "SWITCHBOARD_AUTH_ACCOUNTS"

    /// An accounts document with one account of each back end and made-up values, as
    /// `switchboard-auth --help` and protocol/README.md (section 14.5) show it; a test holds it
    /// to the parser and to the README. Lines stay under 80 characters for `--help`.
    public static let example = """
        {"accounts": [
          {"backend": "filemaker", "account": "switchboard",
           "password": "EXAMPLE-not-a-real-password",
           "base_url": "https://filemaker.example.org",
           "options": {"database": "Shelter"}},
          {"backend": "eto", "account": "intake@example.org",
           "password": "EXAMPLE-not-a-real-password",
           "base_url": "https://eto.example.org/API",
           "options": {"enterprise": "00000000-0000-0000-0000-000000000000",
                       "site": "101", "program": "792",
                       "time_zone": "America/Los_Angeles"}},
          {"backend": "directory", "account": "outreach-team",
           "password": "EXAMPLE-not-a-real-password",
           "base_url": "https://directory.example.org/directory"},
          {"backend": "sap", "account": "outreach1",
           "password": "EXAMPLE-not-a-real-password",
           "base_url": "https://sap.example.org",
           "options": {"application": "org.example.outreach"}}
        ]}
        """

    /// What each field of an accounts document means, for `--help` (section 14.5 says the same).
    public static let fields = """
        backend: eto, filemaker, directory or sap. account: the back-end user name
        (ETO: the e-mail address). password: its password. base_url: the back end's
        http(s) root (FileMaker: the server; ETO: the API root, ending in /API;
        Directory: the service root; SAP: the Mobile Services root). options, all
        strings ("101", not 101): FileMaker database (required); ETO site (required,
        a number), enterprise (the GUID; needed when the account has several),
        program (a number), time_zone (an IANA name: its offset in minutes is sent
        to SSOSiteLogin; default: this host's zone), utc_offset (minutes, overrides
        time_zone); SAP application (required); Directory none. Each
        backend/account pair at most once; other fields are ignored.
        """

    public init(accounts: [AuthAccount]) throws(AuthError) {
        var seen = Set<String>()
        for account in accounts {
            guard AuthContent.backends.contains(account.backend) else {
                throw AuthError(
                    .configuration,
                    "account \(account.account): backend '\(account.backend)' is not one of \(AuthContent.backends.sorted().joined(separator: ", "))"
                )
            }
            guard URL(string: account.baseURL)?.scheme.map({ ["http", "https"].contains($0) }) == true else {
                throw AuthError(.configuration, "account \(account.backend)/\(account.account): base_url must be an http(s) URL")
            }
            guard seen.insert("\(account.backend)/\(account.account)").inserted else {
                throw AuthError(.configuration, "account \(account.backend)/\(account.account) is listed twice")
            }
        }
        self.accounts = accounts
    }

    public func account(backend: String, account: String) -> AuthAccount? {
        accounts.first { $0.backend == backend && $0.account == account }
    }

    /// Reads the accounts from `path` (refused if group or others may read it), or, without a
    /// path, from `SWITCHBOARD_AUTH_ACCOUNTS` in `environment` (the program's, passed in).
    public static func load(path: String?, environment: [String: String]) throws(AuthError) -> AuthAccounts {
        let data: Data
        let source: String
        if let path {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                let mode = (attributes[.posixPermissions] as? NSNumber)?.uint16Value
            else { throw AuthError(.configuration, "cannot read the accounts file \(path)") }
            guard mode & 0o077 == 0 else {
                throw AuthError(
                    .configuration,
                    "the accounts file \(path) holds passwords and may be read by others (mode \(String(mode & 0o777, radix: 8))): chmod 600 \(path)"
                )
            }
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw AuthError(.configuration, "cannot read the accounts file \(path)")
            }
            data = contents
            source = path
        } else if let text = environment[environmentVariable] {
            data = Data(text.utf8)
            source = "$\(environmentVariable)"
        } else {
            throw AuthError(.configuration, "no accounts: give --accounts-file FILE (mode 0600) or set \(environmentVariable)")
        }
        struct Document: Decodable { var accounts: [AuthAccount] }
        do {
            return try AuthAccounts(accounts: JSONDecoder().decode(Document.self, from: data).accounts)
        } catch let error as AuthError {
            throw error
        } catch let DecodingError.keyNotFound(key, context) {
            let path = (context.codingPath + [key]).map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw AuthError(.configuration, "\(source): missing \(path)")
        } catch {
            // Never echo the document: it holds passwords.
            throw AuthError(
                .configuration,
                "\(source) is not a valid accounts document ({\"accounts\": [{backend, account, password, base_url, options}]}, options' values strings; see switchboard-auth --help)"
            )
        }
    }
}
