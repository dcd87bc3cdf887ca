import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import ZeroMQ

extension BrokerCore {

    /// Runs retention for up to 100 ms, a chunk at a time; returns true when it had to stop
    /// with more to delete (it then runs again soon, so retention keeps up with ingest).
    ///
    /// Age never deletes what a consumer group has not settled (events above the lowest group
    /// cursor stay, however old); size does, because a full disk stops every producer. A group
    /// that loses events that way is told in the log when it reads past them.
    func retention() -> Bool {
        let protected = groups.groups.values.map { $0.state.cursor }.min()
        let olderThan = configuration.retentionMaxAge.map { Int64(Date().timeIntervalSince1970 * 1000) - $0.milliseconds }
        let chunk = 10_000
        let started = ContinuousClock.now
        var deleted = 0
        var last = 0
        do {
            repeat {
                last = try journal.prune(
                    olderThan: olderThan, maxBytes: configuration.retentionMaxBytes, chunk: chunk, keepingAbove: protected)
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
