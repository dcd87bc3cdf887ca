import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Lets a handler drop the connection without answering, the way a crashed server or a
/// middlebox does. The responder marks such a response with `closeMarker`; this handler, placed
/// after Hummingbird's HTTP codec, swallows that response and closes the channel before a byte of
/// it is written, so the client sees the connection close with no response at all.
final class CloseConnectionHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    static let closeMarker = HTTPField.Name("X-Switchboard-Emulator-Close")!
    private var closing = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part = unwrapOutboundIn(data)
        if case .head(let head) = part, head.headerFields[Self.closeMarker] != nil {
            closing = true
            promise?.fail(ChannelError.ioOnClosedChannel)
            context.close(mode: .all, promise: nil)
            return
        }
        guard !closing else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(data, promise: promise)
    }
}
