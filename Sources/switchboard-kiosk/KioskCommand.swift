import ArgumentParser
import Configuration
import Foundation
import Logging
import SwitchboardBus
import SwitchboardDesk
import SwitchboardKiosk
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardSecurity
import SwitchboardStorage
import ZeroMQ

@main
struct KioskCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switchboard-kiosk",
        abstract: "Record check-ins at a shelter kiosk; they are kept on this machine until the broker has them.",
        discussion: """
            Every check-in is saved in the kiosk's outbox before anything is sent, and stays
            there until the broker confirms it is on disk; a later run sends whatever is waiting.
            `lookup` and `sites` ask ETO through the service `eto` (switchboard-eto); `checkin`
            asks it for the participant id when given a name, and records by name when ETO does
            not answer in time or finds no single match.
            Settings come from, in rising order: defaults, a JSON file (--config FILE or
            SWITCHBOARD_CONFIG: its "kiosk" section, then the shared keys at its top), the
            environment (SWITCHBOARD_KIOSK_<KEY>, then SWITCHBOARD_<KEY> for the shared keys:
            SWITCHBOARD_BROKER_HOST, SWITCHBOARD_INGEST, SWITCHBOARD_SERVICE,
            SWITCHBOARD_CERTIFICATE, SWITCHBOARD_BROKER_KEY, SWITCHBOARD_ADMIN,
            SWITCHBOARD_LOG_FORMAT, SWITCHBOARD_LOG_LEVEL), flags. Key a.b_c is the flag --a-b-c
            and SWITCHBOARD_KIOSK_A_B_C. Keys: \(KioskOptions.keys.joined(separator: ", ")).
            The broker's ingest and service endpoints, each: its flag (--ingest, --service), else
            the environment, else the file, else --broker-host's (flag, environment, file) at the
            default port, else what a local broker wrote to <data-dir>/broker/endpoints.json (so
            beside `switchboard up --port N` no endpoint need be given), else 127.0.0.1 at the
            default port: the operator commands' order.
            """,
        version: SwitchboardVersion.current,
        subcommands: [
            CheckInCommand.self, LookupCommand.self, SitesCommand.self, ImportCommand.self, LoadCommand.self, FlushCommand.self,
            StatusCommand.self, DemoCommand.self, ServeCommand.self, DeskCommand.self, DeskUserCommand.self,
        ])
}

/// Options every kiosk command shares. Each is a key of the kiosk's configuration
/// (`KioskConfiguration`; `broker_host` is `--broker-host`), read through its `ConfigReader`,
/// where a flag is the top source; they are declared for `--help` and to refuse a misspelt flag.
///
/// The reader is built once per run, by `load()` at the start of `run()`, not in `validate()`:
/// ArgumentParser hands `run()` only the parsed arguments, so what `validate()` read would be
/// read again (and a file changed in between read differently).
struct KioskOptions: ParsableArguments {
    @Option(help: "A JSON configuration file (or SWITCHBOARD_CONFIG): its \"kiosk\" section, and the shared keys at its top.")
    var config: String?
    @Option(help: "This kiosk's id (the producer name), e.g. riverside-1 (default: the certificate's name, else kiosk-<host>).")
    var id: String?
    @Option(
        name: .customLong("broker-host"), help: "The broker's host name or address: its endpoints at the default ports (default 127.0.0.1)."
    )
    var brokerHost: String?
    @Option(help: "The broker's ingest endpoint (default tcp://<broker-host>:5560).") var ingest: String?
    @Option(help: "The broker's service endpoint, for the `eto` service (lookups; default tcp://<broker-host>:5563).")
    var service: String?
    @Option(help: "The outbox file (default <data-dir>/kiosk/<id>/outbox.sqlite).") var outbox: String?
    @Option(
        name: .customLong("data-dir"),
        help:
            "Where `switchboard up` keeps its state: the endpoints its broker wrote (broker/endpoints.json), and the default outbox (default \(KioskConfiguration.defaultDataDirectory))."
    )
    var dataDir: String?
    @Option(name: .customLong("log-format"), help: "text or json, for diagnostics on standard error (default text).")
    var logFormat: String?
    @Option(name: .customLong("log-level"), help: "Log level for diagnostics on standard error (default warning).") var logLevel: String?
    @Option(help: "This kiosk's secret certificate, for a broker that runs CURVE (default: none).") var certificate: String?
    @Option(name: .customLong("broker-key"), help: "The broker's .cert file or public key (default: none).") var brokerKey: String?

    /// Every key of the kiosk program: the kiosk's and the desk's.
    static var keys: [String] { KioskConfiguration.keys + DeskConfiguration.keys }

    /// Reads the kiosk's configuration and sets up logging (default level warning).
    func load() throws -> Kiosk {
        do {
            let program = try KioskConfiguration.programConfiguration(
                arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment, adding: DeskConfiguration.keys)
            let settings = try program.read { reader in
                try StructuredLogHandler.bootstrap(reader: reader, defaultLevel: .warning)
                return try KioskConfiguration(reader: reader)
            }
            return Kiosk(program: program, settings: settings)
        } catch {
            // A certificate that cannot be read comes here too, as the reader's failure.
            throw ValidationError(error.description)
        }
    }
}

/// One run of a kiosk command: its settings, read once, and what the commands do with them.
struct Kiosk: Sendable {
    /// The program's configuration, for a command's own keys (the desk's).
    var program: ProgramConfiguration
    var settings: KioskConfiguration

    var id: String { settings.id }
    var ingestEndpoint: String { settings.connection.endpoints.ingest }

    /// Runs `body` with the `eto` service's client on this kiosk's credentials, then closes it.
    func withLookup<T: Sendable>(_ body: (ETOLookup) async throws -> T) async throws -> T {
        let connection = settings.connection
        return try await IOThread.withIOThread { io in
            var clientSettings = ServiceClient.Settings()
            clientSettings.socketOptions = connection.socketOptions
            let client = ServiceClient(
                io: io, endpoint: connection.endpoints.service, settings: clientSettings, logger: Logger(label: "kiosk.lookup"))
            do {
                let result = try await body(ETOLookup(client: client))
                await client.close()
                return result
            } catch {
                await client.close()
                throw error
            }
        }
    }

    func open() throws -> (Outbox, Logger) {
        var logger = Logger(label: "kiosk")
        logger[metadataKey: "kiosk"] = "\(settings.id)"
        do {
            return (try Outbox(path: settings.outboxPath, producer: settings.id), logger)
        } catch let fault as StorageFault {
            throw KioskFailure("cannot open the outbox \(settings.outboxPath): \(fault.summary)")
        } catch {
            throw KioskFailure("cannot open the outbox \(settings.outboxPath): \(error)")
        }
    }

    /// What `record` saved, and where.
    struct Recorded {
        var outbox: Outbox
        var logger: Logger
        var entries: [OutboxEntry]
    }

    /// Opens the outbox and saves `events` in it (all or none), or says loudly that nothing was
    /// saved and why: a full or read-only disk under the outbox is the person's to know.
    /// - Parameter what: what was not saved, for the message ("The check-in was").
    func record(
        _ events: [Outbox.NewEvent], _ what: String, importDigest: (digest: String, name: String)? = nil
    ) async throws
        -> Recorded
    {
        let (it, again) = events.count == 1 ? ("it", "record it again") : ("them", "record them again")
        let opened: (Outbox, Logger)
        do {
            opened = try open()
        } catch let failure as KioskFailure {
            throw KioskFailure("\(what) NOT recorded: \(failure.description). Nothing was saved; \(again) once that is fixed.")
        }
        do {
            let entries = try await opened.0.enqueue(events, importDigest: importDigest)
            return Recorded(outbox: opened.0, logger: opened.1, entries: entries)
        } catch let fault as StorageFault {
            throw KioskFailure(
                "\(what) NOT recorded: the outbox \(settings.outboxPath) could not save \(it): \(fault.summary). Nothing was saved; \(again) once that is fixed."
            )
        }
    }

    /// The sender's settings: this kiosk's CURVE keys, when given.
    var senderSettings: OutboxSender.Settings {
        var sender = OutboxSender.Settings()
        sender.socketOptions = settings.connection.socketOptions
        return sender
    }

    /// Delivers what is waiting, for at most `wait`, showing progress (`ProgressLine`) of
    /// `total` (default: what waits now).
    func deliver(
        _ outbox: Outbox, logger: Logger, wait: Duration, total: Int? = nil, keepWaiting: @escaping @Sendable () -> Bool = { false }
    ) async throws -> DeliveryReport {
        let before = try await outbox.counts()
        let line = ProgressLine(verb: "delivered", total: total ?? before.pending)
        let (endpoint, sender) = (ingestEndpoint, senderSettings)
        return try await ProgressWatch.run(
            line, done: { Int(((try? await outbox.counts())?.delivered ?? before.delivered) - before.delivered) },
            final: { $0.delivered + $0.duplicates }
        ) {
            try await KioskDelivery.deliver(
                outbox, endpoint: endpoint, settings: sender, within: wait, keepWaiting: keepWaiting, logger: logger)
        }
    }

    /// Tells the person how delivery went.
    func tell(_ report: DeliveryReport, wait: Duration) {
        for line in report.summary(endpoint: ingestEndpoint, wait: wait) { print(line) }
    }
}

/// A command that could not do its work (not a wrong option): "Error: …" and exit status 1,
/// without the usage text that a `ValidationError` adds.
struct KioskFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func parseWait(_ text: String) throws -> Duration {
    guard let duration = DurationText.parse(text) else { throw ValidationError("--wait: '\(text)' is not a duration like 5s or 2m") }
    return duration
}

struct CheckInCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkin", abstract: "Record one check-in and send it.")

    @OptionGroup var options: KioskOptions
    @Option(help: "First name.") var first: String?
    @Option(help: "Last name.") var last: String?
    @Option(help: "Date of birth, YYYY-MM-DD (strongly advised with a name).") var dob: String?
    @Option(name: .customLong("participant-id"), help: "ETO participant id, when known.") var participantID: String?
    @Option(help: "ETO site id.") var site: String?
    @Option(help: "ETO program id.") var program: String?
    // `.unconditional`: a western longitude or southern latitude starts with '-', which would
    // otherwise read as the next option (`--longitude -122.4` would be "missing value").
    @Option(parsing: .unconditional, help: "Latitude (street outreach).") var latitude: String?
    @Option(parsing: .unconditional, help: "Longitude (street outreach).") var longitude: String?
    @Option(help: "Location accuracy in metres.") var accuracy: String?
    @Option(help: "Notes (at most 2000 characters).") var notes: String?
    @Option(help: "How long to try sending now, e.g. 5s.") var wait: String = "5s"
    @Option(
        name: .customLong("lookup-wait"),
        help: "How long to wait for ETO's participant id when given a name (0s: do not ask); offline, the check-in is recorded by name.")
    var lookupWait: String = "2s"

    func run() async throws {
        let wait = try parseWait(wait)
        let kiosk = try options.load()
        let values: [String: String] = [
            "first_name": first, "last_name": last, "date_of_birth": dob, "eto_participant_id": participantID,
            "site_id": site, "program_id": program, "latitude": latitude, "longitude": longitude,
            "accuracy_m": accuracy, "notes": notes,
        ].compactMapValues { $0 }
        let flags = [
            "first_name": "--first", "last_name": "--last", "date_of_birth": "--dob", "eto_participant_id": "--participant-id",
            "site_id": "--site", "program_id": "--program", "latitude": "--latitude", "longitude": "--longitude",
            "accuracy_m": "--accuracy", "notes": "--notes", "checked_in_at": "time",
        ]
        var checkIn: CheckIn
        let kioskID = kiosk.id
        do {
            checkIn = try CheckInForm.make(values, kioskID: kioskID) { flags[$0] ?? $0 }
        } catch {
            throw ValidationError(error.description)
        }
        let lookupWait = try parseWait(self.lookupWait)
        if lookupWait > .zero, let query = ParticipantMatch.query(for: checkIn) {
            let found: Result<[ETOServiceContent.Participant], ETOLookup.Failure> = try await kiosk.withLookup { lookup in
                do throws(ETOLookup.Failure) { return .success(try await lookup.search(query, timeout: lookupWait)) } catch {
                    return .failure(error)
                }
            }
            print(ParticipantMatch.apply(found, to: &checkIn))
        }
        let recorded = try await kiosk.record([.checkIn(checkIn)], "The check-in was")
        let (outbox, logger, entry) = (recorded.outbox, recorded.logger, recorded.entries[0])
        print(
            "Queued check-in for \(checkIn.summary(showingPersonalData: false)) (event \(entry.eventID)). \(try await outbox.counts().pending) waiting to send."
        )
        let report = try await kiosk.deliver(outbox, logger: logger, wait: wait)
        kiosk.tell(report, wait: wait)
    }
}

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Record check-ins from a CSV file: all rows or none.",
        discussion:
            "The first row names the columns: \(CheckInForm.columns.joined(separator: ", ")). A file is imported once; importing it again is refused."
    )

    @OptionGroup var options: KioskOptions
    @Argument(help: "The CSV file.") var file: String
    @Option(help: "How long to try sending now, e.g. 30s.") var wait: String = "30s"

    func run() async throws {
        let wait = try parseWait(wait)
        let kiosk = try options.load()
        let csv: CheckInImport
        do {
            csv = try CheckInImport(path: file, kioskID: kiosk.id)
        } catch {
            throw ValidationError("\(error)")
        }
        let recorded: Kiosk.Recorded
        do {
            recorded = try await kiosk.record(
                csv.events, "The \(csv.events.count) check-ins of \(file) were", importDigest: csv.importDigest)
        } catch let failure as Outbox.Failure {
            throw ValidationError("\(file): \(failure.description)")
        }
        let (outbox, logger) = (recorded.outbox, recorded.logger)
        print("Queued \(csv.events.count) check-ins from \(file). \(try await outbox.counts().pending) waiting to send.")
        let report = try await kiosk.deliver(outbox, logger: logger, wait: wait)
        kiosk.tell(report, wait: wait)
    }
}

struct FlushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "flush", abstract: "Send every check-in still waiting.")

    @OptionGroup var options: KioskOptions
    @Option(help: "How long to keep trying, e.g. 60s.") var wait: String = "30s"

    func run() async throws {
        let wait = try parseWait(wait)
        let kiosk = try options.load()
        let (outbox, logger) = try kiosk.open()
        print("\(try await outbox.counts().pending) check-ins waiting to send.")
        let report = try await kiosk.deliver(outbox, logger: logger, wait: wait)
        kiosk.tell(report, wait: wait)
        if report.pending > 0 { throw ExitCode(3) }
    }
}

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show what the outbox holds.")

    @OptionGroup var options: KioskOptions

    func run() async throws {
        let kiosk = try options.load()
        let (outbox, _) = try kiosk.open()
        let counts = try await outbox.counts()
        print("kiosk \(kiosk.id), outbox \(kiosk.settings.outboxPath)")
        print("waiting: \(counts.pending)   refused: \(counts.rejected)   delivered so far: \(counts.delivered)")
        for rejection in try await outbox.rejected().prefix(50) {
            let (entry, reason) = (rejection.entry, rejection.reason)
            print("refused #\(entry.producerSeq) event \(entry.eventID): \(reason)")
        }
    }
}

struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load", abstract: "Check in a roster's people at a rate, through the outbox, and deliver them.",
        discussion: """
            For measuring the system end to end. The people come from --roster (CSV: \
            first_name, last_name, date_of_birth, site_id, program_id; default \
            \(LoadCommand.demoRoster) when `switchboard up` wrote it), so every check-in \
            matches a participant and reaches FileMaker and ETO. --unmatched-rate names \
            made-up people instead for that share of them: ETO matches none, and each \
            becomes a participant-unmatched dead letter, on purpose. Without a roster every \
            check-in names a made-up person at --site and --program, or at the sites and \
            programs the eto service lists.
            """)

    /// The roster `switchboard up` writes for its demo kiosk: the emulator seed's participants.
    static let demoRoster = ".switchboard/kiosk/roster.csv"

    @OptionGroup var options: KioskOptions
    @Option(help: "Check-ins per second (0: as fast as possible).") var rate: Double = 100
    @Option(help: "How many check-ins to generate.") var count: Int = 1000
    @Option(help: "After generating, how long to keep trying to deliver, e.g. 60s.") var wait: String = "60s"
    @Option(help: "The people to check in (CSV, as import takes; default \(LoadCommand.demoRoster) if it exists).") var roster: String?
    @Option(help: "The site of made-up people's check-ins (with --program; default: the roster's, else every site the eto service lists).")
    var site: Int64?
    @Option(help: "Their program (with --site).") var program: Int64?
    @Option(name: .customLong("unmatched-rate"), help: "The share (0–1) of check-ins that name a made-up person: deliberate dead letters.")
    var unmatchedRate: Double = 0

    func validate() throws {
        guard rate >= 0, rate.isFinite else { throw ValidationError("--rate must be 0 or more") }
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard (0...1).contains(unmatchedRate) else { throw ValidationError("--unmatched-rate must be from 0 to 1, got \(unmatchedRate)") }
        guard (site == nil) == (program == nil) else { throw ValidationError("give --site and --program together") }
        if let site, site < 1 { throw ValidationError("--site must be a positive ETO site id") }
        if let program, program < 1 { throw ValidationError("--program must be a positive ETO program id") }
    }

    /// The plan: the roster's people, at the given site and program, else the roster's, else
    /// ETO's (through the eto service).
    func plan(kiosk: Kiosk) async throws -> LoadPlan {
        let path = roster ?? (FileManager.default.fileExists(atPath: Self.demoRoster) ? Self.demoRoster : nil)
        let people: CheckInRoster?
        do {
            people = try path.map { try CheckInRoster(path: $0, kioskID: kiosk.id) }
        } catch {
            throw ValidationError("--roster: \(error)")
        }
        var targets: [LoadPlan.Target] = []
        if let site, let program {
            targets = [LoadPlan.Target(site: site, program: program)]
        } else if people == nil {
            targets = try await kiosk.withLookup { lookup in
                do throws(ETOLookup.Failure) {
                    var targets: [LoadPlan.Target] = []
                    for site in try await lookup.sites(timeout: .seconds(10)) {
                        for program in try await lookup.programs(site: site.siteID, timeout: .seconds(10)) {
                            targets.append(LoadPlan.Target(site: Int64(site.siteID), program: Int64(program.programID)))
                        }
                    }
                    return targets
                } catch {
                    throw ValidationError(
                        "cannot learn ETO's sites and programs from the eto service (\(error)); give --site and --program, or --roster")
                }
            }
        }
        do {
            let plan = try LoadPlan(targets: targets, roster: people, unmatchedRate: unmatchedRate)
            if let path {
                print(
                    "Checking in the \(people?.rows.count ?? 0) people of \(path)\(unmatchedRate > 0 ? ", and made-up people for \(unmatchedRate * 100)% of the check-ins" : "")."
                )
            } else {
                print(
                    "No roster: every check-in names a made-up person at \(plan.targets.count) site and program pair\(plan.targets.count == 1 ? "" : "s"), so ETO matches none of them (participant-unmatched dead letters); give --roster to check in real participants."
                )
            }
            return plan
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let wait = try parseWait(wait)
        let kiosk = try options.load()
        let kioskID = kiosk.id
        let plan = try await plan(kiosk: kiosk)
        let (outbox, logger) = try kiosk.open()
        let generator = LoadGenerator(outbox: outbox, kioskID: kioskID, pacing: LoadPacing(rate: rate, total: count), plan: plan)
        let start = ContinuousClock.now
        let report = try await withThrowingTaskGroup(of: DeliveryReport?.self) { group in
            group.addTask {
                try await generator.run()
                return nil
            }
            // Delivery may take as long as generating at the asked rate, then --wait more; with
            // the broker down the run still ends, and what is left stays in the outbox.
            group.addTask {
                try await kiosk.deliver(outbox, logger: logger, wait: generator.pacing.expectedDuration + wait, total: count) {
                    !generator.isFinished
                }
            }
            var final: DeliveryReport?
            for try await result in group where result != nil { final = result }
            return final
        }
        let seconds = Double(start.duration(to: .now).wholeMilliseconds) / 1000
        print(
            String(
                format: "Generated %d check-ins; delivered %d in %.2fs (%.0f/s).", count,
                (report?.delivered ?? 0) + (report?.duplicates ?? 0), seconds,
                Double((report?.delivered ?? 0) + (report?.duplicates ?? 0)) / max(seconds, 0.001)))
        if let report { kiosk.tell(report, wait: wait) }
    }
}

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo", abstract: "Send a trickle of realistic check-ins until interrupted (used by 'switchboard up').")

    @OptionGroup var options: KioskOptions
    @Option(help: "Time between check-ins, e.g. 2s.") var interval: String = "2s"
    @Option(
        help:
            "A CSV of people to check in, in turn (the columns of `import`; checked_in_at is now). Without it, made-up people who match no back end."
    )
    var roster: String?
    @Option(help: "Where to serve /metrics and /health (HOST:PORT or none; default \(KioskConfiguration.defaultAdmin)).")
    var admin: String?

    func run() async throws {
        guard let interval = DurationText.parse(interval), interval > .zero else {
            throw ValidationError("--interval: '\(interval)' is not a duration")
        }
        let kiosk = try options.load()
        let kioskID = kiosk.id
        let people: CheckInRoster?
        do {
            people = try roster.map { try CheckInRoster(path: $0, kioskID: kioskID) }
        } catch {
            throw ValidationError("--roster: \(error)")
        }
        let (outbox, logger) = try kiosk.open()
        print("Demo kiosk \(kioskID): one check-in every \(interval) to \(kiosk.ingestEndpoint). Ctrl-C stops.")
        let recorder = CheckInTrickle(outbox: outbox, kioskID: kioskID, interval: interval, roster: people)
        try await KioskAdmin.run(kiosk: kiosk, outbox: outbox, logger: logger, recorder: recorder)
        print("Demo kiosk stopped; \(try await outbox.counts().pending) check-ins waiting.")
    }
}

struct LookupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lookup", abstract: "Find a person in ETO by name and date of birth, through the eto service.")

    @OptionGroup var options: KioskOptions
    @Option(help: "First name.") var first: String
    @Option(help: "Last name.") var last: String
    @Option(help: "Date of birth, YYYY-MM-DD.") var dob: String?
    @Option(help: "ETO site id.") var site: Int
    @Option(help: "ETO program id.") var program: Int
    @Option(help: "How long to wait for an answer, e.g. 5s.") var wait: String = "5s"

    func validate() throws {
        if let dob, Timestamp.parseDate(dob) == nil { throw ValidationError("--dob: '\(dob)' is not a date YYYY-MM-DD") }
        guard site >= 1 else { throw ValidationError("--site must be a positive number") }
        guard program >= 1 else { throw ValidationError("--program must be a positive number") }
    }

    func run() async throws {
        let wait = try parseWait(wait)
        let kiosk = try options.load()
        let query = ETOServiceContent.SearchQuery(siteID: site, programID: program, firstName: first, lastName: last, dateOfBirth: dob)
        let matches = try await kiosk.withLookup { lookup in
            do throws(ETOLookup.Failure) { return try await lookup.search(query, timeout: wait) } catch {
                throw ValidationError(error.description)
            }
        }
        guard !matches.isEmpty else {
            // Not repeating the name: a kiosk's output may end in a log (an unattended import).
            print("No participant of program \(program) at site \(site) has that \(dob == nil ? "name" : "name and date of birth").")
            throw ExitCode(1)
        }
        for match in matches {
            print("participant \(match.participantID)  \(match.firstName) \(match.lastName)  born \(match.dateOfBirth ?? "-")")
        }
    }
}

struct SitesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sites", abstract: "List ETO's sites and their programs (disabled ones left out), through the eto service.")

    @OptionGroup var options: KioskOptions
    @Option(help: "How long to wait for each answer, e.g. 5s.") var wait: String = "5s"

    func run() async throws {
        let wait = try parseWait(wait)
        let kiosk = try options.load()
        let listing = try await kiosk.withLookup { lookup in
            do throws(ETOLookup.Failure) {
                var result: [(ETOServiceContent.Site, [ETOServiceContent.Program])] = []
                for site in try await lookup.sites(timeout: wait) {
                    result.append((site, try await lookup.programs(site: site.siteID, timeout: wait)))
                }
                return result
            } catch {
                throw ValidationError(error.description)
            }
        }
        for (site, programs) in listing {
            print("site \(site.siteID)  \(site.name)")
            for program in programs { print("  program \(program.programID)  \(program.name)") }
        }
    }
}
