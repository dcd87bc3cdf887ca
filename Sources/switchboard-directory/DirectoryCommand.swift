import ArgumentParser
import Configuration
import Foundation
import Logging
import ServiceLifecycle
import SwitchboardBackends
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardTokens
import SwitchboardWorkers
import UnixSignals

@main
struct DirectoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-directory",
        abstract: "The Directory syncer: keeps the Directory's people and the bus's person.* events in step, both ways.",
        discussion: """
            Directory → bus: every --interval it lists the people of the Directory user
            --account, compares the list with the last one it accepted (kept in
            directory-sync.sqlite in --data-dir, 0600) and publishes person.created and
            person.deleted facts (source "directory", with the Directory's person id,
            name and office). The first list it sees is published whole.

            The guard: a list that is empty, or that misses more than --max-missing of
            the people of the last accepted list, publishes directory.sync.suspect
            (counts, no names) and nothing else; it is accepted only when the next poll
            returns exactly the same list.

            Bus → Directory: joins the consumer group `directory` for person.* events
            and applies the requests among them (any source but "directory"): a
            person.created without person_id adds the person, unless one with that
            name and office is already listed; a person.deleted removes the person by
            person_id (refused as person-mismatch when a name or office is given and
            differs), or by name and office when exactly one person matches. Each
            request is applied once, keyed by its event id; what the syncer wrote is
            never published again by its own poll. Facts (source "directory", its own
            or anyone's) are acknowledged and not applied.

            It holds no password: the Directory key comes from the auth service
            (token.get for backend directory and --account), kept in this worker's
            cache until the Directory rejects it.

            Subcommands `add` and `delete` are the operator's way to ask for a change:
            they put the request into this worker's outbox (same --data-dir and
            certificate) and send it to the broker (protocol section 16.3).

            SIGTERM or SIGINT: finish the poll or request in hand, leave the group, send
            what waits in the outbox, exit.
            """,
        version: SwitchboardVersion.current,
        subcommands: [AddCommand.self, DeleteCommand.self])

    @OptionGroup var worker: WorkerOptions
    @Option(help: "The Directory service root, ending in /directory (default \(DirectoryConfiguration.defaultURL)).") var url: String?
    @Option(
        help:
            "The Directory user whose people are synced and whose key auth hands out (auth holds its password; default \(DirectoryConfiguration.defaultAccount))."
    )
    var account: String?
    @Option(
        help: "Time between two polls of the Directory, 100ms–1d (default \(DurationText.format(DirectoryConfiguration.defaultInterval))).")
    var interval: String?
    @Option(
        name: .customLong("max-missing"),
        help:
            "The share of the last accepted list (0 < x ≤ 1) that may go missing in one poll before the list is held back as suspect (default \(DirectoryConfiguration.defaultMaxMissing))."
    )
    var maxMissing: String?
    @Option(
        name: .customLong("start-timeout"),
        help:
            "How long to keep trying to reach auth and the Directory at start before giving up (default \(DurationText.format(DirectoryConfiguration.defaultStartTimeout)))."
    )
    var startTimeout: String?

    /// The directory worker's configuration, built once from this process's command line,
    /// environment and file.
    static func programConfiguration() throws(ConfigurationError) -> ProgramConfiguration {
        try DirectoryConfiguration.programConfiguration(arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
    }

    func run() async throws {
        let settings: DirectoryConfiguration
        do {
            settings = try Self.programConfiguration().read { reader in
                try StructuredLogHandler.bootstrap(reader: reader)
                return try DirectoryConfiguration(reader: reader)
            }
        } catch {
            throw ValidationError(error.description)
        }
        let (url, account, interval, maxMissing, startTimeout) = (
            settings.url, settings.account, settings.interval, settings.maxMissing, settings.startTimeout
        )
        let logger = Logger(label: "directory")
        let runtime: WorkerRuntime
        let store: DirectorySyncStore
        do throws(WorkerConfigurationError) {
            runtime = try WorkerRuntime(service: "directory", settings: settings.worker, logger: logger)
            do {
                store = try DirectorySyncStore(path: runtime.dataDirectory + "/directory-sync.sqlite")
            } catch {
                throw WorkerConfigurationError("--data-dir: cannot open directory-sync.sqlite in \(runtime.dataDirectory): \(error)")
            }
        } catch {
            throw ValidationError(error.description)
        }
        let client = DirectoryClient(http: runtime.http, baseURL: url, logger: logger)
        let key = CredentialSource<Directory.APIKey>.provider(runtime.tokens.directory(account: account))
        do throws(WorkerConfigurationError) {
            try await WorkerStart.retrying(for: startTimeout, logger: logger) { () throws(WorkerConfigurationError) in
                try await DirectorySyncer.startCheck(client: client, key: key, account: account, url: url)
            }
        } catch {
            await runtime.close()
            throw ValidationError("\(error)")
        }
        let outbox = runtime.outbox
        let syncer = DirectorySyncer(
            client: client, key: key, account: account, store: store, guard: DirectoryGuard(maxMissing: maxMissing), logger: logger
        ) { events in
            _ = try await outbox.enqueue(events)
        }
        let consumer = runtime.consumer(topics: ["person."])
        logger.info(
            "directory syncer starting",
            metadata: [
                "account": "\(account)", "interval": "\(interval)", "max_missing": "\(maxMissing)",
                "groups": "\(settings.worker.endpoints.groups)",
                "data_dir": "\(runtime.dataDirectory)",
            ])
        try await runtime.run(
            [
                DirectoryPoller(syncer: syncer, interval: interval),
                WorkerStart.ReadyLog(
                    consumer: consumer, readiness: .init(environment: ProcessInfo.processInfo.environment), logger: logger),
                GroupWorker(consumer: consumer, handler: syncer, logger: logger),
            ], name: "directory syncer", consumer: consumer)
    }
}

/// The options `add` and `delete` share: where the request goes and who sends it.
struct RequestOptions: ParsableArguments {
    @OptionGroup var worker: WorkerOptions
    @Option(help: "The request's source: who asks (1–64 of a–z 0–9 _ -, not 'directory').") var source = "operator"
    @Option(help: "How long to wait for the broker to take the request; it stays in the outbox otherwise (1s–1h).") var wait = "10s"

    func validate() throws {
        guard source != "directory", source.wholeMatch(of: /^[a-z][a-z0-9_-]{0,63}$/) != nil else {
            throw ValidationError("--source must be 1–64 of a–z 0–9 _ - starting with a letter, and not 'directory', got '\(source)'")
        }
        guard let wait = DurationText.parse(wait), wait >= .seconds(1), wait <= .seconds(3600) else {
            throw ValidationError("--wait must be a duration from 1s to 1h, got '\(wait)'")
        }
    }

    /// Puts one event into the syncer's outbox and sends it; prints its event id.
    func send(type: String, schema: String, content: some Encodable & Sendable, key: String?) async throws {
        let logger = Logger(label: "directory")
        let runtime: WorkerRuntime
        do {
            let settings = try DirectoryCommand.programConfiguration().read { reader in
                try StructuredLogHandler.bootstrap(reader: reader, defaultLevel: .warning)
                return try WorkerSettings(reader: reader)
            }
            runtime = try WorkerRuntime(service: "directory", settings: settings, logger: logger)
        } catch {
            throw ValidationError("\(error)")
        }
        let entries = try await runtime.outbox.enqueue([
            Outbox.NewEvent(type: type, schema: schema, content: try WireJSON.encode(content), key: key)
        ])
        var settings = OutboxSender.Settings()
        settings.socketOptions = runtime.credentials?.socketOptions ?? []
        let sender = OutboxSender(
            outbox: runtime.outbox, io: runtime.io, endpoint: runtime.settings.endpoints.ingest, settings: settings, logger: logger)
        _ = try await sender.deliver(until: .now + (DurationText.parse(wait) ?? .seconds(10)))
        // Whether this request is still waiting: not whether the outbox is empty, which the
        // syncer running on the same data directory may be filling with its own facts meanwhile.
        let seq = entries.first?.producerSeq ?? 0
        let waiting = try await runtime.outbox.pending(after: seq - 1, limit: 1).first?.producerSeq == seq
        await runtime.close()
        let eventID = entries.first?.eventID ?? ""
        if waiting {
            print("queued \(type) \(eventID); the broker has not taken it yet (it stays in the outbox in \(runtime.dataDirectory))")
            throw ExitCode(2)
        }
        print("published \(type) \(eventID)")
    }
}

struct AddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Ask the syncer to add a person to the Directory (publishes a person.created request).",
        discussion: """
            Publishes {"name", "office", "source"} as person.created, with no person_id
            (the Directory assigns it), through the syncer's outbox (--data-dir, its
            certificate). The running syncer adds the person unless one with that name and
            office is listed already. Prints the request's event id.
            """)

    @OptionGroup var request: RequestOptions
    @Option(help: "The person's name.") var name: String
    @Option(help: "The person's office.") var office: String

    func validate() throws {
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty, name.count <= 200 else {
            throw ValidationError("--name must be 1–200 characters and not blank")
        }
        guard office.count <= 200 else { throw ValidationError("--office must be at most 200 characters") }
    }

    func run() async throws {
        let content = PersonCreated(personID: nil, name: name, office: office, source: request.source)
        try await request.send(type: PersonCreated.type, schema: PersonCreated.schema, content: content, key: nil)
    }
}

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Ask the syncer to delete a person from the Directory (publishes a person.deleted request).",
        discussion: """
            Publishes {"person_id", "name"?, "office"?, "source"} as person.deleted through
            the syncer's outbox. Give --person-id (with --name or --office, the syncer
            refuses the request when the Directory's person differs), or --name and
            --office (exactly one person must match).
            """)

    @OptionGroup var request: RequestOptions
    @Option(name: .customLong("person-id"), help: "The Directory's person id.") var personID: Int?
    @Option(help: "The person's name.") var name: String?
    @Option(help: "The person's office.") var office: String?

    func validate() throws {
        if let personID, personID < 1 { throw ValidationError("--person-id must be a positive number, got \(personID)") }
        guard personID != nil || (name != nil && office != nil) else {
            throw ValidationError("give --person-id, or --name and --office")
        }
    }

    func run() async throws {
        let content = PersonDeleted(personID: personID, name: name, office: office, source: request.source)
        try await request.send(
            type: PersonDeleted.type, schema: PersonDeleted.schema, content: content, key: personID.map { "directory-person-\($0)" })
    }
}
