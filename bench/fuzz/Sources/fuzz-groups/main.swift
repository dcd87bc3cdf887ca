import Foundation
import FuzzSupport
import SwitchboardProtocol

runFuzzer()

/// The group commands' header decoders: JOIN, ACK/NACK/TERM/PROGRESS and LEAVE as the broker
/// reads them, JOINED and DELIVER as a member reads them. Input: one header frame.
///
/// Property: a header that decodes re-encodes (`wireJSON`) to one that decodes to the same value.
func fuzzGroups(_ data: Data) {
    let frame = data
    let envelope = Envelope(command: .join, header: frame)
    _ = try? envelope.decodeHeader(LeaveHeader.self)
    _ = try? envelope.decodeHeader(JoinedHeader.self)
    if let deliver = try? envelope.decodeHeader(DeliverHeader.self) {
        let again = try? Envelope(command: .deliver, header: deliver.wireJSON()).decodeHeader(DeliverHeader.self)
        fuzzCheck(again == deliver, "DELIVER header does not survive wireJSON")
    }

    guard let fields = JSONValue.parse(frame)?.object else { return }
    if let join = try? JoinHeader(wire: fields) {
        let again = JSONValue.parse(join.wireJSON())?.object.flatMap { try? JoinHeader(wire: $0) }
        fuzzCheck(again == join, "JOIN header does not survive wireJSON")
    }
    for outcome in [SettleHeader.Outcome.ack, .nack, .term, .progress] {
        guard let settle = try? SettleHeader(outcome, wire: fields) else { continue }
        let again = JSONValue.parse(settle.wireJSON())?.object.flatMap { try? SettleHeader(outcome, wire: $0) }
        fuzzCheck(again == settle, "\(outcome.rawValue) header does not survive wireJSON")
    }
    _ = try? GroupFields.topics(fields)
    _ = try? GroupFields.integer(fields, "start")
    for case .string(let text) in fields.values {
        _ = GroupStart(text)
        _ = GroupName.isValid(text)
        _ = SettleHeader.isValidCode(text)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzGroups(FuzzInput.data(start, count))
    return 0
}
