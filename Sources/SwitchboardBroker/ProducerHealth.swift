// What the broker knows of each producer (a kiosk, a worker's outbox): when it was last heard,
// its last event, and what its HEARTBEATs report (outbox depth, last ACK received). Operators
// read it through `producers.list` (protocol/README.md, 15.6) and the producer metrics; it is
// how a silent kiosk with check-ins waiting is told from an idle one.
//
// Kept in memory only: after a restart the broker knows a producer again from its next
// HEARTBEAT (every few seconds) or EVENT. Bounded: past `limit` producers the one heard from
// longest ago is forgotten.

import Foundation

struct ProducerHealth: Sendable, Hashable {
    var lastSeen: Date
    var lastEvent: Date?
    /// From the producer's last HEARTBEAT: events waiting in its outbox.
    var outbox: Int64?
    /// From the producer's last HEARTBEAT: when it last received an ACK.
    var lastDelivery: Date?
}

struct ProducerTable {
    static let limit = 4096
    private(set) var entries: [String: ProducerHealth] = [:]
    /// Producers changed since the gauges were last set.
    private(set) var changed: Set<String> = []

    mutating func sawEvents(_ producer: String, at now: Date) {
        update(producer, at: now) { $0.lastEvent = now }
    }

    mutating func heartbeat(_ producer: String, outbox: Int64?, lastDelivery: Date?, at now: Date) {
        update(producer, at: now) { health in
            if let outbox { health.outbox = outbox }
            if let lastDelivery { health.lastDelivery = lastDelivery }
        }
    }

    private mutating func update(_ producer: String, at now: Date, _ body: (inout ProducerHealth) -> Void) {
        if entries[producer] == nil, entries.count >= Self.limit,
            let oldest = entries.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key
        {
            entries[oldest] = nil
            changed.remove(oldest)
        }
        body(&entries[producer, default: ProducerHealth(lastSeen: now)])
        entries[producer]?.lastSeen = now
        changed.insert(producer)
    }

    /// The producers changed since the last call, with their health.
    mutating func takeChanged() -> [(String, ProducerHealth)] {
        defer { changed = [] }
        return changed.compactMap { name in entries[name].map { (name, $0) } }
    }
}
