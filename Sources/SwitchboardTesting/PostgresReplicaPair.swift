// A PostgreSQL primary with a synchronous streaming replica, for the tests of PostgreSQL's own
// failover (issue 29.4), from Debian's packages as `PostgresServer` is:
//
// - the primary: `initdb`, started on a free loopback port with `synchronous_standby_names`
//   naming the replica and `synchronous_commit = on`, so a COMMIT is answered only once the
//   replica has flushed it;
// - the replica: `pg_basebackup -R -X stream` from the primary (over the primary's socket, where
//   the superuser is trusted: no password on any command line), started on its own port with
//   `cluster_name` = the name the primary waits for (the WAL receiver's `application_name`);
// - `killPrimary()`: `kill -9` of the primary's postmaster (its backends notice and exit, as
//   they do when a host dies), `promote()`: `pg_ctl promote` of the replica.
//
// Every step is bounded in time (`pg_ctl -t`, coreutils' `timeout` around `pg_basebackup`, polls
// with a deadline), and both servers are stopped and their directory removed when the test
// process exits. As root, the servers run as the `postgres` user.

import Foundation

/// A primary and its synchronous streaming replica, started together.
public final class PostgresReplicaPair: Sendable {
    /// The replica's name: its `cluster_name`, and the primary's `synchronous_standby_names`.
    public static let replicaName = "replica1"

    /// Both listen on 127.0.0.1 (TCP, password authentication).
    public let host = "127.0.0.1"
    public let primaryPort: Int
    public let replicaPort: Int
    /// The superuser (the same on both: the replica is a copy), its password in `passwordFile`
    /// (0600, for the client).
    public let user = "postgres"
    public let passwordFile: String
    /// Holds both servers' directories (`primary/`, `replica/`), sockets and logs.
    public let directory: String
    let binaries: String
    let asRoot: Bool

    /// Why no pair can be started here, or nil when one can (as `PostgresServer.unavailable`).
    public static var unavailable: String? { PostgresServer.unavailable }

    /// `journal.postgres.host` for a broker on the pair: the primary first, then the replica.
    public var hostList: String { "\(host):\(primaryPort),\(host):\(replicaPort)" }

    private var primaryData: String { directory + "/primary/data" }
    private var replicaData: String { directory + "/replica/data" }

    private init(primaryPort: Int, replicaPort: Int, passwordFile: String, directory: String, binaries: String, asRoot: Bool) {
        self.primaryPort = primaryPort
        self.replicaPort = replicaPort
        self.passwordFile = passwordFile
        self.directory = directory
        self.binaries = binaries
        self.asRoot = asRoot
    }

    /// Starts a primary and its synchronous replica, and waits until the primary reports the
    /// replica streaming as `sync`; nil when `unavailable` says why not.
    /// - Throws: when the binaries are there but a step fails or does not end in its time.
    public static func start() async throws -> PostgresReplicaPair? {
        try await offThePool {
            // Three tries, each on new ports and in a new directory: a port found free can be
            // taken by another test's server before this one binds it.
            var lastError: (any Error)?
            for _ in 0..<3 {
                do { return try startNow() } catch { lastError = error }
            }
            throw lastError ?? PostgresServer.ServerFailure("the pair did not start")
        }
    }

    private static func startNow() throws -> PostgresReplicaPair? {
        guard unavailable == nil, let binaries = PostgresServer.binaryDirectory else { return nil }
        var template = Array("/tmp/switchboard-pgpair-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw PostgresServer.ServerFailure("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        let directory = String(cString: made)
        let asRoot = getuid() == 0
        let password = (0..<24).map { _ in String(Int.random(in: 0..<16), radix: 16) }.joined()
        let serverPassword = directory + "/server-password"
        let passwordFile = directory + "/password"
        for path in [serverPassword, passwordFile] {
            guard FileManager.default.createFile(atPath: path, contents: Data(password.utf8), attributes: [.posixPermissions: 0o600])
            else { throw PostgresServer.ServerFailure("cannot write \(path)") }
        }
        for path in [directory + "/primary", directory + "/replica"] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        }
        if asRoot {
            guard let account = getpwnam("postgres") else {
                throw PostgresServer.ServerFailure("running as root, and there is no postgres user to run the servers as")
            }
            for path in [directory, serverPassword, directory + "/primary", directory + "/replica"] {
                guard chown(path, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                    throw PostgresServer.ServerFailure("chown \(path): \(String(cString: strerror(errno)))")
                }
            }
        }
        for path in [directory, directory + "/primary", directory + "/replica"] { chmod(path, 0o711) }
        let port = try freePort(count: 2)
        let pair = PostgresReplicaPair(
            primaryPort: port, replicaPort: port + 1, passwordFile: passwordFile, directory: directory, binaries: binaries,
            asRoot: asRoot)
        running.withLock {
            if $0.isEmpty { atexit { PostgresReplicaPair.stopAtExit() } }
            $0.append(pair)
        }
        do {
            try pair.setUp(serverPassword: serverPassword)
        } catch {
            pair.stopNow()
            throw error
        }
        return pair
    }

    /// initdb, the primary, the base backup, the replica, and the wait for `sync`.
    private func setUp(serverPassword: String) throws {
        let replicaName = Self.replicaName
        try run([
            "\(binaries)/initdb", "-D", primaryData, "-U", "postgres", "--pwfile=\(serverPassword)", "--auth-local=trust",
            "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
        ])
        try run([
            "\(binaries)/pg_ctl", "-D", primaryData, "-l", directory + "/primary/server.log", "-w", "-t", "60", "-o",
            "-c listen_addresses=127.0.0.1 -p \(primaryPort) -c unix_socket_directories=\(directory)/primary"
                + " -c max_connections=200 -c wal_level=replica -c max_wal_senders=5"
                + " -c synchronous_standby_names=\(replicaName) -c synchronous_commit=on",
            "start",
        ])
        // A copy of the primary, streaming WAL from it, with a standby.signal and the
        // primary_conninfo to follow it (-R). Over the socket: trusted, no password.
        try run([
            "/usr/bin/timeout", "-k", "5", "120", "\(binaries)/pg_basebackup", "-h", "\(directory)/primary", "-p",
            "\(primaryPort)", "-U", "postgres", "-D", replicaData, "-R", "-X", "stream", "-c", "fast", "--no-sync",
        ])
        try run([
            "\(binaries)/pg_ctl", "-D", replicaData, "-l", directory + "/replica/server.log", "-w", "-t", "60", "-o",
            "-c listen_addresses=127.0.0.1 -p \(replicaPort) -c unix_socket_directories=\(directory)/replica"
                + " -c max_connections=200 -c hot_standby=on -c cluster_name=\(replicaName)",
            "start",
        ])
        try poll("the replica streams to the primary as its synchronous standby", timeout: .seconds(60)) {
            let state = try? sqlNow(
                primary: true, "SELECT sync_state FROM pg_stat_replication WHERE application_name = '\(replicaName)'")
            return state == "sync"
        }
    }

    /// Makes a new, empty database on the primary (replicated to the replica) and returns its name.
    public func makeDatabase() async throws -> String {
        try await offThePool { try self.makeDatabaseNow() }
    }

    private func makeDatabaseNow() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try PostgresServer.run(
            asServer: false, ["\(binaries)/createdb", "-h", "\(directory)/primary", "-p", "\(primaryPort)", "-U", user, name])
        return name
    }

    /// `kill -9` of the primary's postmaster: no shutdown, no last WAL sent. Its backends and
    /// WAL sender notice the postmaster's death and exit; this waits (at most `timeout`) until
    /// the postmaster and every process it had started are gone, and kills by its id any that is
    /// still there then. Afterwards nothing listens on `primaryPort`.
    public func killPrimary(timeout: Duration = .seconds(20)) async throws {
        try await offThePool { try self.killPrimaryNow(timeout: timeout) }
    }

    private func killPrimaryNow(timeout: Duration) throws {
        guard let pid = postmasterPID(primaryData) else { throw PostgresServer.ServerFailure("the primary is not running") }
        let children = Self.children(of: pid)
        guard kill(pid, SIGKILL) == 0 else { throw PostgresServer.ServerFailure("kill -9 \(pid): \(String(cString: strerror(errno)))") }
        do {
            try poll("the primary's postmaster and its backends exit", timeout: timeout) {
                ([pid] + children).allSatisfy { !Self.isAlive($0) }
            }
        } catch {
            for child in children where Self.isAlive(child) { kill(child, SIGKILL) }
            try poll("the primary's backends exit after kill -9", timeout: .seconds(10)) { children.allSatisfy { !Self.isAlive($0) } }
        }
    }

    /// Promotes the replica (`pg_ctl promote`, which waits until it takes writes), at most 60 s.
    public func promote() async throws {
        let arguments = ["\(binaries)/pg_ctl", "-D", replicaData, "-w", "-t", "60", "promote"]
        try await offThePool { try self.run(arguments) }
    }

    /// Whether the replica is still in recovery (a standby), asked over its socket.
    public func replicaInRecovery() async throws -> Bool {
        try await sql(primary: false, "SELECT pg_is_in_recovery()") == "t"
    }

    /// One SQL statement over a server's socket as the superuser, trusted there; its output
    /// unaligned and trimmed. For the tests' checks of the servers' own state, not the journal.
    public func sql(primary: Bool, database: String = "postgres", _ statement: String) async throws -> String {
        try await offThePool { try self.sqlNow(primary: primary, database: database, statement) }
    }

    private func sqlNow(primary: Bool, database: String = "postgres", _ statement: String) throws -> String {
        let socket = "\(directory)/\(primary ? "primary" : "replica")"
        return try PostgresServer.run(
            asServer: false,
            [
                "/usr/bin/timeout", "-k", "5", "30", "\(binaries)/psql", "-h", socket, "-p", "\(primary ? primaryPort : replicaPort)",
                "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1", "-X", "-q", "-t", "-A", "-c", statement,
            ]
        ).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops both servers (`-m immediate`: nothing in them matters any more) and removes their
    /// directory; a server already gone is skipped. (A pair not stopped is stopped at exit.)
    public func stop() async {
        _ = try? await offThePool { self.stopNow() }
    }

    private func stopNow() {
        for data in [replicaData, primaryData] where postmasterPID(data) != nil {
            try? run(["\(binaries)/pg_ctl", "-D", data, "-m", "immediate", "-w", "-t", "30", "stop"])
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: - Processes

    private static let running = Locked<[PostgresReplicaPair]>([])

    private static func stopAtExit() {
        for pair in running.withLock({ $0 }) { pair.stopNow() }
    }

    private func run(_ arguments: [String]) throws {
        try PostgresServer.run(asServer: asRoot, arguments)
    }

    /// The running postmaster of `data`, from the first line of its `postmaster.pid`.
    private func postmasterPID(_ data: String) -> pid_t? {
        guard let text = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8),
            let line = text.split(separator: "\n").first, let pid = pid_t(line), Self.isAlive(pid)
        else { return nil }
        return pid
    }

    /// Whether `pid` runs (a zombie does not count: it has exited and waits to be reaped).
    private static func isAlive(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first != "Z"
    }

    /// The processes whose parent is `pid` now (a postmaster's backends and helpers).
    private static func children(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry in
            guard let child = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // After "comm)": state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == pid ? child : nil
        }
    }

    /// Checks `condition` every 50 ms until it holds; throws after `timeout`.
    private func poll(_ what: String, timeout: Duration, _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw PostgresServer.ServerFailure("timed out after \(timeout): \(what)") }
            usleep(50_000)
        }
    }
}
