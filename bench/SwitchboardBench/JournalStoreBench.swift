// What keeping the journal in PostgreSQL costs durable ingest (issue 29): the same load, 4
// producers with a window of 1000 each, against the real `switchboard-broker` on SQLite and on
// PostgreSQL (a server of Debian's package on loopback, started by this run, `PostgresServer`),
// alternating, three rounds each, in the same run.
//
//   SWITCHBOARD_BENCH=1 swift run -c release switchboard-bench --journal [--quick]

import Foundation
import SwitchboardProtocol
import SwitchboardTesting

func journalStoreBench(quick: Bool) async throws {
    let scale = quick ? 10 : 1
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
    for round in 0..<3 {
        let plain = try await BrokerProcess.start(directory: directory.path("sqlite-\(round)"))
        sqlite.append(try await ingest(broker: plain.endpoints, producers: 4, perProducer: 25_000 / scale, window: 1000, prefix: "s"))
        await plain.stop()
        let database = try await server.makeDatabase()
        let remote = try await BrokerProcess.start(
            directory: directory.path("postgres-\(round)"),
            security: [
                "--insecure", "--journal-store", "postgres", "--journal-postgres-host", server.host, "--journal-postgres-port",
                "\(server.port)", "--journal-postgres-user", server.user, "--journal-postgres-database", database,
                "--journal-postgres-password-file", server.passwordFile, "--journal-postgres-tls", "disable",
            ])
        postgres.append(try await ingest(broker: remote.endpoints, producers: 4, perProducer: 25_000 / scale, window: 1000, prefix: "p"))
        await remote.stop()
    }
    func rates(_ runs: [Measured]) -> String { runs.map { String(format: "%.0f", $0.perSecond) }.joined(separator: ", ") }
    let best = (sqlite: sqlite.max { $0.perSecond < $1.perSecond }!, postgres: postgres.max { $0.perSecond < $1.perSecond }!)
    print("durable-acked ingest, 4 producers, window 1000 each, 100,000 events per run\(quick ? " (/10)" : "")")
    print(
        String(
            format: "%-44@ %10.0f/s  runs: %@", "SQLite (journal.sqlite, synchronous=FULL)" as NSString, best.sqlite.perSecond,
            rates(sqlite)))
    print(
        String(
            format: "%-44@ %10.0f/s  runs: %@", "PostgreSQL on loopback (synchronous_commit=on)" as NSString, best.postgres.perSecond,
            rates(postgres)))
    print(String(format: "best PostgreSQL / best SQLite: %.2f×", best.postgres.perSecond / best.sqlite.perSecond))
}
