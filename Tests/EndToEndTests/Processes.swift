import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

/// Runs our executables as real processes, from the build directory the tests were built into.
struct Programs {
    let directory: TemporaryDirectory

    static var binaries: URL {
        // The test bundle sits beside the executables in .build/<config>/.
        ChildProcess.executableDirectory
    }

    /// - Parameter environment: variables added to this process's environment. Unless it names
    ///   one, every program serves its admin endpoint on a port of its own (`SWITCHBOARD_ADMIN`
    ///   `127.0.0.1:0`), so tests running side by side never compete for the default ports.
    /// - Parameter executable: a program other than ours (chromedriver), by path.
    /// - Parameter descriptorLimit: run it under `ulimit -n` of this (soft and hard), as an
    ///   operator's shell or unit would.
    func start(
        _ name: String, _ arguments: [String], log: String, environment: [String: String] = [:], executable: String? = nil,
        descriptorLimit: Int? = nil
    ) throws -> ChildProcess {
        var executable = executable ?? Self.binaries.appendingPathComponent(name).path
        var arguments = arguments
        if let descriptorLimit {
            // exec: the shell becomes the program, so the pid a test holds is the program's.
            arguments = ["-c", "ulimit -n \(descriptorLimit) && exec \"$0\" \"$@\"", executable] + arguments
            executable = "/bin/sh"
        }
        let environment = ["SWITCHBOARD_ADMIN": "127.0.0.1:0"].merging(environment) { $1 }
        let path = directory.path(log)
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        let child = ChildProcess(
            name: name, executable: executable, arguments: arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            directory: directory.url, output: handle, errors: handle)
        try child.start()
        // The programs a test starts run at a lower priority than the test process: every suite
        // runs at once, and a handful of busy programs (a broker, workers, a browser) would
        // otherwise take the cores from the tests that count heartbeats in this process. The
        // programs' own children inherit it.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(child.processIdentifier), 10)
        return child
    }

    func read(_ log: String) -> String {
        (try? String(contentsOfFile: directory.path(log), encoding: .utf8)) ?? ""
    }

    /// Starts a broker process and waits until it has bound its endpoints.
    func broker(
        dataDirectory: String = "broker", ingest: String = "tcp://127.0.0.1:*", fanout: String = "tcp://127.0.0.1:*",
        replay: String = "tcp://127.0.0.1:*", service: String = "tcp://127.0.0.1:*", groups: String = "tcp://127.0.0.1:*",
        extra: [String] = [], log: String = "broker.log", descriptorLimit: Int? = nil
    ) async throws -> (ChildProcess, Endpoints) {
        let endpointsFile = directory.path("\(dataDirectory)/endpoints.json")
        try? FileManager.default.removeItem(atPath: endpointsFile)
        let process = try start(
            "switchboard-broker",
            [
                "--data-dir", directory.path(dataDirectory), "--ingest", ingest, "--fanout", fanout, "--replay", replay, "--service",
                service,
                "--groups", groups, "--heartbeat", "200ms", "--insecure",
            ] + extra,
            log: log, descriptorLimit: descriptorLimit)
        try await waitUntil("the broker writes \(endpointsFile)", timeout: .seconds(30)) {
            guard process.isRunning else { throw WaitTimedOut(description: "the broker exited: \(read(log))") }
            return FileManager.default.fileExists(atPath: endpointsFile)
        }
        let data = try Data(contentsOf: URL(fileURLWithPath: endpointsFile))
        return (process, try JSONDecoder().decode(Endpoints.self, from: data))
    }

    /// A broker on fixed ports below the ephemeral range, for tests that restart it on the same
    /// endpoints: a port the kernel picked for `*` can be taken by another test's outgoing
    /// connection by the time the broker comes back ("Address already in use", seen when every
    /// suite runs at once).
    func brokerOnFixedPorts(
        dataDirectory: String = "broker", extra: [String] = [], log: String = "broker.log"
    ) async throws
        -> (ChildProcess, Endpoints)
    {
        let port = try freePort(count: 5)
        return try await broker(
            dataDirectory: dataDirectory, ingest: "tcp://127.0.0.1:\(port)", fanout: "tcp://127.0.0.1:\(port + 1)",
            replay: "tcp://127.0.0.1:\(port + 2)", service: "tcp://127.0.0.1:\(port + 3)", groups: "tcp://127.0.0.1:\(port + 4)",
            extra: extra, log: log)
    }

    struct Endpoints: Decodable {
        var ingest: String
        var fanout: String
        var replay: String
        var service: String
        var groups: String
    }

    func journalCount(_ dataDirectory: String = "broker") -> Int {
        JournalFile.count(at: directory.path("\(dataDirectory)/journal.sqlite"), table: "events")
    }

    /// A CSV of `rows` valid check-ins.
    func writeCSV(_ name: String, rows: Int) throws -> String {
        var text = "first_name,last_name,date_of_birth,site_id,program_id,notes\n"
        let firsts = ["Ana", "Marcus", "Li", "Fatima", "Joe", "Priya"]
        for i in 0..<rows {
            text +=
                "\(firsts[i % firsts.count]),Person\(i),19\(50 + i % 50)-0\(1 + i % 9)-1\(i % 10),\(12 + i % 3),\(3 + i % 2),\"row \(i), from the day sheet\"\n"
        }
        let path = directory.path(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
