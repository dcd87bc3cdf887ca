import Foundation
import FuzzSupport
import SwitchboardProtocol

runFuzzer()

/// Every header and content decoder outside the group commands, fed the same frame: the
/// broker's (EVENT, HEARTBEAT, FETCH, REQUEST, REPLY) and the clients' (ACK, NACK, ERROR,
/// HEAD, END, the fanout's welcome), and the check-in content rules. Input: one frame.
///
/// Property: a valid EVENT or HEARTBEAT header re-encodes to one that decodes to the same value.
func fuzzHeaders(_ data: Data) {
    let frame = data
    // Welcome arrives as a whole fanout frame, prefix and all.
    _ = try? Welcome.parse(Data(Welcome.prefix.utf8) + frame)
    _ = try? Welcome.parse(frame)

    // The Codable headers, each through the same call the receivers make.
    let envelope = Envelope(command: .event, header: frame)
    _ = try? envelope.decodeHeader(EventHeader.self).validate()
    _ = try? envelope.decodeHeader(FetchHeader.self).validate()
    _ = try? envelope.decodeHeader(RequestHeader.self).validate()
    _ = try? envelope.decodeHeader(ReplyHeader.self).validate()
    _ = try? envelope.decodeHeader(AckHeader.self)
    _ = try? envelope.decodeHeader(NackHeader.self)
    _ = try? envelope.decodeHeader(ErrorHeader.self)
    _ = try? envelope.decodeHeader(HeadHeader.self)
    _ = try? envelope.decodeHeader(EndHeader.self)
    _ = try? Payloads.validate(schema: CheckIn.schema, type: CheckIn.type, content: frame)
    _ = Payloads.summary(schema: CheckIn.schema, content: frame, showingPersonalData: false)

    guard let value = JSONValue.parse(frame) else { return }
    _ = try? CheckIn(wire: value)
    _ = try? Payloads.validate(schema: CheckIn.schema, type: CheckIn.type, content: value)
    guard let fields = value.object else { return }
    if let event = try? EventHeader(wire: fields) {
        let again = JSONValue.parse(event.wireJSON())?.object.flatMap { try? EventHeader(wire: $0) }
        fuzzCheck(again == event, "EVENT header does not survive wireJSON")
    }
    if let heartbeat = try? HeartbeatHeader(wire: fields) {
        let again = JSONValue.parse(heartbeat.wireJSON())?.object.flatMap { try? HeartbeatHeader(wire: $0) }
        fuzzCheck(again == heartbeat, "HEARTBEAT header does not survive wireJSON")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzHeaders(FuzzInput.data(start, count))
    return 0
}
