// How one program is put together. Every long-running program of ours is the same shape: a
// logger, its parts built from its settings (some of which hold a thread, a socket or a file
// that must be released), its services in start order, and one ServiceGroup that runs them
// until SIGTERM or SIGINT drains them in reverse. `ProcessRuntime` is that shape written once,
// so no program hand-assembles its group or its teardown, and a failure at any step (a start-up
// step that throws, a service that fails, a cancelled group) releases what was made.
//
// This part knows nothing of ZeroMQ or of the admin server, because SwitchboardRuntime sits
// below both (SwitchboardStorage, SwitchboardSecurity and the broker depend on it); the I/O
// thread is added by SwitchboardBus's `ioThread()` and the admin server by
// SwitchboardObservability's `serveAdmin`, each where its dependencies already are.

public import Logging
public import ServiceLifecycle
public import UnixSignals

/// One process's services, what they hold, and the `ServiceGroup` that runs them.
///
/// Services start in the order they were added; graceful shutdown goes in reverse, so what
/// others use (the I/O thread) is added first and stops last. Whatever a part must release even
/// if its service never ran is registered with `own` or `onExit`; `run` and `assemble` release
/// it in reverse order on every way out.
public struct ProcessRuntime: Sendable {
    /// The program's name, for the log.
    public let program: String
    public let logger: Logger
    /// Signals that start a graceful shutdown.
    public var gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint]
    /// How long graceful shutdown may take before what is left is cancelled; nil: no limit.
    /// Keep it under what a supervisor grants before SIGKILL (`switchboard up` and systemd: 10 s).
    public var maximumGracefulShutdownDuration: Duration?
    /// The services in start order.
    public private(set) var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
    private var releases: [@Sendable () async -> Void] = []

    public init(program: String, logger: Logger) {
        self.program = program
        self.logger = logger
    }

    /// Adds a service after those added so far.
    /// - Parameter onFailure: what its throwing does to the group (cancel it, by default).
    public mutating func add(
        _ service: any Service, name: String? = nil,
        onFailure: ServiceGroupConfiguration.ServiceConfiguration.TerminationBehavior = .cancelGroup
    ) {
        if let name {
            services.append(.init(service: service, failureTerminationBehavior: onFailure, serviceName: name))
        } else {
            services.append(.init(service: service, failureTerminationBehavior: onFailure))
        }
    }

    /// Adds services configured elsewhere (a library's list of its services in order).
    public mutating func add(_ configurations: [ServiceGroupConfiguration.ServiceConfiguration]) {
        services += configurations
    }

    /// Adds `service` and registers `release`, which runs when the process ends however it
    /// ends, even if the service never ran (a later start-up step threw). `release` must be
    /// safe to call after the service's own `run()` released the same thing.
    public mutating func own<Owned: Service>(
        _ service: Owned, name: String? = nil, release: @escaping @Sendable (Owned) async -> Void
    ) -> Owned {
        add(service, name: name)
        releases.append { await release(service) }
        return service
    }

    /// Registers something to release when the process ends (an HTTP client, a client's socket):
    /// after the group, in the reverse order of registration.
    public mutating func onExit(_ release: @escaping @Sendable () async -> Void) {
        releases.append(release)
    }

    /// Runs the services in one `ServiceGroup` until they end (graceful shutdown on the
    /// signals, a failure, or cancellation), then releases everything registered, and rethrows
    /// the group's error if it had one.
    public func run() async throws {
        var configuration = ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: gracefulShutdownSignals, logger: logger)
        configuration.maximumGracefulShutdownDuration = maximumGracefulShutdownDuration
        do {
            try await ServiceGroup(configuration: configuration).run()
        } catch {
            logger.error("\(program) failed", metadata: ["error": "\(error)"])
            await release()
            throw error
        }
        await release()
        logger.info("\(program) stopped")
    }

    /// Releases what was registered, newest first. `run` calls it; call it yourself only for a
    /// runtime you will not run.
    public func release() async {
        for release in releases.reversed() { await release() }
    }

    /// Builds a runtime with `build` and runs it; if `build` throws, what it had registered is
    /// released before the error goes on. The one entry point of every long-running program.
    public static func run(
        program: String, logger: Logger, _ build: (inout ProcessRuntime) async throws -> Void
    ) async throws {
        var runtime = ProcessRuntime(program: program, logger: logger)
        do {
            try await build(&runtime)
        } catch {
            await runtime.release()
            throw error
        }
        try await runtime.run()
    }
}
