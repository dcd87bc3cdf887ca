public import Foundation
public import Logging
public import SwitchboardBroker
public import SwitchboardBus
public import SwitchboardProtocol
public import ZeroMQ

/// A broker on ephemeral ports in a temporary directory, with an I/O thread for clients. The
/// I/O thread owns the ZeroMQ context the broker and the clients share, as in a program.
public final class BrokerFixture: Sendable {
    public let directory: TemporaryDirectory
    public let io: IOThread
    /// The context of the broker and of `io` (a ZAP handler or a second I/O thread goes here).
    public var context: Context { io.context }
    public let broker: Broker
    public let endpoints: BrokerEndpoints
    public let configuration: BrokerConfiguration

    public static func start(
        directory: TemporaryDirectory? = nil, logger given: Logger? = nil, _ configure: (inout BrokerConfiguration) -> Void = { _ in }
    ) async throws -> BrokerFixture {
        let directory = try directory ?? TemporaryDirectory("broker")
        var configuration = BrokerConfiguration()
        configuration.ingestEndpoint = "tcp://127.0.0.1:*"
        configuration.fanoutEndpoint = "tcp://127.0.0.1:*"
        configuration.replayEndpoint = "tcp://127.0.0.1:*"
        configuration.serviceEndpoint = "tcp://127.0.0.1:*"
        configuration.groupsEndpoint = "tcp://127.0.0.1:*"
        configuration.dataDirectory = directory.path("broker")
        configuration.heartbeat = .milliseconds(100)
        configuration.insecure = true  // tests of security set keys and turn this off
        configure(&configuration)
        var logger = given ?? Logger(label: "test-broker")
        if given == nil { logger.logLevel = .warning }
        let io = try IOThread()
        let broker: Broker
        let endpoints: BrokerEndpoints
        do {
            broker = try Broker(configuration: configuration, logger: logger, context: io.context)
            endpoints = try await broker.start()
        } catch {
            await io.shutdown()
            throw error
        }
        return BrokerFixture(directory: directory, io: io, broker: broker, endpoints: endpoints, configuration: configuration)
    }

    private init(
        directory: TemporaryDirectory, io: IOThread, broker: Broker, endpoints: BrokerEndpoints, configuration: BrokerConfiguration
    ) {
        self.directory = directory
        self.io = io
        self.broker = broker
        self.endpoints = endpoints
        self.configuration = configuration
    }

    /// Stops broker and clients, then the context (the I/O thread's shutdown); keeps the
    /// directory unless `remove`.
    public func stop(remove: Bool = true) async {
        await broker.stop()
        await io.shutdown()
        if remove { directory.remove() }
    }

    /// A DEALER connected to the ingest endpoint.
    public func producer() async throws -> AsyncSocket {
        try await io.open(.dealer, linger: 0) { [endpoints] in try $0.connect(endpoints.ingest) }
    }

    /// A DEALER connected to the service (Majordomo) endpoint: a raw client or worker.
    public func servicePeer() async throws -> AsyncSocket {
        try await io.open(.dealer, linger: 0) { [endpoints] in try $0.connect(endpoints.service) }
    }

    public func replayClient() async throws -> AsyncSocket {
        try await io.open(.dealer, linger: 0) { [endpoints] in try $0.connect(endpoints.replay) }
    }

    /// A DEALER connected to the groups endpoint: a raw group member (see `GroupWire`).
    public func groupPeer(_ options: [SocketOption] = []) async throws -> AsyncSocket {
        try await io.open(.dealer, linger: 0) { [endpoints] in
            try $0.set(options)
            try $0.connect(endpoints.groups)
        }
    }

    /// An operator's client of the groups endpoint.
    /// A client of the groups endpoint. Its time is long by default: in the first minute of a
    /// whole-suite run two cores are saturated, and 5 s answers went missing there.
    public func groupsClient(timeout: Duration = .seconds(30), socketOptions: [SocketOption] = []) -> GroupAdminClient {
        GroupAdminClient(io: io, endpoint: endpoints.groups, settings: .init(timeout: timeout, socketOptions: socketOptions))
    }

    public func outbox(_ name: String) throws -> Outbox {
        try Outbox(path: directory.path("\(name)/outbox.sqlite"), producer: name)
    }

    public func sender(_ outbox: Outbox, window: Int = 256, resendAfter: Duration = .seconds(1)) -> OutboxSender {
        var settings = OutboxSender.Settings()
        settings.window = window
        settings.resendAfter = resendAfter
        var logger = Logger(label: "test-sender")
        logger.logLevel = .critical
        return OutboxSender(outbox: outbox, io: io, endpoint: endpoints.ingest, settings: settings, logger: logger)
    }

    /// Journal rows: (bus_seq, event_id, producer, producer_seq), read from the file.
    public func journalRows() throws -> [(busSeq: Int64, eventID: String, producer: String, producerSeq: Int64)] {
        try JournalFile.rows(at: directory.path("broker/journal.sqlite"))
    }
}

/// Builds EVENT frames for raw-socket tests.
public enum Events {
    public static func checkIn(index: Int = 0) -> Data {
        let checkIn = CheckIn(
            participant: .init(firstName: "Ana", lastName: "Diaz", dateOfBirth: "1990-04-01"), siteID: 12,
            programID: Int64(3 + index % 2), kioskID: "riverside-1", checkedInAt: "2026-11-22T21:04:00.000Z")
        return try! WireJSON.encode(checkIn)
    }

    public static func frames(
        producer: String = "riverside-1", seq: Int64, eventID: String = UUIDv7.string(), type: String = CheckIn.type,
        schema: String = CheckIn.schema, content: Data? = nil
    ) throws -> (EventHeader, [Data]) {
        let header = EventHeader(eventID: eventID, type: type, producer: producer, producerSeq: seq, schema: schema, session: "test")
        return (header, try Envelope(command: .event, header: header, content: content ?? checkIn(index: Int(seq))).frames())
    }

    /// Sends and waits for the one answer.
    public static func exchange(_ socket: AsyncSocket, _ frames: [Data], timeout: Duration = .seconds(5)) async throws -> Envelope {
        try await socket.send(frames)
        guard let answer = try await socket.receive(timeout: timeout) else {
            throw WaitTimedOut(description: "no answer within \(timeout)")
        }
        return try Envelope.decode(answer.frames)
    }
}
