// The kiosk as a long-running program (`serve`, and `demo`): it keeps sending its outbox,
// reports its depth and last delivery to the broker in HEARTBEATs, and serves /metrics and
// /health on its admin address, so an operator sees a kiosk that records but cannot deliver.
// The services and their shutdown order are SwitchboardKiosk's `KioskServices`.

import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardKiosk
import SwitchboardObservability
import SwitchboardRuntime

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Keep sending what the outbox holds (check-ins recorded by `checkin` and `import`) until interrupted.",
        discussion: """
            What a kiosk machine runs in the background: `checkin` and `import --wait 0s` save
            check-ins in the outbox; this sends them whenever the broker can be reached, tells
            the broker every few seconds how many are waiting, and serves /metrics and
            /health/ready (ready: the broker answers) on --admin.
            """)

    @OptionGroup var options: KioskOptions
    @Option(help: "Where to serve /metrics and /health (HOST:PORT or none; default 127.0.0.1:9561).")
    var admin: String?

    func validate() throws {
        _ = try KioskAdmin.address(options: options)
    }

    func run() async throws {
        let address = try KioskAdmin.address(options: options)
        let (outbox, logger) = try options.open()
        // Said once the admin server has bound, so a taken port's error is not preceded by it.
        let started = "Kiosk \(try options.kioskID): sending its outbox to \(try options.ingestEndpoint). Ctrl-C stops."
        try await KioskAdmin.run(options: options, outbox: outbox, logger: logger, admin: address, recorder: nil) {
            print(started)
        }
        print("Kiosk stopped; \(try await outbox.counts().pending) check-ins waiting.")
    }
}

enum KioskAdmin {
    static func address(options: KioskOptions) throws -> AdminAddress? {
        let settings = try options.settings()
        do {
            let admin = try settings.configuration.read { reader in try reader.nonEmpty("admin") }
            return try AdminAddress.resolve(admin, defaultPort: AdminPort.kiosk.defaultPort)
        } catch let failure as AdminAddress.Failure {
            throw ValidationError(failure.description)
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// Runs the kiosk's services (admin server, delivery, and the recorder if any) as one
    /// ServiceGroup until SIGTERM or SIGINT, which stops them gracefully. `started` runs once the
    /// admin server listens (at once with no admin server).
    static func run(
        options: KioskOptions, outbox: Outbox, logger: Logger, admin: AdminAddress?, recorder: CheckInTrickle?,
        started: @escaping @Sendable () -> Void = {}
    ) async throws {
        let (endpoint, settings) = (try options.ingestEndpoint, try options.senderSettings)
        try await ProcessRuntime.run(program: "kiosk", logger: logger) { runtime in
            runtime.maximumGracefulShutdownDuration = KioskServices.shutdownDeadline
            let io = try runtime.ioThread()
            let services = KioskServices(
                io: io, outbox: outbox, endpoint: endpoint, settings: settings, admin: admin,
                observability: Observability.bootstrap(program: "switchboard-kiosk"), recorder: recorder, logger: logger,
                onListening: { _ in started() })
            runtime.add(services.configurations)
            if admin == nil { started() }
            // Ready: the outbox is open, so check-ins are kept whether or not the broker answers.
            ServiceReadiness.notify(.ready, environment: ProcessInfo.processInfo.environment)
        }
    }
}
