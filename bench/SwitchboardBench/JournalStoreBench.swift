// What keeping the journal in PostgreSQL costs durable ingest (issue 29): the same load, 4
// producers with a window of 1000 each, against the real `switchboard-broker` on SQLite and on
// PostgreSQL (a server of Debian's package on loopback, started by this run, `PostgresServer`),
// alternating, three rounds each, in the same run.
//
//   SWITCHBOARD_BENCH=1 swift run -c release switchboard-bench --journal [--quick]
//
// With `--link-host`, a third column: the same load against a PostgreSQL server on another host
// (across a network link, with TLS verify-full as a deployment has it), one database per round,
// made beforehand. bench/journal-link.py sets that up in network namespaces and runs this:
//
//   switchboard-bench --journal --link-host NAME --link-user ROLE --link-password-file FILE
//       --link-ca-file PEM --link-databases DB1,DB2,DB3

import Foundation
import SwitchboardProtocol
import SwitchboardTesting

/// A PostgreSQL server across a link, from the command line.
struct LinkedServer {
    var host: String
    var user: String
    var passwordFile: String
    var caFile: String
    var databases: [String]

    /// nil without `--link-host`; a failure names the flag that is missing.
    static func parse(_ arguments: [String]) throws -> LinkedServer? {
        func value(_ flag: String) -> String? {
            guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
            return arguments[index + 1]
        }
        guard let host = value("--link-host") else { return nil }
        func required(_ flag: String) throws -> String {
            guard let found = value(flag), !found.isEmpty else { throw BenchFailure(description: "--link-host needs \(flag)") }
            return found
        }
        let databases = try required("--link-databases").split(separator: ",").map(String.init)
        guard databases.count >= 3 else { throw BenchFailure(description: "--link-databases needs one database per round (3)") }
        return LinkedServer(
            host: host, user: try required("--link-user"), passwordFile: try required("--link-password-file"),
            caFile: try required("--link-ca-file"), databases: databases)
    }

    func brokerArguments(round: Int) -> [String] {
        [
            "--insecure", "--journal-store", "postgres", "--journal-postgres-host", host, "--journal-postgres-user", user,
            "--journal-postgres-database", databases[round], "--journal-postgres-password-file", passwordFile,
            "--journal-postgres-tls", "verify-full", "--journal-postgres-ca-file", caFile,
        ]
    }
}

func journalStoreBench(quick: Bool) async throws {
    let scale = quick ? 10 : 1
    let link = try LinkedServer.parse(CommandLine.arguments)
    print(
        "Switchboard journal-store benchmark (PostgreSQL vs SQLite), \(Timestamp.now()), \(ProcessInfo.processInfo.activeProcessorCount) cores\(quick ? " (quick)" : "")\n"
    )
    guard let server = try await PostgresServer.shared() else {
        print("journal bench: \(PostgresServer.unavailable ?? "no PostgreSQL server")")
        return
    }
    let directory = try TemporaryDirectory("journal-bench")
    defer { directory.remove() }
    var sqlite: [Measured] = []
    var postgres: [Measured] = []
    var linked: [Measured] = []
    func run(_ name: String, _ arguments: [String]) async throws -> Measured {
        let broker = try await BrokerProcess.start(directory: directory.path(name), security: arguments)
        let measured: Measured
        do {
            measured = try await ingest(broker: broker.endpoints, producers: 4, perProducer: 25_000 / scale, window: 1000, prefix: name)
        } catch {
            await broker.stop()
            throw error
        }
        await broker.stop()
        return measured
    }
    for round in 0..<3 {
        sqlite.append(try await run("sqlite-\(round)", ["--insecure"]))
        let database = try await server.makeDatabase()
        postgres.append(
            try await run(
                "postgres-\(round)",
                [
                    "--insecure", "--journal-store", "postgres", "--journal-postgres-host", server.host, "--journal-postgres-port",
                    "\(server.port)", "--journal-postgres-user", server.user, "--journal-postgres-database", database,
                    "--journal-postgres-password-file", server.passwordFile, "--journal-postgres-tls", "disable",
                ]))
        if let link { linked.append(try await run("link-\(round)", link.brokerArguments(round: round))) }
    }
    func rates(_ runs: [Measured]) -> String { runs.map { String(format: "%.0f", $0.perSecond) }.joined(separator: ", ") }
    func best(_ runs: [Measured]) -> Double { runs.map(\.perSecond).max() ?? 0 }
    func line(_ label: String, _ runs: [Measured]) {
        print(label.padding(toLength: 58, withPad: " ", startingAt: 0) + String(format: " %10.0f/s  runs: ", best(runs)) + rates(runs))
    }
    print("durable-acked ingest, 4 producers, window 1000 each, \(100_000 / scale) events per run")
    line("SQLite (journal.sqlite, synchronous=FULL)", sqlite)
    line("PostgreSQL on loopback (synchronous_commit=on)", postgres)
    if let link { line("PostgreSQL at \(link.host) (TLS verify-full)", linked) }
    print(String(format: "best PostgreSQL on loopback / best SQLite: %.2f×", best(postgres) / best(sqlite)))
    if link != nil { print(String(format: "best PostgreSQL across the link / best SQLite: %.2f×", best(linked) / best(sqlite))) }
}
