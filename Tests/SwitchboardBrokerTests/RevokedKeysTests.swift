import Foundation
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// `switchboard keys` against a real broker: the broker runs from the broker host's bundle, the
/// kiosks from theirs, and revocation reaches the broker through its own allow-list watcher.
@Suite("switchboard keys with a broker: revocation and another deployment's keys")
struct RevokedKeysTests {
    static func inventory(_ deployment: String) throws -> DeploymentInventory {
        try DeploymentInventory.parse(
            Data(
                """
                {
                  "deployment": "\(deployment)",
                  "broker_host": "127.0.0.1",
                  "hosts": {
                    "broker":   {"programs": ["broker"]},
                    "site-101": {"kiosks": ["site-101-kiosk-1"]},
                    "site-102": {"kiosks": ["site-102-kiosk-1"]}
                  }
                }
                """.utf8))
    }

    /// A check-in of `kiosk`, as its own producer.
    static func checkIn(_ kiosk: String, seq: Int64) throws -> [Data] {
        try Events.frames(producer: kiosk, seq: seq).1
    }

    @Test(
        "a kiosk publishes with its bundle's key; after `keys revoke` the broker, watching its bundle's allow-list, refuses that key while the other kiosk carries on; another deployment's key is refused"
    )
    func revocationEndToEnd() async throws {
        let directory = try TemporaryDirectory("deployment-keys")
        defer { directory.remove() }
        let keys = DeploymentKeys(directory: directory.path("keys"))
        try keys.initialise(try Self.inventory("riverside-coc"))
        let brokerBundle = keys.bundleDirectory("broker")

        // Fixed ports: a revocation closes every connection by binding the endpoints again, and a
        // port the kernel picked for `*` can be taken by another test in between.
        let port = try freePort(count: 5)
        let fixture = try await BrokerFixture.start(directory: try TemporaryDirectory("revoked-keys-broker")) { configuration in
            configuration.ingestEndpoint = "tcp://127.0.0.1:\(port)"
            configuration.fanoutEndpoint = "tcp://127.0.0.1:\(port + 1)"
            configuration.replayEndpoint = "tcp://127.0.0.1:\(port + 2)"
            configuration.serviceEndpoint = "tcp://127.0.0.1:\(port + 3)"
            configuration.groupsEndpoint = "tcp://127.0.0.1:\(port + 4)"
            configuration.securityKey = (brokerBundle as NSString).appendingPathComponent("broker.secret")
            configuration.securityCertificates = (brokerBundle as NSString).appendingPathComponent("allowed")
            configuration.insecure = false
        }
        let security = try #require(fixture.broker.security)
        let broker = try Certificate.load(publicFile: (brokerBundle as NSString).appendingPathComponent("broker.cert"))
        let ingest = fixture.endpoints.ingest

        // Each kiosk as its host would run it: its .secret and broker.cert from its bundle.
        func credentials(_ keys: DeploymentKeys, _ host: String, _ kiosk: String) throws -> ClientCredentials {
            let bundle = keys.bundleDirectory(host) as NSString
            return try #require(
                try ClientCredentials.load(
                    certificate: bundle.appendingPathComponent("\(kiosk).secret"), brokerKey: bundle.appendingPathComponent("broker.cert")))
        }
        let revoked = try credentials(keys, "site-101", "site-101-kiosk-1")
        let kept = try credentials(keys, "site-102", "site-102-kiosk-1")
        /// How the first handshake of a new connection with `options` ends. libzmq retries a
        /// refused TCP connection by itself: after a revocation the broker binds its endpoints
        /// again, and a connection made in that moment is retried rather than lost.
        func handshake(_ options: [SocketOption], _ endpoint: String) async throws -> SocketEvent.Kinds {
            let monitorEndpoint = "inproc://keys-handshake-\(UUID().uuidString)"
            let socket = try await fixture.io.open(.dealer, linger: 0) { socket in
                try socket.set(options + [.reconnectInterval(milliseconds: 100)])
                try socket.startMonitor(
                    endpoint: monitorEndpoint,
                    events: [.handshakeSucceeded, .handshakeFailedAuth, .handshakeFailedProtocol, .handshakeFailedNoDetail])
            }
            let monitor = try await fixture.io.open(.pair, linger: 0) { try $0.connect(monitorEndpoint) }
            try await socket.perform { try $0.connect(endpoint) }
            let message = try await monitor.receive(timeout: .seconds(20))
            await socket.close()
            await monitor.close()
            guard let message else { throw WaitTimedOut(description: "no handshake event") }
            return try SocketEvent(frames: message.frames).kind
        }
        func dealer(_ credentials: ClientCredentials) async throws -> AsyncSocket {
            try await fixture.io.open(.dealer, linger: 0) { socket in
                try socket.set(credentials.socketOptions)
                try socket.connect(ingest)
            }
        }

        try await withThrowingDiscardingTaskGroup { group in
            // What `switchboard-broker` runs beside the broker: the allow-list follows its directory.
            group.addTask { await BrokerService.watch(security, broker: fixture.broker) }

            let first = try await dealer(revoked)
            #expect(try await Events.exchange(first, try Self.checkIn("site-101-kiosk-1", seq: 1), timeout: .seconds(10)).command == .ack)
            let second = try await dealer(kept)
            #expect(try await Events.exchange(second, try Self.checkIn("site-102-kiosk-1", seq: 1), timeout: .seconds(10)).command == .ack)

            await first.close()

            // A kiosk added while the broker runs is picked up too. Until the watcher has taken
            // its first look at the directory, a change made before is none to it: each check
            // touches the new file, so the watcher sees a change once it is running.
            let grown = try Self.inventory("riverside-coc").hosts + [.init(name: "site-103", programs: [], kiosks: ["site-103-kiosk-1"])]
            let added = try keys.add(DeploymentInventory(deployment: "riverside-coc", brokerHost: "127.0.0.1", hosts: grown))
            #expect(added.made.map(\.name) == ["site-103-kiosk-1"])
            let newCertificate = (security.allowList.directory as NSString).appendingPathComponent("site-103-kiosk-1.cert")
            try await waitUntil("the broker's watcher picks up the added kiosk") {
                if security.allowList.certificate(named: "site-103-kiosk-1") != nil { return true }
                try FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: newCertificate)
                return false
            }

            let changes = try keys.revoke("site-101-kiosk-1")
            #expect(changes.revoked == ["site-101-kiosk-1"] && changes.bundles.contains("broker"))
            #expect(!FileManager.default.fileExists(atPath: keys.bundleDirectory("site-101") + "/site-101-kiosk-1.secret"))
            try await waitUntil("the broker reloads its allow-list by itself") {
                security.allowList.certificate(for: revoked.certificate.publicKey) == nil
            }
            #expect(try await handshake(revoked.socketOptions, ingest) == .handshakeFailedAuth, "the revoked key")
            #expect(security.refusals["unknown-key", default: 0] >= 1, "\(security.refusals)")

            // Every connection was closed; the other kiosk's comes back and is ACKed.
            let again = try Self.checkIn("site-102-kiosk-1", seq: 2)
            try await waitUntil("the other kiosk's check-in is ACKed") {
                (try? await Events.exchange(second, again, timeout: .seconds(2)).command) == .ack
            }
            #expect(try await handshake(kept.socketOptions, ingest) == .handshakeSucceeded)

            // Another deployment's kiosk of the same name, even knowing this broker's key.
            let other = DeploymentKeys(directory: directory.path("other-keys"))
            try other.initialise(try Self.inventory("eastside-coc"))
            let stranger = try credentials(other, "site-102", "site-102-kiosk-1")
            #expect(stranger.certificate.name == kept.certificate.name && stranger.certificate.publicKey != kept.certificate.publicKey)
            let aimed = ClientCredentials(certificate: stranger.certificate, brokerKey: broker.publicKey)
            #expect(try await handshake(aimed.socketOptions, ingest) == .handshakeFailedAuth, "another deployment's key")
            #expect(try await handshake(stranger.socketOptions, ingest) != .handshakeSucceeded, "with its own broker's key")

            // Only the first kiosk's check-in and the other's two reached the journal.
            let rows = try fixture.journalRows().filter { $0.producer != "broker" }
            #expect(rows.map(\.producer).sorted() == ["site-101-kiosk-1", "site-102-kiosk-1", "site-102-kiosk-1"])
            group.cancelAll()
        }
        await fixture.stop()
    }
}
