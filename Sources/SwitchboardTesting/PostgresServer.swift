// A real PostgreSQL server for the tests, from Debian's `postgresql` package: `initdb` into a
// temporary directory, started on a free loopback port with its socket in that directory, and
// stopped (`pg_ctl stop -m fast`) when the test process exits. One server per test process,
// started the first time a test asks for it; each test takes a database of its own.
//
// PostgreSQL refuses to run as root, and the tests do run as root here: the server then runs as
// the `postgres` user (`runuser`), and its directory belongs to that user.

import CSpawn
import Foundation

/// The test process's PostgreSQL server.
public final class PostgresServer: Sendable {
    /// The server listens here (TCP, password authentication).
    public let host = "127.0.0.1"
    public let port: Int
    /// The superuser, whose password is in `passwordFile` (0600, for the client).
    public let user = "postgres"
    public let passwordFile: String
    /// The server's own directory: data, socket, log.
    public let directory: String
    let binaries: String
    let asRoot: Bool

    /// Why no server can be started here (no PostgreSQL binaries), or nil when one can.
    public static var unavailable: String? {
        binaryDirectory == nil
            ? "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb: apt-get install postgresql)" : nil
    }

    /// The shared server, started on first use; nil when `unavailable` says why not.
    /// - Throws: when the binaries are there but the server would not start (that is a failure,
    ///   not a reason to skip).
    public static func shared() async throws -> PostgresServer? {
        guard unavailable == nil else { return nil }
        return try await offThePool { try started.get() }
    }

    private static let started: Result<PostgresServer, any Error> = Result { try PostgresServer.start() }

    /// A server of the caller's own, for a test that stops and starts it (`stop()`, `restart()`);
    /// nil when `unavailable` says why not. It is stopped at exit too, if still running.
    public static func own() async throws -> PostgresServer? {
        guard unavailable == nil else { return nil }
        return try await offThePool { try start() }
    }

    static var binaryDirectory: String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() where FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        return nil
    }

    private init(port: Int, passwordFile: String, directory: String, binaries: String, asRoot: Bool) {
        self.port = port
        self.passwordFile = passwordFile
        self.directory = directory
        self.binaries = binaries
        self.asRoot = asRoot
    }

    private static func start() throws -> PostgresServer {
        guard let binaries = binaryDirectory else { throw ServerFailure("no PostgreSQL binaries") }
        var template = Array("/tmp/switchboard-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ServerFailure("mkdtemp failed: \(String(cString: strerror(errno)))") }
        let directory = String(cString: made)
        let password = (0..<24).map { _ in String(Int.random(in: 0..<16), radix: 16) }.joined()
        // The server's copy (read by initdb as its user) and the client's (read by the tests).
        let serverPassword = directory + "/server-password"
        let passwordFile = directory + "/password"
        for path in [serverPassword, passwordFile] {
            guard FileManager.default.createFile(atPath: path, contents: Data(password.utf8), attributes: [.posixPermissions: 0o600])
            else { throw ServerFailure("cannot write \(path)") }
        }
        let asRoot = getuid() == 0
        if asRoot {
            guard let account = getpwnam("postgres") else {
                throw ServerFailure("running as root, and there is no postgres user to run the server as")
            }
            for path in [directory, serverPassword] {
                guard chown(path, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
                    throw ServerFailure("chown \(path): \(String(cString: strerror(errno)))")
                }
            }
        }
        chmod(directory, 0o711)
        let data = directory + "/data"
        try run(
            asServer: asRoot,
            [
                "\(binaries)/initdb", "-D", data, "-U", "postgres", "--pwfile=\(serverPassword)", "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
            ])
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = try freePort()
            do {
                try run(
                    asServer: asRoot,
                    [
                        "\(binaries)/pg_ctl", "-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "-o",
                        "-c listen_addresses=127.0.0.1 -p \(port) -c unix_socket_directories=\(directory) -c max_connections=200",
                        "start",
                    ])
            } catch {
                lastError = error
                continue
            }
            let server = PostgresServer(port: port, passwordFile: passwordFile, directory: directory, binaries: binaries, asRoot: asRoot)
            running.withLock {
                if $0.isEmpty { atexit { PostgresServer.stopAtExit() } }
                $0.append(server)
            }
            return server
        }
        throw lastError ?? ServerFailure("the server did not start")
    }

    /// What `atexit` stops: the servers started by this process.
    private static let running = Locked<[PostgresServer]>([])

    private static func stopAtExit() {
        for server in running.withLock({ $0 }) {
            try? server.stop()
            try? FileManager.default.removeItem(atPath: server.directory)
        }
    }

    private var data: String { directory + "/data" }

    private var startArguments: [String] {
        [
            "\(binaries)/pg_ctl", "-D", data, "-l", directory + "/server.log", "-w", "-t", "60", "-o",
            "-c listen_addresses=127.0.0.1 -p \(port) -c unix_socket_directories=\(directory) -c max_connections=200", "start",
        ]
    }

    /// Stops the server (`pg_ctl stop -m fast`: sessions are ended, as a crash of the server
    /// host looks to clients); stopping a stopped server does nothing.
    public func stop() throws {
        let status = try? Self.run(asServer: asRoot, ["\(binaries)/pg_ctl", "-D", data, "status"])
        guard status != nil else { return }
        try Self.run(asServer: asRoot, ["\(binaries)/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"])
    }

    /// Starts the stopped server again, on the same port.
    public func restart() throws {
        try Self.run(asServer: asRoot, startArguments)
    }

    /// Makes a new, empty database and returns its name.
    public func makeDatabase() async throws -> String {
        try await offThePool { try self.makeDatabaseNow() }
    }

    private func makeDatabaseNow() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        // Over the socket, where the superuser is trusted.
        try Self.run(asServer: false, ["\(binaries)/createdb", "-h", directory, "-p", "\(port)", "-U", user, name])
        return name
    }

    /// Ends every session connected to `database` (a lost connection, as the client sees it).
    public func terminateConnections(database: String) async throws {
        try await offThePool { try self.terminateConnectionsNow(database: database) }
    }

    private func terminateConnectionsNow(database: String) throws {
        try Self.run(
            asServer: false,
            [
                "\(binaries)/psql", "-h", directory, "-p", "\(port)", "-U", user, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c",
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid()",
            ])
    }

    /// Runs `arguments`, as the `postgres` user when `asServer`; throws with its output when it fails.
    ///
    /// posix_spawn and waitpid, not Foundation's `Process`: `pg_ctl start` leaves a daemon
    /// behind, and `Process.waitUntilExit()` waited for that daemon too (it never returned). The
    /// child gets no descriptor of ours but its output file.
    @discardableResult
    static func run(asServer: Bool, _ arguments: [String]) throws -> String {
        let argv = asServer ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + arguments : arguments
        let outputPath = NSTemporaryDirectory() + "/switchboard-pg-output-\(UUID().uuidString)"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        _ = switchboard_spawn_add_closefrom(&actions, 3)
        _ = switchboard_spawn_add_chdir(&actions, "/tmp")
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
        guard spawned == 0 else { throw ServerFailure("cannot run \(argv[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw ServerFailure("waitpid: \(String(cString: strerror(errno)))") }
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // Exited normally (low 7 bits 0) with status 0.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw ServerFailure("\((arguments[0] as NSString).lastPathComponent) failed (wait status \(status)): \(text)")
        }
        return text
    }

    /// Why the test server could not be set up.
    struct ServerFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// A value behind a lock, for the server's process-wide state.
final class Locked<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only read or written with `lock` held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Runs `body` (processes and their waits, a server's start) on a thread of its own: a test's
/// awaits must not hold one of the cooperative pool's threads (two here) for the seconds
/// `initdb`, `createdb`, `pg_ctl` and `psql` take, or other suites' timers and sockets starve.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
