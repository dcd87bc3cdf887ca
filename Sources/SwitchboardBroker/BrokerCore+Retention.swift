import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import ZeroMQ

extension BrokerCore {

    /// Runs retention for up to 100 ms, a chunk at a time; returns true when it had to stop
    /// with more to delete (it then runs again soon, so retention keeps up with ingest).
    func retention() -> Bool {
        let olderThan = configuration.retentionMaxAge.map { Int64(Date().timeIntervalSince1970 * 1000) - $0.milliseconds }
        let chunk = 10_000
        let started = ContinuousClock.now
        var deleted = 0
        var last = 0
        do {
            repeat {
                last = try journal.prune(olderThan: olderThan, maxBytes: configuration.retentionMaxBytes, chunk: chunk)
                deleted += last
            } while last == chunk && started.duration(to: .now) < .milliseconds(100)
        } catch {
            logger.error("retention failed", metadata: ["error": "\(error)"])
        }
        if deleted > 0 {
            logger.info(
                "retention deleted events",
                metadata: ["deleted": "\(deleted)", "first": "\(journal.first)", "head": "\(journal.head)"])
            broker.update {
                $0.pruned += Int64(deleted)
                $0.first = journal.first
                $0.journalCount = journal.count
                $0.journalBytes = journal.storedBytes
            }
        }
        return last == chunk
    }
}
