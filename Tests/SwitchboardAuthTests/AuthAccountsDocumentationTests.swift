import Foundation
import SwitchboardAuth
import SwitchboardTesting
import SwitchboardTokens
import Testing

/// The accounts file's example, as `switchboard-auth --help` and protocol/README.md section 14.5
/// show it, held to the parser that reads accounts files.
@Suite("Accounts file documentation")
struct AuthAccountsDocumentationTests {
    @Test("the accounts example of --help parses, with each back end's required options")
    func accountsExampleParses() throws {
        let accounts = try AuthAccounts.load(path: nil, environment: [AuthAccounts.environmentVariable: AuthAccounts.example])
        #expect(Set(accounts.accounts.map(\.backend)) == AuthContent.backends)
        let required = ["filemaker": ["database"], "eto": ["site"], "sap": ["application"], "directory": []]
        for account in accounts.accounts {
            for option in required[account.backend] ?? [] {
                #expect(throws: Never.self, "\(account.backend) needs options.\(option)") { try account.option(option) }
            }
            #expect(account.password.contains("EXAMPLE"), "the example's passwords are obviously fake")
        }
        #expect(accounts.account(backend: "eto", account: "intake@example.org")?.options["time_zone"] == "America/Los_Angeles")
        // Every line fits an 80-column terminal, so --help shows it unwrapped.
        #expect(AuthAccounts.example.split(separator: "\n").allSatisfy { $0.count < 80 })
        #expect(AuthAccounts.fields.split(separator: "\n").allSatisfy { $0.count < 80 })
    }

    @Test("protocol/README.md section 14.5 shows the same accounts example, and it parses")
    func accountsExampleInTheProtocol() throws {
        let readme = try String(contentsOf: Vectors.packageRoot.appendingPathComponent("protocol/README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "### 14.5 Accounts file"))
        let start = try #require(readme.range(of: "```json\n", range: section.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "\n```", range: start.upperBound..<readme.endIndex))
        let example = String(readme[start.upperBound..<end.lowerBound])
        #expect(example == AuthAccounts.example)
        let accounts = try AuthAccounts.load(path: nil, environment: [AuthAccounts.environmentVariable: example])
        #expect(accounts.accounts.count == 4)
        // The table lists every field the parser reads.
        for field in ["`backend`", "`account`", "`password`", "`base_url`", "`options`"] {
            #expect(readme[section.upperBound...].contains(field))
        }
    }

    @Test("an option written as a number is refused with a message that says options are strings")
    func numericOptionIsExplained() throws {
        let document =
            #"{"accounts": [{"backend": "eto", "account": "a@example.org", "password": "p", "base_url": "https://eto.example.org/API", "options": {"site": 101}}]}"#
        let error = #expect(throws: AuthError.self) {
            try AuthAccounts.load(path: nil, environment: [AuthAccounts.environmentVariable: document])
        }
        #expect(error?.message.contains("strings") == true, "\(String(describing: error))")
    }
}
