import Foundation

extension PostgresServer {
    /// Runs `sql` in `database` over the server's socket, where the superuser is trusted, and
    /// returns psql's unaligned output without headers (one row per line, `|` between columns).
    public func query(database: String, _ sql: String) throws -> String {
        try Self.run(
            asServer: false,
            [
                "\(binaries)/psql", "-h", directory, "-p", "\(port)", "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1", "-At", "-c",
                sql,
            ])
    }
}
