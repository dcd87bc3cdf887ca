import CoreMetrics
import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import ZeroMQ

extension BrokerCore {
    /// Journals refusals as `security.refused` events (producer `broker`), and publishes them.
    /// Their `producer_seq` follows the clock (×1000), so it never repeats across restarts, even
    /// after retention removed the earlier ones.
    func journal(_ notices: [BrokerSecurity.Notice]) {
        var batch: [PendingEvent] = []
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for notice in notices {
            metrics.refusal(kind: notice.kind)
            brokerSeq = max(brokerSeq + 1, now * 1000)
            let header = EventHeader(
                type: "security.refused", producer: "broker", producerSeq: brokerSeq, schema: "security.refused/1", session: brokerSession)
            guard let raw = try? WireJSON.encode(header), case .object(let fields)? = JSONValue.parse(raw) else { continue }
            var content: [String: JSONValue] = [
                "kind": .string(notice.kind), "reason": .string(notice.reason), "time": .string(notice.time),
            ]
            if let principal = notice.principal { content["principal"] = .string(principal) }
            if let endpoint = notice.endpoint { content["endpoint"] = .string(endpoint) }
            if notice.suppressed > 0 { content["suppressed"] = .integer(Int64(notice.suppressed)) }
            var writer = JSONWriter()
            writer.value(.object(content))
            batch.append(
                PendingEvent(
                    header: header, headerFields: fields, rawHeader: raw, parent: Envelope.emptyObject, metadata: Envelope.emptyObject,
                    content: writer.data, receivedAt: now))
        }
        do {
            for (index, outcome) in try journal.append(batch).enumerated() {
                if case .stored(let busSeq, let stored) = outcome {
                    publish(busSeq: busSeq, header: stored, event: batch[index])
                }
            }
        } catch {
            logger.error("security events not journaled", metadata: ["events": "\(batch.count)", "error": "\(error)"])
        }
        broker.update {
            $0.head = journal.head
            $0.journalCount = journal.count
            $0.journalBytes = journal.storedBytes
        }
    }
}
