// The kiosk as a long-running program (`serve`, and `demo`): it keeps sending its outbox,
// reports its depth and last delivery to the broker in HEARTBEATs, and serves /metrics and
// /health on its admin address, so an operator sees a kiosk that records but cannot deliver.

import ArgumentParser
import Foundation
import Logging
import SwitchboardBus
import SwitchboardObservability
import SwitchboardRuntime
import SwitchboardSecurity
import ZeroMQ

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
    @Option(help: "Where to serve /metrics and /health (HOST:PORT or none; default 127.0.0.1:9561, or SWITCHBOARD_ADMIN).")
    var admin: String?

    func validate() throws {
        _ = try KioskAdmin.address(admin)
    }

    func run() async throws {
        let address = try KioskAdmin.address(admin)
        let (outbox, logger) = try options.open()
        print("Kiosk \(options.kioskID): sending its outbox to \(options.ingestEndpoint). Ctrl-C stops.")
        _ = try await untilInterrupted {
            try await KioskAdmin.deliverForever(options: options, outbox: outbox, logger: logger, admin: address)
        }
        print("Kiosk stopped; \(try await outbox.counts().pending) check-ins waiting.")
    }
}

enum KioskAdmin {
    static func address(_ option: String?) throws -> AdminAddress? {
        do {
            return try AdminAddress.resolve(option, defaultPort: 9561)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// Sends the outbox until cancelled, with the admin server beside it.
    static func deliverForever(options: KioskOptions, outbox: Outbox, logger: Logger, admin: AdminAddress?) async throws {
        let observability = Observability.bootstrap(program: "switchboard-kiosk")
        let context = try Context()
        let io = try IOThread(context: context)
        var settings = OutboxSender.Settings()
        settings.socketOptions = options.credentials?.socketOptions ?? []
        let sender = OutboxSender(
            outbox: outbox, io: io, endpoint: options.ingestEndpoint, settings: settings, logger: logger, metrics: observability.factory)
        var readiness = Readiness()
        readiness.add("broker") { sender.isConnected }
        // What the outbox has held over its life (waiting, refused and delivered), which other
        // kiosk commands add to.
        let recorded = TotalCounter(label: "switchboard_kiosk_checkins_total", factory: observability.factory)
        let server = observability.adminServer(
            at: admin, readiness: readiness,
            collectors: [
                { await sender.updateDepth() },
                { if let counts = try? await outbox.counts() { recorded.update(total: Double(counts.pending + counts.rejected) + Double(counts.delivered)) } },
            ], logger: logger)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await sender.deliver(keepWaiting: { true }) }
                // Cancelled with the delivery at Ctrl-C (the kiosk has no service group yet).
                if let server { group.addTask { try await server.run() } }
                try await group.next()
                group.cancelAll()
            }
        } catch {
            await io.shutdown()
            await context.terminate()
            throw error
        }
        await io.shutdown()
        await context.terminate()
    }
}
