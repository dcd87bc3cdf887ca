import ArgumentParser
import Configuration
import Foundation
import Logging
import SwitchboardBackends
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTokens
import SwitchboardWorkers

@main
struct FileMakerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-filemaker",
        abstract: "The FileMaker writer: one FileMaker record per check-in, exactly once (consumer group `filemaker`).",
        discussion: """
            Joins the consumer group `filemaker` for checkin.recorded, checkin.voided (with
            checkins.void in the mapping), eto.participant.created (with a participants
            layout) and person.* (with a `staff` section) events, and writes each check-in
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
            Void sources (checkins.void.fields): \(FileMakerMapping.voidSources.keys.sorted().joined(separator: ", ")).
            Participant sources (participants.fields): \(FileMakerMapping.participantSources.keys.sorted().joined(separator: ", ")).
            $-names come from the event header; the rest from the check-in. Numbers may go
            to number or text fields, dates (YYYY-MM-DD) to date or text, timestamps to
            timeStamp (written in time_zone, default UTC) or text. At start the mapping is
            checked against the layout on the server: a missing field or a field of the
            wrong type stops the worker with the setting named.

            Voids: a checkin.voided marks the check-in's record (found by the check-in's
            event id) voided: checkins.void.voided_field set to 1 and its fields (voided_at,
            reason, recorded_by, ...) written; then filemaker.record.voided (the void's
            event id, checkin_event_id, layout, record id) is published. A void that comes
            before its check-in creates the record holding just the event id and the void
            fields; the check-in, when it comes, fills its own fields into that record and
            leaves the void as it is. The reason is never logged.

            Walk-ins: eto.participant.created (from switchboard-eto) is mirrored into the
            participants layout (default Participants), found by ETO's participant id in
            participants.participant_id_field (a text field) and created if absent.
            --participants-layout NAME uses another layout, `none` turns the mirror off
            (the group then does not take eto.participant.created).

            Group topics: the group is created by the first JOIN with the topics this
            configuration takes, and a group's topics are fixed. If `filemaker` exists with
            other topics (an older version, or another mapping), the worker stops and says
            so; then run `switchboard groups list` (note its cursor), `switchboard groups
            delete filemaker` and `switchboard groups create filemaker --topic ... --start
            <cursor + 1>` with the topics it names, and start it again.

            People: person.created and person.deleted facts from switchboard-directory
            (source "directory") are mirrored into the staff layout, found or deleted by
            the Directory's person id in staff.person_id_field (a text field); requests
            (other sources) are left to switchboard-directory, whose fact follows.

            SIGTERM or SIGINT: take no new check-ins, finish the ones in hand, leave the
            group (the broker gives anything else to other members), send the events
            waiting in the outbox, exit.
            """, version: SwitchboardVersion.current)

    @OptionGroup var worker: WorkerOptions
    @Option(help: "The FileMaker server's base URL, https://host[:port] (default \(FileMakerConfiguration.defaultURL)).") var url: String?
    @Option(help: "The FileMaker database (file) name (default \(FileMakerConfiguration.defaultDatabase)).") var database: String?
    @Option(
        help:
            "The FileMaker account whose session auth hands out (auth holds its password; default \(FileMakerConfiguration.defaultAccount))."
    )
    var account: String?
    @Option(help: "The field mapping file (JSON, shown above; default: the seed's CheckIns layout).") var mapping: String?
    @Option(
        name: .customLong("participants-layout"),
        help: "The layout walk-ins are mirrored into (overrides the mapping's participants.layout; `none`: no mirror).")
    var participantsLayout: String?
    @Option(
        name: .customLong("start-timeout"),
        help:
            "How long to keep trying to reach auth and FileMaker at start before giving up (default \(DurationText.format(FileMakerConfiguration.defaultStartTimeout)))."
    )
    var startTimeout: String?

    func run() async throws {
        let settings: FileMakerConfiguration
        do {
            let configuration = try FileMakerConfiguration.programConfiguration(
                arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            settings = try configuration.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader)
                return try FileMakerConfiguration(reader: reader)
            }
        } catch {
            throw ValidationError(error.description)
        }
        let (url, database, account, mappingPath, startTimeout, participantsLayout) = (
            settings.url, settings.database, settings.account, settings.mappingPath, settings.startTimeout, settings.participantsLayout
        )
        let logger = Logger(label: "filemaker")
        let mapping: FileMakerMapping
        let runtime: WorkerRuntime
        do throws(WorkerConfigurationError) {
            var loaded = try mappingPath.map { path throws(WorkerConfigurationError) in try FileMakerMapping.load(path: path) } ?? .default
            loaded.setParticipantsLayout(participantsLayout)
            mapping = loaded
            runtime = try WorkerRuntime(service: "filemaker", settings: settings.worker, logger: logger)
        } catch {
            throw ValidationError(error.description)
        }
        let client = FileMakerClient(http: runtime.http, serverURL: url, database: database, logger: logger)
        let session = runtime.tokens.fileMakerSource(account: account, database: database)
        let textFields: (checkIns: Set<String>, participants: Set<String>)
        do throws(WorkerConfigurationError) {
            textFields = try await WorkerStart.retrying(for: startTimeout, logger: logger) {
                () throws(WorkerConfigurationError) in
                try await FileMakerWriter.checkLayouts(client: client, mapping: mapping, session: session)
            }
        } catch {
            await runtime.close()
            throw ValidationError("\(error)")
        }
        let writer = FileMakerWriter(
            client: client, mapping: mapping, session: session, textFields: textFields.checkIns,
            participantTextFields: textFields.participants, logger: logger,
            publishVoided: { [runtime] voided, key in
                try await runtime.publish(type: FileMakerRecordVoided.type, schema: FileMakerRecordVoided.schema, content: voided, key: key)
            }
        ) { [runtime] written, key in
            try await runtime.publish(type: FileMakerRecordWritten.type, schema: FileMakerRecordWritten.schema, content: written, key: key)
        }
        let topics = FileMakerWriter.topics(for: mapping)
        let consumer = runtime.consumer(topics: topics)
        logger.info(
            "filemaker writer starting",
            metadata: [
                "database": "\(database)", "layout": "\(mapping.checkins.layout)", "groups": "\(settings.worker.endpoints.groups)",
                "data_dir": "\(runtime.dataDirectory)",
            ])
        do {
            try await runtime.run(
                [
                    WorkerStart.ReadyLog(
                        consumer: consumer, readiness: .init(environment: ProcessInfo.processInfo.environment), logger: logger),
                    GroupWorker(consumer: consumer, handler: writer, logger: logger),
                ],
                name: "filemaker writer", consumer: consumer)
        } catch let error as ProtocolError where error.code == .groupConflict {
            throw GroupTopicsError(group: "filemaker", topics: topics, broker: error.message)
        }
    }
}

/// The group exists with other topics than this configuration takes (an older version's, or
/// another mapping's). Topics are fixed (protocol section 15.5): an operator recreates the group.
struct GroupTopicsError: Error, CustomStringConvertible {
    let group: String
    let topics: [String]
    let broker: String

    var description: String {
        let flags = topics.map { "--topic \($0)" }.joined(separator: " ")
        return """
            the broker refused to let this worker join: \(broker).
            This switchboard-filemaker takes the topics \(topics.map { "'\($0)'" }.joined(separator: ", ")). To move the group over without \
            writing its events again: `switchboard groups list` (note the group's cursor), then \
            `switchboard groups delete \(group)` and `switchboard groups create \(group) \(flags) --start <cursor + 1>`, \
            and start this worker again.
            """
    }
}
