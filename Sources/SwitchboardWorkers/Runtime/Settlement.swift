// How a worker answers the broker about one event (protocol/README.md section 15): the handler
// decides, as a value; `GroupWorker` does the talking. Keeping the decision a value is what lets
// the back-end rules ("a 5xx is worth another try, a FileMaker 102 never is") be tested without
// a socket.

public import Foundation
public import SwitchboardHTTP
public import SwitchboardProtocol

/// One event a worker was handed: its journaled header and its content. Built from a group
/// delivery, or directly in tests.
public struct WorkerEvent: Sendable {
    public var header: EventHeader
    public var content: Data
    /// 1 for the first delivery of this event to the group.
    public var attempt: Int
    /// The broker knows that no member was given this event before (DELIVER's `first`, protocol
    /// section 15.2). False, the default, says nothing: attempt 1 can follow an earlier
    /// delivery (a replay, a group reset, a broker crash that lost the count), so a handler
    /// whose effect the back end cannot refuse twice looks before it acts.
    public var firstDelivery: Bool
    /// Asked right before an effect that must not happen twice and that the back end itself
    /// cannot refuse twice (an ETO write): true while the broker surely counts the delivery as
    /// this worker's; false when it may have gone to another member (then write nothing and
    /// settle as you like: the settle is not sent). `GroupConsumer.mayAct(on:)`; always true
    /// for an event handled outside a group.
    public var mayAct: @Sendable () async -> Bool

    public init(
        header: EventHeader, content: Data, attempt: Int = 1, firstDelivery: Bool = false,
        mayAct: @escaping @Sendable () async -> Bool = { true }
    ) {
        self.header = header
        self.content = content
        self.attempt = attempt
        self.firstDelivery = firstDelivery
        self.mayAct = mayAct
    }

    public var eventID: String { header.eventID }
}

/// What a handler decided about one event.
public enum Settlement: Sendable, Hashable, CustomStringConvertible {
    /// The effect is in place (now, or from an earlier delivery): ACK.
    case done
    /// It failed for now: NACK, delivered again after `delay` (nil: the group's back-off).
    case retry(after: Duration?, code: String, message: String)
    /// It can never succeed as it is: TERM, so it becomes a dead letter an operator can read.
    /// The message names what is wrong and never holds a secret.
    case deadLetter(code: String, message: String)

    public var description: String {
        switch self {
        case .done: "done"
        case .retry(let delay, let code, let message): "retry after \(delay.map { "\($0)" } ?? "back-off") (\(code): \(message))"
        case .deadLetter(let code, let message): "dead letter (\(code): \(message))"
        }
    }

    /// The code a dead letter or retry carries, for logs and counts.
    public var code: String? {
        switch self {
        case .done: nil
        case .retry(_, let code, _), .deadLetter(let code, _): code
        }
    }
}

/// A worker's logic for one kind of event. `handle` must be safe to call again for an event it
/// already handled (delivery is at least once): it looks before it writes.
public protocol EventHandler: Sendable {
    /// Acts on the event and says how it went. Throwing is not an option: every failure is
    /// classified as a retry or a dead letter, so nothing reaches the broker unexplained.
    func handle(_ event: WorkerEvent) async -> Settlement
}

extension Settlement {
    /// How long to wait before trying an event again after `error`: when the failure says when
    /// trying again can succeed (a refresh limit's next allowed refresh, ``HTTPError/retryAfter``),
    /// that long, 1 s at least and 10 minutes at most; otherwise nil, the group's back-off. A
    /// delivery tried again before the limit frees up would fail the same way and spend one of
    /// the event's `max_deliver` deliveries for nothing.
    public static func delay(for error: HTTPError, now: Date = Date()) -> Duration? {
        guard let at = error.retryAfter else { return nil }
        let seconds = min(max(at.timeIntervalSince(now), 1), 600)
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }

    /// `text` as a settle code the broker takes (protocol section 15.2: 1–64 of a–z 0–9 -,
    /// starting with a letter): camelCase words split by `-` (`connectionFailed` →
    /// `connection-failed`), any other character a `-`.
    public static func code(_ text: String) -> String {
        var result = ""
        var previousWasLower = false
        for character in text.unicodeScalars {
            let value = character.value
            if (65...90).contains(value) {
                if previousWasLower { result += "-" }
                result.unicodeScalars.append(Unicode.Scalar(value + 32)!)
                previousWasLower = false
            } else if (97...122).contains(value) || (48...57).contains(value) {
                result.unicodeScalars.append(character)
                previousWasLower = true
            } else {
                if !result.hasSuffix("-") { result += "-" }
                previousWasLower = false
            }
        }
        while result.hasSuffix("-") { result.removeLast() }
        if result.first.map({ !$0.isLetter }) ?? true { result = "error-" + result }
        return String(result.prefix(64))
    }

    /// The settlement as the broker takes it: a valid code and a message of at most 1000
    /// characters (a longer one is cut, marked with an ellipsis).
    public var wireSafe: Settlement {
        func clean(_ code: String) -> String { SettleHeader.isValidCode(code) ? code : Self.code(code) }
        func cut(_ message: String) -> String {
            message.unicodeScalars.count <= 1000 ? message : String(String.UnicodeScalarView(message.unicodeScalars.prefix(999))) + "…"
        }
        switch self {
        case .done: return .done
        case .retry(let delay, let code, let message): return .retry(after: delay, code: clean(code), message: cut(message))
        case .deadLetter(let code, let message): return .deadLetter(code: clean(code), message: cut(message))
        }
    }
}
