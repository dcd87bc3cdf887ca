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
    @Option(help: "Where to serve /metrics and /health (HOST:PORT or none; default \(KioskConfiguration.defaultAdmin)).")
    var admin: String?

    func run() async throws {
        let kiosk = try options.load()
        let (outbox, logger) = try kiosk.open()
        // Said once the admin server has bound, so a taken port's error is not preceded by it.
        let started = "Kiosk \(kiosk.id): sending its outbox to \(kiosk.ingestEndpoint). Ctrl-C stops."
        try await KioskAdmin.run(kiosk: kiosk, outbox: outbox, logger: logger, recorder: nil) {
            print(started)
        }
        print("Kiosk stopped; \(try await outbox.counts().pending) check-ins waiting.")
    }
}

enum KioskAdmin {
    /// Runs the kiosk's services (admin server, delivery, and the recorder if any) as one
    /// ServiceGroup until SIGTERM or SIGINT, which stops them gracefully. `started` runs once the
    /// admin server listens (at once with no admin server).
    static func run(
        kiosk: Kiosk, outbox: Outbox, logger: Logger, recorder: CheckInTrickle?, started: @escaping @Sendable () -> Void = {}
    ) async throws {
        let (endpoint, settings, admin) = (kiosk.ingestEndpoint, kiosk.senderSettings, kiosk.settings.admin)
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
