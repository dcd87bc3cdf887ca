import ArgumentParser
import Foundation
import SwitchboardSecurity

/// `switchboard keys …`: the keys of a deployment across hosts, from an inventory file. The work
/// is `DeploymentKeys` (SwitchboardSecurity); this parses options and prints what it did.
struct KeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Make and manage the CURVE keys of a deployment: every certificate, the broker's allow-list, one bundle per host.",
        discussion: """
            The inventory (JSON) names the deployment, the broker's DNS name, and each host \
            with the programs it runs and, for a site, its kiosks:

              {
                "deployment": "riverside-coc",
                "broker_host": "broker.riverside.example",
                "hosts": {
                  "broker":     {"programs": ["broker"]},
                  "backoffice": {"programs": ["auth"]},
                  "workers-1":  {"programs": ["filemaker", "eto", "directory"]},
                  "site-101":   {"kiosks": ["site-101-kiosk-1"]},
                  "ops":        {"programs": ["monitor", "admin"]}
                }
              }

            Programs and the role of their certificate: broker (broker), auth (auth), \
            filemaker, eto, directory (worker:<program>), monitor (monitor), admin (admin). \
            Exactly one host runs the broker. Each program on a host is the principal \
            <host>-<program> (workers-1-eto): that is its certificate's name and the producer \
            name it publishes under. A kiosk is the principal of its own id; the broker is \
            "broker". Names are 1–64 characters of A–Z a–z 0–9 . _ : - and unique.

            KEYDIR (0700):
              deployment.json       state: deployment, hosts, principals, revocations
              public/<name>.cert    every principal's public certificate
              secret/<name>.secret  every principal's secret certificate (0600)
              allowed/<name>.cert   the broker's allow-list: all but the broker
              bundles/<host>/       what goes to one host, and only that (0700):
                broker.cert         the broker's public certificate (broker_key)
                <program>.secret    the host's secrets, 0600 (kiosks: <id>.secret;
                                    a program's `certificate`)
                broker.secret       broker host only (broker.security.key), and
                allowed/            the allow-list (broker.security.certificates)

            Copy each bundle to its host (scp -rp, or keep KEYDIR on an admin machine and \
            rsync), keeping the modes. The broker rereads its allow-list directory by itself \
            within a second of a change (or on SIGHUP) and closes the connections of keys no \
            longer in it.

            Adding a kiosk or a host: edit the inventory, run `keys add`, copy the bundles it \
            names. Nothing that has a key gets a new one.

            Revocation (a lost kiosk, a retired host): `keys revoke NAME`, then copy the \
            broker's bundle to the broker host (or point the broker at KEYDIR/allowed). The \
            key is refused from the broker's next reload, open connections included. A revoked \
            name stays revoked: `keys add` skips it until asked with --reissue NAME.

            Rotation (a key that may have leaked, or a routine change): `keys rotate NAME` \
            makes a new key under the same name; the old one stays allowed (as \
            allowed/NAME.previous.cert) so the program keeps working. Copy the broker's \
            bundle first (its allow-list then holds both keys), then the host's, and restart \
            the program with its new .secret; end the overlap with `keys revoke NAME \
            --previous` (and copy the broker's bundle again). The other order locks the host \
            out: a program restarted with a key the broker does not know yet is refused. The broker's own key has no \
            overlap: `keys rotate broker` changes broker.cert in every bundle, and clients \
            reconnect once they have the new one.

            Secrets are never printed; every command prints what it made and which bundles \
            changed, and exits 1 with a message naming the problem when it cannot.
            """,
        subcommands: [Init.self, Add.self, Rotate.self, Revoke.self, Bundle.self, List.self])

    struct Directory: ParsableArguments {
        @Option(
            name: .customLong("dir"), help: ArgumentHelp("The key directory (0700; see `switchboard keys --help`).", valueName: "keydir"))
        var path: String

        var keys: DeploymentKeys { DeploymentKeys(directory: path) }
    }

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Make every certificate of an inventory, the broker's allow-list and every host's bundle.",
            discussion: """
                KEYDIR is created 0700, or must be empty and 0700. A KEYDIR that holds a \
                deployment already is refused: use `keys add` for what the inventory gained. \
                The inventory format and the layout are in `switchboard keys --help`.
                """)

        @Option(help: ArgumentHelp("The inventory file (JSON; see `switchboard keys --help`).", valueName: "file")) var inventory: String
        @OptionGroup var directory: Directory

        func run() throws {
            let inventory = try KeysCommand.run("init") { () throws(DeploymentKeys.Failure) in try DeploymentInventory.load(self.inventory)
            }
            let changes = try KeysCommand.run("init") { () throws(DeploymentKeys.Failure) in try directory.keys.initialise(inventory) }
            print(
                "Deployment '\(inventory.deployment)': \(inventory.principals.count) principals on \(inventory.hosts.count) hosts, in \(directory.path)"
            )
            KeysCommand.report(changes, keys: directory.keys)
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Make keys for what the inventory gained; rewrite the allow-list and the bundles that change.",
            discussion: """
                Principals that have a key keep it. A kiosk (or the broker) the inventory puts \
                on another host moves there: both hosts' bundles are rewritten. Principals no \
                longer in the inventory stay allowed until `keys revoke`. A revoked principal \
                is skipped unless named with --reissue, which gives it a new key. Running add \
                twice with the same inventory changes nothing.
                """)

        @Option(help: ArgumentHelp("The edited inventory file (JSON).", valueName: "file")) var inventory: String
        @OptionGroup var directory: Directory
        @Option(
            help: ArgumentHelp("Give a revoked principal of the inventory a new key (repeatable).", valueName: "name"))
        var reissue: [String] = []

        func run() throws {
            let inventory = try KeysCommand.run("add") { () throws(DeploymentKeys.Failure) in try DeploymentInventory.load(self.inventory) }
            let changes = try KeysCommand.run("add") { () throws(DeploymentKeys.Failure) in
                try directory.keys.add(inventory, reissue: Set(reissue))
            }
            if changes.made.isEmpty && changes.moved.isEmpty && changes.bundles.isEmpty && !changes.allowList {
                print("Nothing to make: every principal of the inventory has a key.")
            }
            KeysCommand.report(changes, keys: directory.keys)
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Give a principal a new key; its old key stays allowed until `keys revoke NAME --previous`.",
            discussion: """
                The new key has the same name and role. Its host's bundle gets the new \
                .secret; the allow-list holds both keys (NAME.cert and NAME.previous.cert) \
                until the overlap is ended. Steps, in this order: rotate; copy the broker's \
                bundle (it reloads by itself); copy the host's; restart the program with the \
                new .secret; `keys revoke NAME --previous` and copy the broker's bundle again. A second rotation before that is refused. `keys rotate broker` \
                has no overlap (a broker has one key): every bundle's broker.cert changes.
                """)

        @Argument(help: "The principal: <host>-<program>, a kiosk id, or broker.") var name: String
        @OptionGroup var directory: Directory

        func run() throws {
            let changes = try KeysCommand.run("rotate") { () throws(DeploymentKeys.Failure) in try directory.keys.rotate(name) }
            KeysCommand.report(changes, keys: directory.keys)
            if name != "broker" {
                print("The old key of '\(name)' stays allowed until `switchboard keys revoke \(name) --previous --dir \(directory.path)`.")
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "Take a principal's key out of the allow-list and its secret out of its host's bundle.",
            discussion: """
                Removes allowed/NAME.cert (KEYDIR's and the broker bundle's), \
                secret/NAME.secret, public/NAME.cert and NAME.secret (or <program>.secret) \
                from its host's bundle, and records the revocation with the time in \
                deployment.json. The broker refuses the key from its next reload of the \
                allow-list (within a second when it watches that directory), and closes its \
                open connections. `keys add` does not bring a revoked name back unless given \
                --reissue NAME. With --previous, only the old key of a rotation is taken out. \
                The broker's key cannot be revoked: rotate it.
                """)

        @Argument(help: "The principal: <host>-<program> or a kiosk id.") var name: String
        @OptionGroup var directory: Directory
        @Flag(help: "Only end a rotation: take out the previous key, keep the new one.") var previous = false

        func run() throws {
            let changes = try KeysCommand.run("revoke") { () throws(DeploymentKeys.Failure) in
                try directory.keys.revoke(name, previousOnly: previous)
            }
            KeysCommand.report(changes, keys: directory.keys)
        }
    }

    struct Bundle: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bundle",
            abstract: "Write one host's bundle again from KEYDIR.",
            discussion: """
                Makes KEYDIR/bundles/HOST hold exactly broker.cert and that host's secrets \
                (0600, in a 0700 directory), plus broker.secret and allowed/ on the broker's \
                host; anything else ending in .secret or .cert is removed. Files already right \
                are left alone.
                """)

        @Argument(help: "A host of the inventory.") var host: String
        @OptionGroup var directory: Directory

        func run() throws {
            let changes = try KeysCommand.run("bundle") { () throws(DeploymentKeys.Failure) in try directory.keys.bundle(host) }
            KeysCommand.report(changes, keys: directory.keys)
            if changes.bundles.isEmpty { print("bundle \(host): \(directory.keys.bundleDirectory(host)) (unchanged)") }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the principals, their hosts and roles, and the revocations (no key material).")

        @OptionGroup var directory: Directory

        func run() throws {
            let state = try KeysCommand.run("list") { () throws(DeploymentKeys.Failure) in try directory.keys.state() }
            print("Deployment '\(state.deployment)', broker at \(state.brokerHost) (host \(state.brokerHostName ?? "-"))")
            let rows = state.principals.map { principal in
                [
                    principal.name, principal.role, principal.host, "\(principal.file).secret", principal.created,
                    principal.previousKey == nil ? "" : "rotating: previous key still allowed",
                ]
            }
            print(TextTable.render(["NAME", "ROLE", "HOST", "BUNDLE FILE", "CREATED", ""], rows), terminator: "")
            if !state.revoked.isEmpty {
                print("Revoked:")
                let rows = state.revoked.map { [$0.name, $0.role, $0.host, $0.reason, $0.time] }
                print(TextTable.render(["NAME", "ROLE", "HOST", "HOW", "AT"], rows), terminator: "")
            }
        }
    }

    /// Runs `body`; a failure is printed on standard error as `switchboard keys <command>: …`
    /// and exits 1.
    static func run<T>(_ command: String, _ body: () throws(DeploymentKeys.Failure) -> T) throws -> T {
        do {
            return try body()
        } catch {
            FileHandle.standardError.write(Data("switchboard keys \(command): \(error.message)\n".utf8))
            throw ExitCode(1)
        }
    }

    static func report(_ changes: DeploymentKeys.Changes, keys: DeploymentKeys) {
        for principal in changes.made {
            print("made \(principal.name) (\(principal.role)) for host \(principal.host): \(principal.file).secret in its bundle")
        }
        for name in changes.revoked {
            print("revoked \(name): out of the allow-list and its host's bundle")
        }
        for note in changes.notes { print(note) }
        if changes.allowList { print("allow-list changed: \(keys.allowedDirectory)") }
        for host in changes.bundles {
            print("bundle \(host) changed: \(keys.bundleDirectory(host)) (copy it to the host)")
        }
    }
}
