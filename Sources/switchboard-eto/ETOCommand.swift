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

@main
struct ETOCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-eto",
        abstract:
            "The ETO worker: records check-ins (walk-ins too) as TouchPoint responses and applies voids (group `eto`); serves the `eto` service.",
        discussion: """
            Check-ins: joins the consumer group `eto` for checkin.recorded events and
            records each as one response to a TouchPoint, exactly once: the event id goes
            into a text element, and before adding, the worker lists the participant's
            responses to that TouchPoint and skips the write if the id is there. The
            participant is the check-in's ETO id, else the one participant of the
            program at the site with that first and last name (and date of birth when
            given); none or several is a dead letter `participant-unmatched` naming the
            candidates' ids (`switchboard dlq list eto`), never a guess. Reasons and logs
            carry ids and codes, never a name or date of birth (`dlq show` has the event).
            Once the response exists it is remembered, and eto.response.recorded (ids only)
            put in the outbox, in one commit to events-outbox.sqlite (data directory; an
            eto.sqlite left by an older worker is copied in at start and renamed
            eto.sqlite.imported).

            Walk-ins (participant.new): the site's participants (any program, or none) with
            the same first name, last name and date of birth are looked for first: one is
            used (and enrolled in the program if it is not), none means the participant is
            added and enrolled, several is participant-unmatched. Redeliveries and a second
            kiosk's walk-in of the same person (same ordering key) find the one added; an
            add sent by a delivery that died, or by another member before a delivery that
            is not first, is waited out (40 s, eto-add-in-doubt) before a redelivery adds. Publishes eto.participant.created (created false when found).

            Voids (checkin.voided, same group): the check-in's response (as remembered)
            is deleted and eto.response.voided published (action
            deleted); a void that finds no response is remembered (never-recorded)
            and the check-in, if it comes later, is not recorded.

            Service `eto` (read-only; kiosks may call it): sites.list, programs.list
            {site_id}, participants.search {site_id, program_id, first_name, last_name,
            date_of_birth?}, participant.get {site_id, participant_id}, participants.list
            {site_id, program_id?, since?, after?, limit?} (a roster in pages, `next` and
            `mark`; protocol section 16.2).

            It holds no password: each site's session comes from the auth service
            (token.get for backend eto, --account, scope = the site id), kept in this
            worker's cache until ETO rejects it. ETO's log-in page in answer to a write
            never makes the write go twice: the worker looks first.

            The TouchPoint configuration (--touchpoint FILE, JSON); without it, the
            seed's "Shelter Check-In":

            \(WorkerConfigurationFile.example(ETOTouchPointConfiguration.default))

            Element types: 5 (text) and 9 (date, MM/dd/yyyy, the day in time_zone).
            Sources as in switchboard-filemaker --help.

            SIGTERM or SIGINT: take no new work, finish what is in hand, leave the group,
            stop serving, exit.
            """, version: SwitchboardVersion.current)

    @OptionGroup var worker: WorkerOptions
    @Option(help: "ETO's API root, ending in /API (default \(ETOConfiguration.defaultURL)).") var url: String?
    @Option(
        help:
            "The ETO account (e-mail) whose sessions auth hands out (auth holds its password; default \(ETOConfiguration.defaultAccount)).")
    var account: String?
    @Option(help: "The TouchPoint configuration file (JSON, shown above; default: TouchPoint 54 of the seed).") var touchpoint: String?
    @Option(help: "Service requests answered at once, 1–64 (default \(ETOConfiguration.defaultConcurrency)).") var concurrency: String?
    @Flag(name: .customLong("no-service"), help: "Record check-ins only; do not serve `eto` on the service plane.") var noService = false
    @Flag(name: .customLong("no-group"), help: "Serve `eto` only; do not join the group `eto`.") var noGroup = false

    func run() async throws {
        let settings: ETOConfiguration
        do {
            let configuration = try ETOConfiguration.programConfiguration(
                arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
            settings = try configuration.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader)
                return try ETOConfiguration(reader: reader)
            }
        } catch {
            throw ValidationError(error.description)
        }
        let (url, account, touchpoint, concurrency, noService, noGroup) = (
            settings.url, settings.account, settings.touchpointPath, settings.concurrency, settings.noService, settings.noGroup
        )
        let logger = Logger(label: "eto")
        let configuration: ETOTouchPointConfiguration
        let runtime: WorkerRuntime
        do throws(WorkerConfigurationError) {
            if let path = touchpoint {
                configuration = try ETOTouchPointConfiguration.load(path: path)
            } else {
                configuration = .default
            }
            runtime = try WorkerRuntime(service: "eto", settings: settings.worker, logger: logger)
        } catch {
            throw ValidationError(error.description)
        }
        let client = ETOClient(http: runtime.http, baseURL: url, logger: logger)
        let tokens = runtime.tokens
        let access = ETOSiteAccess(client: client) { site in tokens.etoSource(account: account, site: site) }

        let sso: @Sendable (ETO.SSOToken?) async throws -> (token: ETO.SSOToken, enterprise: String) = { refused in
            try await tokens.etoSSO(account: account, rejected: refused)
        }
        // One list of the enterprise's sites for both halves: no session for a site it lacks.
        let sites = ETOSites { try await ETOService.siteList(eto: access, sso: sso) }
        var services: [any Service] = []
        if !noService {
            let service = ETOService(eto: access, sso: sso, sites: sites, logger: logger)
            var workerSettings = ServiceWorker.Settings()
            workerSettings.concurrency = concurrency
            workerSettings.socketOptions = runtime.credentials?.socketOptions ?? []
            let serviceWorker = ServiceWorker(
                service: "eto", io: runtime.io, endpoint: settings.worker.endpoints.service, settings: workerSettings, logger: logger,
                handler: service.handle)
            services.append(ServiceWorkerService(worker: serviceWorker))
        }
        var groupConsumer: GroupConsumer?
        if !noGroup {
            let store: ETOCheckInStore
            do {
                store = try ETOCheckInStore(sharing: runtime.outbox, importing: runtime.dataDirectory, logger: logger)
            } catch {
                await runtime.close()
                throw ValidationError("cannot open the check-in memory in \(runtime.outbox.path): \(error)")
            }
            let consumer = runtime.consumer(topics: ETOCheckInRecorder.topics)
            groupConsumer = consumer
            let recorder = ETOCheckInRecorder(eto: access, configuration: configuration, sites: sites, store: store, logger: logger) {
                [runtime] event in
                try await runtime.publish(type: event.type, schema: event.schema, json: event.content, key: event.key)
            }
            services.append(
                WorkerStart.ReadyLog(
                    consumer: consumer, readiness: .init(environment: ProcessInfo.processInfo.environment), logger: logger))
            services.append(GroupWorker(consumer: consumer, handler: recorder, logger: logger))
        }
        logger.info(
            "eto worker starting",
            metadata: [
                "touchpoint": "\(configuration.touchPointID)", "group": "\(!noGroup)", "service": "\(!noService)",
                "data_dir": "\(runtime.dataDirectory)",
            ])
        try await runtime.run(services, name: "eto worker", consumer: groupConsumer)
    }
}
