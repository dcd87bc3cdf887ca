import Foundation
import FuzzSupport
import SwitchboardProtocol

runFuzzer()

/// The envelope as the broker reads it from ingest, replay and groups sockets: frame checks,
/// the four JSON frames, then the EVENT header and the content rules (check-in). Input: the
/// message's frames after the routing frame, split at 0xFF 0xFF (FuzzInput).
///
/// Property: a message that decodes re-encodes to frames that decode to the same envelope.
func fuzzEnvelope(_ data: Data) {
    let frames = FuzzInput.frames(data)
    _ = Envelope.readableCommand(frames)
    _ = Envelope.readableCommand(frames.dropFirst())
    // A receiver that has moved its minimum up reads the same bytes with another bound.
    _ = try? Envelope.check(frames, minimumVersion: ProtocolVersion(major: 1, minor: 3))
    guard let envelope = try? Envelope.check(frames) else { return }
    var reference: String?
    guard let parsed = try? envelope.parsed(reference: &reference) else { return }
    _ = try? parsed.checkedEvent()
    _ = try? parsed.checkedPublishedEvent()
    _ = try? HeartbeatHeader(wire: parsed.header)
    if let again = try? Envelope.decode(envelope.frames()) {
        fuzzCheck(again == envelope, "re-encoded envelope differs")
    } else {
        fuzzCheck(false, "an envelope that decoded does not decode after re-encoding")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzEnvelope(FuzzInput.data(start, count))
    return 0
}
