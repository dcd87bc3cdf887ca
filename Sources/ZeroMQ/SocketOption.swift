import CZeroMQ
public import Foundation

/// A socket option to set. Every option named in `shared/zeromq.md` is here, with its unit in
/// the case name where libzmq's name leaves it out.
public enum SocketOption: Sendable, Hashable {
    /// `ZMQ_LINGER`: how long pending outgoing messages are kept after close, in ms (-1 forever).
    case linger(milliseconds: Int32)
    /// `ZMQ_SNDHWM`: queued outgoing messages per peer before the socket blocks or drops.
    case sendHighWaterMark(Int32)
    /// `ZMQ_RCVHWM`: queued incoming messages per peer.
    case receiveHighWaterMark(Int32)
    /// `ZMQ_ROUTER_MANDATORY`: unroutable sends fail with `EHOSTUNREACH` instead of vanishing.
    case routerMandatory(Bool)
    /// `ZMQ_XPUB_NODROP`: a full subscriber pipe gives `EAGAIN` instead of a silent drop.
    case xpubNoDrop(Bool)
    /// `ZMQ_XPUB_VERBOSE`: pass every subscription message up, not only new topics.
    case xpubVerbose(Bool)
    /// `ZMQ_XPUB_VERBOSER`: pass every subscription and every unsubscription up, including
    /// those libzmq makes for a subscriber that disconnects.
    case xpubVerboser(Bool)
    /// `ZMQ_XPUB_WELCOME_MSG`: one frame sent to every new subscriber on connect.
    case xpubWelcomeMessage(Data)
    /// `ZMQ_IMMEDIATE`: queue messages only to completed connections.
    case immediate(Bool)
    /// `ZMQ_HEARTBEAT_IVL`: ZMTP PING interval, ms (0 off).
    case heartbeatInterval(milliseconds: Int32)
    /// `ZMQ_HEARTBEAT_TIMEOUT`: how long to wait for traffic after a PING, ms.
    case heartbeatTimeout(milliseconds: Int32)
    /// `ZMQ_HEARTBEAT_TTL`: the time-to-live the peer is asked to apply, ms (rounded to 100).
    case heartbeatTTL(milliseconds: Int32)
    /// `ZMQ_RECONNECT_IVL`: first reconnect delay, ms.
    case reconnectInterval(milliseconds: Int32)
    /// `ZMQ_RECONNECT_IVL_MAX`: cap of the exponential reconnect back-off, ms (0 = no back-off).
    case reconnectIntervalMax(milliseconds: Int32)
    /// `ZMQ_MAXMSGSIZE`: the largest inbound message in bytes; a peer sending more is dropped.
    case maxMessageSize(Int64)
    /// `ZMQ_SNDTIMEO`: blocking send timeout, ms (-1 forever).
    case sendTimeout(milliseconds: Int32)
    /// `ZMQ_RCVTIMEO`: blocking receive timeout, ms (-1 forever).
    case receiveTimeout(milliseconds: Int32)
    /// `ZMQ_ROUTING_ID`: this socket's identity as seen by a ROUTER peer.
    case routingID(Data)
    /// `ZMQ_SUBSCRIBE`: a topic prefix (empty = everything).
    case subscribe(Data)
    /// `ZMQ_UNSUBSCRIBE`.
    case unsubscribe(Data)
    /// `ZMQ_CURVE_SERVER`: act as CURVE server.
    case curveServer(Bool)
    /// `ZMQ_CURVE_PUBLICKEY`: this socket's long-term public key (32 bytes).
    case curvePublicKey(CurveKey)
    /// `ZMQ_CURVE_SECRETKEY`: this socket's long-term secret key (32 bytes).
    case curveSecretKey(CurveKey)
    /// `ZMQ_CURVE_SERVERKEY`: the server's public key, set on a CURVE client.
    case curveServerKey(CurveKey)
    /// `ZMQ_PLAIN_SERVER`.
    case plainServer(Bool)
    /// `ZMQ_PLAIN_USERNAME`.
    case plainUsername(String)
    /// `ZMQ_PLAIN_PASSWORD`.
    case plainPassword(String)
    /// `ZMQ_ZAP_DOMAIN`: the domain sent to the ZAP handler.
    case zapDomain(String)
    /// `ZMQ_ZAP_ENFORCE_DOMAIN` (93): with it, a CURVE/PLAIN server whose context has no ZAP
    /// handler refuses connections instead of accepting any key. `zmq.h` lists it under DRAFT
    /// (so the constant is not exported), but Debian's libzmq 4.3.4 accepts it and honours it;
    /// a test in `ZeroMQTests` holds us to that.
    case zapEnforceDomain(Bool)
    /// `ZMQ_IPV6`.
    case ipv6(Bool)
    /// `ZMQ_TCP_KEEPALIVE` (-1 OS default, 0 off, 1 on).
    case tcpKeepalive(Int32)
    /// `ZMQ_CONFLATE`: keep only the last message.
    case conflate(Bool)
    /// `ZMQ_PROBE_ROUTER`: send an empty message on connect so a ROUTER learns the peer.
    case probeRouter(Bool)
    /// `ZMQ_ROUTER_HANDOVER`: a new peer with a known routing id takes the old one's place.
    case routerHandover(Bool)
    /// `ZMQ_HANDSHAKE_IVL`: the maximum handshake time, ms.
    case handshakeInterval(milliseconds: Int32)

    /// The libzmq option number and how its value is passed.
    var encoded: (name: Int32, value: Value) {
        switch self {
        case .linger(let v): (ZMQ_LINGER, .int32(v))
        case .sendHighWaterMark(let v): (ZMQ_SNDHWM, .int32(v))
        case .receiveHighWaterMark(let v): (ZMQ_RCVHWM, .int32(v))
        case .routerMandatory(let v): (ZMQ_ROUTER_MANDATORY, .bool(v))
        case .xpubNoDrop(let v): (ZMQ_XPUB_NODROP, .bool(v))
        case .xpubVerbose(let v): (ZMQ_XPUB_VERBOSE, .bool(v))
        case .xpubVerboser(let v): (ZMQ_XPUB_VERBOSER, .bool(v))
        case .xpubWelcomeMessage(let v): (ZMQ_XPUB_WELCOME_MSG, .bytes(v))
        case .immediate(let v): (ZMQ_IMMEDIATE, .bool(v))
        case .heartbeatInterval(let v): (ZMQ_HEARTBEAT_IVL, .int32(v))
        case .heartbeatTimeout(let v): (ZMQ_HEARTBEAT_TIMEOUT, .int32(v))
        case .heartbeatTTL(let v): (ZMQ_HEARTBEAT_TTL, .int32(v))
        case .reconnectInterval(let v): (ZMQ_RECONNECT_IVL, .int32(v))
        case .reconnectIntervalMax(let v): (ZMQ_RECONNECT_IVL_MAX, .int32(v))
        case .maxMessageSize(let v): (ZMQ_MAXMSGSIZE, .int64(v))
        case .sendTimeout(let v): (ZMQ_SNDTIMEO, .int32(v))
        case .receiveTimeout(let v): (ZMQ_RCVTIMEO, .int32(v))
        case .routingID(let v): (ZMQ_ROUTING_ID, .bytes(v))
        case .subscribe(let v): (ZMQ_SUBSCRIBE, .bytes(v))
        case .unsubscribe(let v): (ZMQ_UNSUBSCRIBE, .bytes(v))
        case .curveServer(let v): (ZMQ_CURVE_SERVER, .bool(v))
        case .curvePublicKey(let v): (ZMQ_CURVE_PUBLICKEY, .bytes(v.bytes))
        case .curveSecretKey(let v): (ZMQ_CURVE_SECRETKEY, .bytes(v.bytes))
        case .curveServerKey(let v): (ZMQ_CURVE_SERVERKEY, .bytes(v.bytes))
        case .plainServer(let v): (ZMQ_PLAIN_SERVER, .bool(v))
        case .plainUsername(let v): (ZMQ_PLAIN_USERNAME, .bytes(Data(v.utf8)))
        case .plainPassword(let v): (ZMQ_PLAIN_PASSWORD, .bytes(Data(v.utf8)))
        case .zapDomain(let v): (ZMQ_ZAP_DOMAIN, .bytes(Data(v.utf8)))
        case .zapEnforceDomain(let v): (93, .bool(v))
        case .ipv6(let v): (ZMQ_IPV6, .bool(v))
        case .tcpKeepalive(let v): (ZMQ_TCP_KEEPALIVE, .int32(v))
        case .conflate(let v): (ZMQ_CONFLATE, .bool(v))
        case .probeRouter(let v): (ZMQ_PROBE_ROUTER, .bool(v))
        case .routerHandover(let v): (ZMQ_ROUTER_HANDOVER, .bool(v))
        case .handshakeInterval(let v): (ZMQ_HANDSHAKE_IVL, .int32(v))
        }
    }

    /// A name for error messages that never includes the value (keys and passwords are values).
    var name: String {
        switch self {
        case .linger: "ZMQ_LINGER"
        case .sendHighWaterMark: "ZMQ_SNDHWM"
        case .receiveHighWaterMark: "ZMQ_RCVHWM"
        case .routerMandatory: "ZMQ_ROUTER_MANDATORY"
        case .xpubNoDrop: "ZMQ_XPUB_NODROP"
        case .xpubVerbose: "ZMQ_XPUB_VERBOSE"
        case .xpubVerboser: "ZMQ_XPUB_VERBOSER"
        case .xpubWelcomeMessage: "ZMQ_XPUB_WELCOME_MSG"
        case .immediate: "ZMQ_IMMEDIATE"
        case .heartbeatInterval: "ZMQ_HEARTBEAT_IVL"
        case .heartbeatTimeout: "ZMQ_HEARTBEAT_TIMEOUT"
        case .heartbeatTTL: "ZMQ_HEARTBEAT_TTL"
        case .reconnectInterval: "ZMQ_RECONNECT_IVL"
        case .reconnectIntervalMax: "ZMQ_RECONNECT_IVL_MAX"
        case .maxMessageSize: "ZMQ_MAXMSGSIZE"
        case .sendTimeout: "ZMQ_SNDTIMEO"
        case .receiveTimeout: "ZMQ_RCVTIMEO"
        case .routingID: "ZMQ_ROUTING_ID"
        case .subscribe: "ZMQ_SUBSCRIBE"
        case .unsubscribe: "ZMQ_UNSUBSCRIBE"
        case .curveServer: "ZMQ_CURVE_SERVER"
        case .curvePublicKey: "ZMQ_CURVE_PUBLICKEY"
        case .curveSecretKey: "ZMQ_CURVE_SECRETKEY"
        case .curveServerKey: "ZMQ_CURVE_SERVERKEY"
        case .plainServer: "ZMQ_PLAIN_SERVER"
        case .plainUsername: "ZMQ_PLAIN_USERNAME"
        case .plainPassword: "ZMQ_PLAIN_PASSWORD"
        case .zapDomain: "ZMQ_ZAP_DOMAIN"
        case .zapEnforceDomain: "ZMQ_ZAP_ENFORCE_DOMAIN"
        case .ipv6: "ZMQ_IPV6"
        case .tcpKeepalive: "ZMQ_TCP_KEEPALIVE"
        case .conflate: "ZMQ_CONFLATE"
        case .probeRouter: "ZMQ_PROBE_ROUTER"
        case .routerHandover: "ZMQ_ROUTER_HANDOVER"
        case .handshakeInterval: "ZMQ_HANDSHAKE_IVL"
        }
    }

    enum Value {
        case int32(Int32)
        case int64(Int64)
        case bool(Bool)
        case bytes(Data)
    }
}
