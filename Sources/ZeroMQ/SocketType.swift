import CZeroMQ

/// The kinds of socket libzmq's stable API offers (no DRAFT kinds: Debian builds without them).
public enum SocketType: Sendable, Hashable, CustomStringConvertible {
    case pair, publisher, subscriber, request, reply, dealer, router, pull, push
    case xpublisher, xsubscriber, stream

    var rawValue: Int32 {
        switch self {
        case .pair: ZMQ_PAIR
        case .publisher: ZMQ_PUB
        case .subscriber: ZMQ_SUB
        case .request: ZMQ_REQ
        case .reply: ZMQ_REP
        case .dealer: ZMQ_DEALER
        case .router: ZMQ_ROUTER
        case .pull: ZMQ_PULL
        case .push: ZMQ_PUSH
        case .xpublisher: ZMQ_XPUB
        case .xsubscriber: ZMQ_XSUB
        case .stream: ZMQ_STREAM
        }
    }

    public var description: String {
        switch self {
        case .pair: "PAIR"
        case .publisher: "PUB"
        case .subscriber: "SUB"
        case .request: "REQ"
        case .reply: "REP"
        case .dealer: "DEALER"
        case .router: "ROUTER"
        case .pull: "PULL"
        case .push: "PUSH"
        case .xpublisher: "XPUB"
        case .xsubscriber: "XSUB"
        case .stream: "STREAM"
        }
    }
}
