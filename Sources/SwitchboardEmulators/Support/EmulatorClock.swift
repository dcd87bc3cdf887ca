import Foundation
import Synchronization

/// The emulators' notion of now: the wall clock plus an offset that tests move forward through
/// the control API (`POST /_emulator/clock`), so a 15-minute idle expiry is tested in
/// milliseconds.
final class EmulatorClock: Sendable {
    private let offset = Mutex<TimeInterval>(0)

    func now() -> Date { Date().addingTimeInterval(offset.withLock { $0 }) }

    var offsetSeconds: TimeInterval { offset.withLock { $0 } }

    func advance(by seconds: TimeInterval) { offset.withLock { $0 += seconds } }

    func reset() { offset.withLock { $0 = 0 } }
}
