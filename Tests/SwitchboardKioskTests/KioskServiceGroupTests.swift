import Foundation
import Logging
import ServiceLifecycle
import SwitchboardBroker
import SwitchboardBus
import SwitchboardKiosk
import SwitchboardObservability
import SwitchboardTesting
import Synchronization
import Testing
import ZeroMQ

/// The long-running kiosk's ServiceGroup against a real broker and a real outbox: graceful
/// shutdown stops the recorder first, drains the delivery, stops the admin server last, and
/// loses nothing.
@Suite("Kiosk service group: shutdown order", .serialized, .timeLimit(.minutes(3)))
struct KioskServiceGroupTests {
    /// The order in which services returned from `run`.
    final class Endings: Sendable {
        private let names = Mutex<[String]>([])
        func add(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    /// A service as the group runs it, noting when it returns (or throws).
    struct Noted: Service {
        let inner: any Service
        let name: String
        let endings: Endings

        func run() async throws {
            defer { endings.add(name) }
            try await inner.run()
        }
    }

    /// The library's configurations, each service wrapped to note its ending.
    func group(_ services: KioskServices, endings: Endings, deadline: Duration) -> ServiceGroup {
        var logger = Logger(label: "test-kiosk-group")
        logger.logLevel = .critical
        var configuration = ServiceGroupConfiguration(
            services: services.configurations.map {
                .init(
                    service: Noted(inner: $0.service, name: $0.serviceName, endings: endings),
                    successTerminationBehavior: $0.successTerminationBehavior, failureTerminationBehavior: $0.failureTerminationBehavior,
                    serviceName: $0.serviceName)
            }, logger: logger)
        configuration.maximumGracefulShutdownDuration = deadline
        return ServiceGroup(configuration: configuration)
    }

    static var quiet: Logger {
        var logger = Logger(label: "test-kiosk")
        logger.logLevel = .critical
        return logger
    }

    @Test("broker up: at shutdown the recorder stops first, every recorded check-in is journaled once, the admin server stops last")
    func drainsToTheBroker() async throws {
        let fixture = try await BrokerFixture.start()
        defer { fixture.directory.remove() }
        let outbox = try fixture.outbox("trickle-1")
        let services = KioskServices(
            io: fixture.io, outbox: outbox, endpoint: fixture.endpoints.ingest, drainTime: .seconds(20), admin: .loopback(0),
            observability: Observability(program: "switchboard-kiosk"),
            recorder: CheckInTrickle(outbox: outbox, kioskID: "trickle-1", interval: .milliseconds(5), roster: nil, startIndex: 0),
            logger: Self.quiet)
        #expect(services.configurations.map(\.serviceName) == ["admin", "delivery", "recorder"])
        let endings = Endings()
        let group = group(services, endings: endings, deadline: .seconds(30))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await waitUntil("check-ins are recorded and delivered while the kiosk runs", timeout: .seconds(90)) {
                let counts = try await outbox.counts()
                return counts.delivered >= 20 && counts.pending + Int(counts.delivered) >= 40
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(endings.all == ["recorder", "delivery", "admin"])
        let counts = try await outbox.counts()
        #expect(counts.pending == 0 && counts.rejected == 0, "the delivery drained the outbox: \(counts)")
        let rows = try fixture.journalRows().filter { $0.producer == "trickle-1" }
        #expect(Int64(rows.count) == counts.delivered, "every acknowledged check-in is in the journal")
        #expect(Set(rows.map(\.eventID)).count == rows.count, "and once")
        #expect(rows.map(\.producerSeq) == Array(1...Int64(rows.count)), "every recorded check-in, in order")
        await fixture.stop(remove: false)
    }

    @Test("broker down: shutdown ends within the drain time and every recorded check-in stays in the outbox")
    func keepsWhatItCannotSend() async throws {
        let directory = try TemporaryDirectory("kiosk-offline")
        defer { directory.remove() }
        let outbox = try Outbox(path: directory.path("outbox.sqlite"), producer: "offline-1")
        // A port nobody listens on: the broker is down for the whole run.
        let io = try IOThread()
        let services = KioskServices(
            io: io, outbox: outbox, endpoint: "tcp://127.0.0.1:\(try freePort())", drainTime: .seconds(1), admin: nil,
            observability: Observability(program: "switchboard-kiosk"),
            recorder: CheckInTrickle(outbox: outbox, kioskID: "offline-1", interval: .milliseconds(5), roster: nil), logger: Self.quiet)
        #expect(services.configurations.map(\.serviceName) == ["delivery", "recorder"])
        let endings = Endings()
        let group = group(services, endings: endings, deadline: .seconds(10))
        let clock = ContinuousClock()
        var shutdown = clock.now
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await waitUntil("check-ins are recorded", timeout: .seconds(30)) { try await outbox.counts().pending >= 20 }
            shutdown = clock.now
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        let took = shutdown.duration(to: clock.now)
        #expect(took >= .seconds(1) && took < .seconds(5), "stopped after the drain time, well within the deadline: \(took)")
        #expect(endings.all == ["recorder", "delivery"])
        let counts = try await outbox.counts()
        #expect(counts.delivered == 0 && counts.rejected == 0)
        let entries = try await outbox.pending(after: 0, limit: 100_000)
        #expect(entries.count == counts.pending)
        #expect(entries.map(\.producerSeq) == Array(1...Int64(entries.count)), "nothing recorded is lost")
        await io.shutdown()
    }
}
