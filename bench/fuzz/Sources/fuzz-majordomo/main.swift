import Foundation
import FuzzSupport
import SwitchboardProtocol

runFuzzer()

/// Majordomo frames as the broker reads them from the service socket (routing frame removed),
/// then the REQUEST/REPLY body readers the broker and workers apply to what they carry.
/// Input: frames split at 0xFF 0xFF (FuzzInput).
///
/// Property: a message that parses, rebuilt with the builders, parses to the same message.
func fuzzMajordomo(_ data: Data) {
    let frames = FuzzInput.frames(data)
    // The bodies alone, as a worker reads a REQUEST and a client a REPLY.
    readBody(frames)
    guard let inbound = try? Majordomo.parse(frames[...]) else { return }
    switch inbound {
    case .client(let message):
        readBody(message.body)
        // Only REQUEST has a builder; PARTIAL and FINAL from a client are refused later.
        if message.command == .request {
            let rebuilt = Majordomo.clientRequest(
                message.version, service: message.service, body: message.body, delimited: message.delimited)
            fuzzCheck((try? Majordomo.parse(rebuilt[...])) == inbound, "rebuilt client request differs")
        }
    case .worker(let message):
        readBody(message.body)
    }
}

private func readBody(_ body: [Data]) {
    _ = try? ServiceBody.request(body)
    _ = try? ServiceBody.reply(body)
    _ = ServiceBody.peekOperation(body)
    _ = ServiceBody.peekStatus(body)
    _ = ServiceBody.peekRequest(body)
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzMajordomo(FuzzInput.data(start, count))
    return 0
}
