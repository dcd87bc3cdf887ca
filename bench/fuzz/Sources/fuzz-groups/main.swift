import Foundation
import FuzzSupport
import SwitchboardProtocol

runFuzzer()

/// The group commands' header decoders: JOIN, ACK/NACK/TERM/PROGRESS and LEAVE as the broker
/// reads them, JOINED and DELIVER as a member reads them. Input: one header frame.
///
/// Properties: a header that decodes re-encodes (`wireJSON`) to one that decodes to the same
/// value; a JOIN's `holding` (protocol 15.2) keeps the first of each bus_seq the frame names, in
/// order, with its attempt, within the rules' bounds.
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
        fuzzCheck(join.holding == firstOfEachBusSeq(fields["holding"]), "JOIN holding is not the first of each bus_seq named")
        fuzzCheck(join.holding.count <= JoinHeader.maximumHolding, "JOIN holding above the maximum")
        fuzzCheck(
            join.holding.allSatisfy {
                (1...FetchHeader.maximumSequence).contains($0.busSeq) && (1...SettleHeader.maximumAttempt).contains($0.attempt)
            }, "JOIN holding out of bounds")
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

/// What an accepted JOIN's `holding` names, read plainly: the first item of each bus_seq, in
/// order (integers written as 12 or 12.0, as the decoder reads them).
func firstOfEachBusSeq(_ value: JSONValue?) -> [HeldDelivery] {
    func integer(_ value: JSONValue?) -> Int64? {
        switch value {
        case .integer(let number)?: return number
        case .double(let number)? where number == number.rounded() && abs(number) < 0x1p62: return Int64(number)
        default: return nil
        }
    }
    guard case .array(let items)? = value else { return [] }
    var seen = Set<Int64>()
    var held: [HeldDelivery] = []
    for case .object(let item) in items {
        guard let busSeq = integer(item["bus_seq"]), let attempt = integer(item["attempt"]) else { continue }
        if seen.insert(busSeq).inserted { held.append(HeldDelivery(busSeq: busSeq, attempt: Int(attempt))) }
    }
    return held
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzGroups(FuzzInput.data(start, count))
    return 0
}
