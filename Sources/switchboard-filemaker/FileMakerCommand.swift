import ArgumentParser
import Foundation
import Logging
import SwitchboardAuth
import SwitchboardBackends
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardWorkers

@main
struct FileMakerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-filemaker",
        abstract: "The FileMaker writer: one FileMaker record per check-in, exactly once (consumer group `filemaker`).",
        discussion: """
            Joins the consumer group `filemaker` for checkin.recorded (and, with a `staff`
            section in the mapping, person.*) events and writes each check-in
            to a layout of a FileMaker database through the Data API, idempotently: with
            event_id_unique in the mapping (the built-in one) it creates at once and the
            field's unique-value validation refuses a second record (FileMaker 504: it then
            finds the first); without it, it finds the record by the event id before
            creating one. Either way a redelivered event is written once. Then it publishes filemaker.record.written (event id, layout,
            record id, created) and acknowledges the event.

            It holds no password: the FileMaker session comes from the auth service
            (token.get for backend filemaker and --account), kept in this worker's own
            cache and asked for again only when FileMaker rejects it (code 952).

            Failures: connection errors, 5xx, 429, 952 after one refresh and 8xx host
            errors are retried with the group's back-off; FileMaker 1xx (missing layout,
            field or record), 2xx (access), 5xx validation codes and 17xx (bad request)
            become dead letters carrying the code (`switchboard dlq list`).

            The mapping (--mapping FILE, JSON) says which field gets which part of the
            check-in; without it, the seed's Shelter file:

            \(WorkerConfigurationFile.example(FileMakerMapping.default))

            Sources: \(FileMakerMapping.sources.keys.sorted().joined(separator: ", ")).
            $-names come from the event header; the rest from the check-in. Numbers may go
            to number or text fields, dates (YYYY-MM-DD) to date or text, timestamps to
            timeStamp (written in time_zone, default UTC) or text. At start the mapping is
            checked against the layout on the server: a missing field or a field of the
            wrong type stops the worker with the setting named.

            People: person.created and person.deleted facts from switchboard-directory
            (source "directory") are mirrored into the staff layout, found or deleted by
            the Directory's person id in staff.person_id_field (a text field); requests
            (other sources) are left to switchboard-directory, whose fact follows.

            SIGTERM or SIGINT: take no new check-ins, finish the ones in hand, leave the
            group (the broker gives anything else to other members), send the events
            waiting in the outbox, exit.
            """)

    @OptionGroup var worker: WorkerOptions
    @Option(help: "The FileMaker server's base URL (https://host[:port]; default https://127.0.0.1:8480).") var url: String?
    @Option(help: "The FileMaker database (file) name (default Shelter).") var database: String?
    @Option(help: "The FileMaker account whose session auth hands out (auth holds its password; default switchboard).")
    var account: String?
    @Option(help: "The field mapping file (JSON, shown above); default: the seed's CheckIns layout.") var mapping: String?
    @Option(
        name: .customLong("start-timeout"),
        help: "Seconds to keep trying to reach auth and FileMaker at start before giving up (default 60).")
    var startTimeout: Int?

    func run() async throws {
        let settings: WorkerSettings
        let (url, database, account, mappingPath, startTimeout): (String, String, String, String?, Int)
        do throws(WorkerConfigurationError) {
            settings = try WorkerSettings(
                layers: worker.layers(
                    service: "filemaker",
                    extra: [
                        "url": self.url, "database": self.database, "account": self.account, "mapping": self.mapping,
                        "start_timeout": self.startTimeout.map(String.init),
                    ],
                    extraNames: [
                        "url": "--url", "database": "--database", "account": "--account", "mapping": "--mapping",
                        "start_timeout": "--start-timeout",
                    ]))
            (url, database, account, mappingPath, startTimeout) = try settings.read { layers throws(ConfigurationLayers.Failure) in
                (
                    try layers.url("url") ?? "https://127.0.0.1:8480", try layers.nonEmpty("database") ?? "Shelter",
                    try layers.nonEmpty("account") ?? "switchboard", try layers.nonEmpty("mapping"),
                    try layers.integer("start_timeout", default: 60, in: 1...3600)
                )
            }
            try settings.bootstrapLogging()
        } catch {
            throw ValidationError(error.description)
        }
        let logger = Logger(label: "filemaker")
        let mapping: FileMakerMapping
        let runtime: WorkerRuntime
        do throws(WorkerConfigurationError) {
            if let mappingPath {
                mapping = try FileMakerMapping.load(path: mappingPath)
            } else {
                mapping = .default
            }
            runtime = try WorkerRuntime(service: "filemaker", settings: settings, logger: logger)
        } catch {
            throw ValidationError(error.description)
        }
        let client = FileMakerClient(http: runtime.http, serverURL: url, database: database, logger: logger)
        let session = runtime.tokens.fileMakerSource(account: account, database: database)
        let textFields: Set<String>
        do throws(WorkerConfigurationError) {
            textFields = try await WorkerStart.retrying(for: .seconds(startTimeout), logger: logger) {
                () throws(WorkerConfigurationError) in
                try await FileMakerWriter.checkLayout(client: client, mapping: mapping, session: session)
            }
        } catch {
            await runtime.close()
            throw ValidationError("\(error)")
        }
        let writer = FileMakerWriter(client: client, mapping: mapping, session: session, textFields: textFields, logger: logger) {
            [runtime] written, key in
            try await runtime.publish(type: FileMakerRecordWritten.type, schema: FileMakerRecordWritten.schema, content: written, key: key)
        }
        let consumer = runtime.consumer(topics: FileMakerWriter.topics(for: mapping))
        logger.info(
            "filemaker writer starting",
            metadata: [
                "database": "\(database)", "layout": "\(mapping.checkins.layout)", "groups": "\(settings.endpoints.groups)",
                "data_dir": "\(runtime.dataDirectory)",
            ])
        try await runtime.run(
            [WorkerStart.ReadyLog(consumer: consumer, logger: logger), GroupWorker(consumer: consumer, handler: writer, logger: logger)],
            name: "filemaker writer", consumer: consumer)
    }
}
