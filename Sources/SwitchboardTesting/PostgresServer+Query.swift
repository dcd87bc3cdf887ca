import Foundation

extension PostgresServer {
    /// Runs `sql` in `database` over the server's socket, where the superuser is trusted, and
    /// returns psql's unaligned output without headers (one row per line, `|` between columns).
    /// Each call is bounded: psql is ended after 20 s (`timeout`), so a test polling with it
    /// cannot wait forever on a server that stopped answering.
    public func query(database: String, _ sql: String) async throws -> String {
        try await offThePool { try self.queryNow(database: database, sql) }
    }

    private func queryNow(database: String, _ sql: String) throws -> String {
        try Self.run(
            asServer: false,
            [
                "/usr/bin/timeout", "20", "\(binaries)/psql", "-h", directory, "-p", "\(port)", "-U", user, "-d", database, "-v",
                "ON_ERROR_STOP=1", "-At", "-c", sql,
            ])
    }
}
