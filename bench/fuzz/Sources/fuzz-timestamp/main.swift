import Foundation
import FuzzSupport
import SwitchboardProtocol

runFuzzer()

/// The text checks of header fields: RFC 3339 date-times, calendar dates, UUIDv7, type,
/// schema, producer, operation and group names, protocol versions. Input: one UTF-8 string
/// (invalid bytes replaced, as the JSON parser never hands over invalid UTF-8 anyway).
///
/// Property: an instant that parses and formats within 0000–9999 parses back to itself.
func fuzzTimestamp(_ data: Data) {
    let text = String(decoding: data, as: UTF8.self)
    _ = Timestamp.parseDate(text)
    _ = UUIDv7.isValid(text)
    _ = UUIDv7.milliseconds(of: text)
    _ = Topic.isValidEventType(text)
    _ = Schema.isValidReference(text)
    _ = Producer.isValid(text)
    _ = Operation.isValid(text)
    _ = GroupName.isValid(text)
    _ = ProtocolVersion(text)
    guard let milliseconds = Timestamp.parse(text) else { return }
    // From 0000-01-01T00:00:00Z to 10000-01-01T00:00:00Z (excluded): the years the format writes in 4 digits.
    if (-62_167_219_200_000..<253_402_300_800_000).contains(milliseconds) {
        let formatted = Timestamp.format(milliseconds: milliseconds)
        fuzzCheck(Timestamp.parse(formatted) == milliseconds, "'\(text)' → \(milliseconds) → '\(formatted)' does not parse back")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzTimestamp(FuzzInput.data(start, count))
    return 0
}
