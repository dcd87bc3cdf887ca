import Logging
import SwitchboardStorage

/// A run of failed writes to the journal (a full disk, a read-only file system), told to the log
/// once when it starts, every `repeatEvery` while it lasts, and once when writes succeed again,
/// with how long they failed and how many items (events NACKed, group writes kept) it affected:
/// what an operator needs, without a line per NACK while every producer resends every few seconds.
struct StorageOutage {
    static let repeatEvery: Duration = .seconds(10)

    /// The first line, repeated (with `for` and `count`) every `repeatEvery`.
    let failing: String
    /// The line when writes succeed again.
    let recovered: String
    private(set) var since: ContinuousClock.Instant?
    /// Items refused or kept since the outage started.
    private(set) var count = 0
    /// The latest failure of this outage (nil when there is none).
    private(set) var lastFault: StorageFault?
    private var nextLog: ContinuousClock.Instant?

    init(failing: String, recovered: String) {
        self.failing = failing
        self.recovered = recovered
    }

    /// A write of `count` items failed with `fault`.
    mutating func failed(
        _ fault: StorageFault, count: Int, at now: ContinuousClock.Instant, logger: Logger, metadata extra: Logger.Metadata = [:]
    ) {
        self.count += count
        lastFault = fault
        var metadata: Logger.Metadata = [
            "cause": "\(fault.cause.rawValue)", "detail": "\(fault.detail)", "path": "\(fault.path)", "items": "\(count)",
        ]
        metadata.merge(extra) { $1 }
        guard let since else {
            self.since = now
            nextLog = now + Self.repeatEvery
            logger.error("\(failing)", metadata: metadata)
            return
        }
        guard let due = nextLog, now >= due else { return }
        nextLog = now + Self.repeatEvery
        metadata["for"] = "\(Self.seconds(since.duration(to: now)))"
        metadata["total"] = "\(self.count)"
        logger.error("\(failing)", metadata: metadata)
    }

    /// A write succeeded: the end of the outage, if there was one.
    mutating func succeeded(at now: ContinuousClock.Instant, logger: Logger) {
        guard let since else { return }
        logger.notice("\(recovered)", metadata: ["after": "\(Self.seconds(since.duration(to: now)))", "total": "\(count)"])
        self.since = nil
        self.count = 0
        lastFault = nil
        nextLog = nil
    }

    static func seconds(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return "\(milliseconds / 1000).\(milliseconds % 1000 / 100)s"
    }
}
