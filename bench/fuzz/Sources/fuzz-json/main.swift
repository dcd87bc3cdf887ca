import Foundation
import FuzzSupport
import SwitchboardProtocol

runFuzzer()

/// The protocol's own JSON parser, which reads every JSON frame the broker receives.
/// Input: one JSON text.
///
/// Property: what parses re-encodes (`compactData`) to text that parses to the same value.
func fuzzJSON(_ data: Data) {
    guard let value = JSONValue.parse(data) else { return }
    let text = value.compactData
    fuzzCheck(JSONValue.parse(text) == value, "re-encoded JSON differs: \(String(decoding: text.prefix(200), as: UTF8.self))")
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzJSON(FuzzInput.data(start, count))
    return 0
}
