import Foundation
import Logging
import SwitchboardBroker
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

/// The journal holds personal data: its directory is 0700 and its files 0600, and a broker
/// refuses to start on wider ones (protocol/README.md, section 13.6). The test process runs
/// with the usual umask (022), under which the defaults would be 0755 and 0644.
@Suite("Broker files at rest")
struct PrivateFilesTests {
    static func mode(_ path: String) throws -> Int {
        try #require((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue)
    }

    /// A broker on ephemeral ports over `dataDirectory`, and the error its start throws, if any.
    static func start(_ dataDirectory: String) async throws -> (Broker, (any Error)?) {
        var configuration = BrokerConfiguration()
        configuration.ingestEndpoint = "tcp://127.0.0.1:*"
        configuration.fanoutEndpoint = "tcp://127.0.0.1:*"
        configuration.replayEndpoint = "tcp://127.0.0.1:*"
        configuration.serviceEndpoint = "tcp://127.0.0.1:*"
        configuration.dataDirectory = dataDirectory
        configuration.insecure = true
        var logger = Logger(label: "test-broker")
        logger.logLevel = .critical
        // The context goes with the broker (its deinit terminates it), as these brokers never
        // share it.
        let broker = try Broker(configuration: configuration, logger: logger, context: Context())
        do {
            _ = try await broker.start()
            return (broker, nil)
        } catch {
            return (broker, error)
        }
    }

    @Test("the parent of a path: a bare relative name (which trapped NSString on Linux), nested, absolute, trailing slashes, the root")
    func parentDirectories() {
        #expect(PrivateFiles.parentDirectory(of: "b") == ".")
        #expect(PrivateFiles.parentDirectory(of: "state/") == ".")
        #expect(PrivateFiles.parentDirectory(of: "a/b") == "a")
        #expect(PrivateFiles.parentDirectory(of: "./b") == ".")
        #expect(PrivateFiles.parentDirectory(of: "/var/lib/switchboard/broker") == "/var/lib/switchboard")
        #expect(PrivateFiles.parentDirectory(of: "/var/lib/switchboard/broker//") == "/var/lib/switchboard")
        #expect(PrivateFiles.parentDirectory(of: "/broker") == "/")
        #expect(PrivateFiles.parentDirectory(of: "/") == "/")
    }

    @Test("a fresh broker makes its data directory 0700 and the journal, its -wal and -shm 0600")
    func freshFilesArePrivate() async throws {
        let fixture = try await BrokerFixture.start()
        let producer = try await fixture.producer()
        let (_, frames) = try Events.frames(seq: 1)
        #expect(try await Events.exchange(producer, frames).command == .ack)
        await producer.close()
        let data = fixture.configuration.dataDirectory
        let journal = (data as NSString).appendingPathComponent("journal.sqlite")
        #expect(try Self.mode(data) == 0o700)
        for path in [journal, journal + "-wal", journal + "-shm"] {
            #expect(try Self.mode(path) == 0o600, "\(path)")
        }
        await fixture.stop()
    }

    @Test("a broker refuses a journal others can read, naming the file and the chmod, and starts once it is fixed")
    func refusesAReadableJournal() async throws {
        let directory = try TemporaryDirectory("broker-files")
        defer { directory.remove() }
        let data = directory.path("broker")
        let (first, failure) = try await Self.start(data)
        #expect(failure == nil)
        await first.stop()

        let journal = directory.path("broker/journal.sqlite")
        chmod(journal, 0o644)
        let (refused, error) = try await Self.start(data)
        let message = try #require(error as? PrivateFiles.Failure).message
        #expect(message.contains(journal) && message.contains("chmod 600 \(journal)"), "\(message)")
        await refused.stop()

        chmod(journal, 0o600)
        let (fixed, none) = try await Self.start(data)
        #expect(none == nil)
        await fixed.stop()
    }

    @Test("a broker refuses a data directory group or others can enter, and a stray -wal others can read")
    func refusesAnOpenDirectoryAndWAL() async throws {
        let directory = try TemporaryDirectory("broker-files")
        defer { directory.remove() }
        let data = directory.path("broker")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        chmod(data, 0o755)
        let (open, error) = try await Self.start(data)
        let message = try #require(error as? PrivateFiles.Failure).message
        #expect(message.contains("chmod 700 \(data)"), "\(message)")
        await open.stop()

        chmod(data, 0o700)
        let wal = directory.path("broker/journal.sqlite-wal")
        _ = FileManager.default.createFile(atPath: wal, contents: Data())
        chmod(wal, 0o640)
        let (stray, walError) = try await Self.start(data)
        let walMessage = try #require(walError as? PrivateFiles.Failure).message
        #expect(walMessage.contains("chmod 600 \(wal)"), "\(walMessage)")
        await stray.stop()
    }
}
