// Which broker a client connects to when it was given several (protocol/README.md, section 3:
// "Several brokers"). A client socket connects to one broker at a time, never to all: a DEALER
// connected to two would share its messages between them. Every fresh socket connects to the
// current broker; trouble on it (nothing took a request, the broker fell silent, a JOIN got no
// JOINED, sends stayed blocked) moves the client on to the next, round and round.

import Foundation
import Synchronization

/// The brokers a client may use, one at a time. Safe to use from any task.
public final class BrokerRotation: Sendable {
    /// Every endpoint, in the order given.
    public let endpoints: [String]
    private let index = Mutex(0)

    /// - Parameter endpoints: one endpoint, or several separated by commas (a ZeroMQ endpoint
    ///   never holds a comma): `tcp://a:5563,tcp://b:5563`. Blanks around commas are ignored.
    public init(_ endpoints: String) {
        let list = endpoints.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        self.endpoints = list.isEmpty ? [endpoints] : list
    }

    /// The endpoint a fresh socket connects to now.
    public var current: String { endpoints[index.withLock { $0 }] }

    /// Whether there is more than one broker to move between.
    public var rotates: Bool { endpoints.count > 1 }

    /// Trouble on `endpoint`: if it is still the current one, the next becomes current (so
    /// several sockets that all found the same broker gone move the client on once).
    /// - Returns: the endpoint to use now.
    @discardableResult
    public func failed(_ endpoint: String) -> String {
        index.withLock { index in
            if endpoints[index] == endpoint { index = (index + 1) % endpoints.count }
            return endpoints[index]
        }
    }

    /// What logs and errors name: the endpoint, or the list.
    public var description: String { endpoints.joined(separator: ",") }
}
