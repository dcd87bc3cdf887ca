public import SwitchboardRuntime

extension ProcessRuntime {
    /// Adds the admin server (`/metrics`, `/health/live`, `/health/ready`) at `address` with
    /// `readiness`, on the program's metrics registry; nothing with `--admin none` (nil).
    /// Added where it is called: first, it answers until every other service has stopped; last,
    /// it stops first.
    public mutating func serveAdmin(
        at address: AdminAddress?, observability: Observability, readiness: Readiness, collectors: [AdminServer.Collector] = [],
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        guard
            let server = observability.adminServer(
                at: address, readiness: readiness, collectors: collectors, logger: logger, onListening: onListening)
        else { return }
        add(server, name: "admin")
    }
}
