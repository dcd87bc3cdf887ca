import Foundation
import Testing

@testable import SwitchboardEmulators

/// The FileMaker emulator writes creation timestamps with its own date arithmetic; it must agree
/// with Foundation's calendar everywhere, leap days and the years before 1970 included.
@Test func creationTimestampsAgreeWithTheGregorianCalendar() {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "MM/dd/yyyy HH:mm:ss"
    let samples: [TimeInterval] = [
        0, 59, 86_399, 86_400, 951_782_400, 951_868_799, 1_709_164_800, 4_107_542_399, -1, -86_401, -2_208_988_800,
    ]
    var generator = SystemRandomNumberGenerator()
    let random = (0..<500).map { _ in TimeInterval(Int64.random(in: -3_000_000_000...5_000_000_000, using: &generator)) }
    for seconds in samples + random {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(FileMakerEmulator.timestamp(date) == formatter.string(from: date), "at \(seconds)")
    }
}
