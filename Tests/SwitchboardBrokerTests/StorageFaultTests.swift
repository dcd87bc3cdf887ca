import GRDB
import Logging
import SwitchboardStorage
import SwitchboardTesting
import Testing

@testable import SwitchboardBroker

/// The broker's rules for a journal that cannot be written, and for freed memory, without a full
/// disk or a crowd: the processes meet the real thing in EndToEndTests/ResourceFaultTests.
@Suite("Storage faults and heap trim")
struct StorageFaultTests {
    @Test("SQLite's failures are told by their cause: a full disk, a read-only file system, anything else")
    func causes() {
        let full = StorageFault.classify(
            DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full"), path: "/j", queue: nil)
        #expect(full.cause == .diskFull)
        #expect(full.description == "/j: the disk is full (SQLite error 13: database or disk is full)")
        let readOnly = StorageFault.classify(DatabaseError(resultCode: .SQLITE_READONLY), path: "/j", queue: nil)
        #expect(readOnly.cause == .readOnly && readOnly.summary.hasPrefix("the file system is read-only"))
        #expect(StorageFault.classify(DatabaseError(resultCode: .SQLITE_CORRUPT), path: "/j", queue: nil).cause == .other)
        // An I/O error with no errno kept: the file system is asked (this one is writable).
        let directory = try? TemporaryDirectory("fault")
        defer { directory?.remove() }
        let io = StorageFault.classify(DatabaseError(resultCode: .SQLITE_IOERR), path: (directory?.path ?? "/tmp") + "/j", queue: nil)
        #expect(io.cause == .ioError)
    }

    @Test("an outage is logged when it starts, every 10 s while it lasts, and when it ends, not once per failure")
    func outageLog() {
        let capture = LogCapture()
        let logger = capture.logger
        var outage = StorageOutage(failing: "cannot store", recovered: "stores again")
        let fault = StorageFault(cause: .diskFull, path: "/j", detail: "SQLite error 13")
        let start = ContinuousClock.now
        outage.succeeded(at: start, logger: logger)
        #expect(capture.all.isEmpty, "no outage, nothing to say")
        for second in 0..<10 { outage.failed(fault, count: 2, at: start + .seconds(second), logger: logger) }
        #expect(capture.lines(containing: ["cannot store"]).count == 1)
        #expect(capture.all[0].contains("cause=the disk is full") && capture.all[0].contains("items=2"), "\(capture.all)")
        outage.failed(fault, count: 2, at: start + .seconds(10), logger: logger)
        #expect(capture.lines(containing: ["cannot store"]).count == 2)
        #expect(capture.all[1].contains("for=10.0s") && capture.all[1].contains("total=22"), "\(capture.all)")
        outage.succeeded(at: start + .milliseconds(12_500), logger: logger)
        #expect(capture.all.last?.contains("stores again") == true && capture.all.last?.contains("after=12.5s") == true, "\(capture.all)")
        outage.succeeded(at: start + .seconds(13), logger: logger)
        outage.failed(fault, count: 1, at: start + .seconds(14), logger: logger)
        #expect(capture.all.count == 4 && capture.all[3].contains("cannot store") && !capture.all[3].contains("for="), "a new outage")
    }

    @Test("the heap is trimmed when its free memory grew by the threshold since the last trim, not before, not again")
    func heapTrim() {
        var trim = HeapTrim(threshold: 16)
        let decisions = [10, 25, 26, 26, 5, 40].map { trim.shouldTrim(freeBytes: $0) }
        // The first look only sets the floor; 25 is not 16 above it, 26 is; trimmed pages stay
        // counted as free, so 26 again is no reason; 5 is reuse (a lower floor); 40 a new crowd gone.
        #expect(decisions == [false, false, true, false, false, true])
        #expect(trim.floor == 40)
    }
}
