import Foundation

/// The topic prefixes the fan-out's subscribers hold, so that an event no subscription matches
/// is not handed to the XPUB at all (seven `zmq_send`s an event, a tenth of the broker thread
/// while it ingests with nobody listening).
///
/// XPUB_VERBOSER passes up every subscription, a repeated one too, and an unsubscription only
/// when it removes a subscription the socket held (a stray one is not passed up), including
/// one for each subscription of a subscriber that goes. So each prefix's count here is never
/// below the number of subscribers holding it: an event is left out only when no subscriber
/// can want it. A count may stay above the truth (a subscriber that subscribed a prefix twice
/// leaves one count behind), which only costs sends libzmq then drops, as before.
struct FanoutSubscriptions {
    /// Each prefix subscribed, with how many subscriptions hold it.
    private(set) var counts: [Data: Int] = [:]
    /// Subscriptions held: the sum of `counts`.
    private(set) var total = 0
    /// Bumped by every change, for callers that cache `wants`.
    private(set) var generation = 0

    /// Applies one message of the XPUB: a first byte 1 (subscribe) or 0 (unsubscribe), then the
    /// prefix. Returns whether it was one.
    @discardableResult
    mutating func apply(_ frame: Data) -> Bool {
        guard let kind = frame.first, kind <= 1 else { return false }
        let prefix = Data(frame.dropFirst())
        if kind == 1 {
            counts[prefix, default: 0] += 1
            total += 1
        } else if let held = counts[prefix] {
            if held <= 1 { counts[prefix] = nil } else { counts[prefix] = held - 1 }
            total -= 1
        }
        generation &+= 1
        return true
    }

    /// Whether any subscription held is a prefix of `topic` (ZeroMQ's matching: bytes, and the
    /// empty prefix matches everything).
    func wants(_ topic: Data) -> Bool {
        counts.keys.contains { prefix in prefix.count <= topic.count && topic.starts(with: prefix) }
    }
}
