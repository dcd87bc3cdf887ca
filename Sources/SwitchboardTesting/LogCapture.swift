public import Logging
import Synchronization

/// Keeps every log line (level, message and metadata) in memory, so a test can search what a
/// run logged, for secrets above all.
public final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    public func append(_ line: String) { lines.withLock { $0.append(line) } }

    public var all: [String] { lines.withLock { $0 } }

    /// A logger at trace level that writes here.
    public var logger: Logger {
        var logger = Logger(label: "capture") { _ in CapturingHandler(capture: self) }
        logger.logLevel = .trace
        return logger
    }

    /// Lines that contain any of `needles` (empty needles are ignored).
    public func lines(containing needles: [String]) -> [String] {
        let wanted = needles.filter { !$0.isEmpty }
        return all.filter { line in wanted.contains { line.contains($0) } }
    }

    struct CapturingHandler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            capture.append("\(event.level) \(event.message) \(merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })")
        }
    }
}
