import CoreMetrics
import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import ZeroMQ

extension BrokerCore {
    /// Sends a journaled event to the fan-out's subscribers, when a subscription matches its
    /// type, and keeps it for the groups (`RecentEvents`). Called for every event journaled, in
    /// `bus_seq` order.
    /// - Returns: the event the groups' memory let go of for it, for the caller to free where it
    ///   costs the broker thread nothing.
    @discardableResult
    func publish(busSeq: Int64, header: Data, event: PendingEvent) -> RecentEvents.Entry? {
        let type = event.header.type
        let evicted = recentEvents.append(
            JournaledEvent(
                busSeq: busSeq, type: type, header: header, parent: event.parent, metadata: event.metadata, content: event.content),
            key: event.header.key)
        if topicFrame.type != type {
            let frame = Data(type.utf8)
            topicFrame = (type, frame, subscriptions.wants(frame), subscriptions.generation)
        } else if topicFrame.generation != subscriptions.generation {
            topicFrame.wanted = subscriptions.wants(topicFrame.frame)
            topicFrame.generation = subscriptions.generation
        }
        guard topicFrame.wanted else { return evicted }
        let frames = [topicFrame.frame, versionFrame, eventWordFrame, header, event.parent, event.metadata, event.content]
        do {
            try fanout.send(frames, dontWait: true)
        } catch {
            logger.warning("fan-out send failed", metadata: ["error": "\(error)"])
        }
        return evicted
    }

    func heartbeat() {
        let head = HeadHeader(head: journal.head, first: journal.first, broker: journal.brokerID)
        if let envelope = try? Envelope(command: .head, header: head) {
            _ = try? fanout.send([Data(Topic.head.utf8)] + envelope.frames(), dontWait: true)
        }
        // New subscribers learn where the stream stands from the welcome.
        if let frame = try? Self.welcome(journal: journal, configuration: configuration) {
            try? fanout.set(.xpubWelcomeMessage(frame))
        }
    }

    func drainSubscriptions() {
        // XPUB hands up (un)subscriptions; they must be read or they pile up in memory.
        while let message = try? fanout.receive(dontWait: true) {
            if let frame = message.frames.first, subscriptions.apply(frame) {
                let topic = String(decoding: frame.dropFirst(), as: UTF8.self)
                logger.debug(frame.first == 1 ? "subscribe" : "unsubscribe", metadata: ["topic": "\(topic)"])
            }
        }
        metrics.subscriptions.record(subscriptions.total)
    }
}
