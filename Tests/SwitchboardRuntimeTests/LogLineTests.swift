import Foundation
import Testing

@testable import SwitchboardRuntime

/// Log lines carry text from outside (names, reasons, back-end messages): none of it may write a
/// line or a `key=value` of its own.
@Suite("Log lines")
struct LogLineTests {
    @Test func plainValuesStayBareAndOthersAreQuotedAndEscaped() {
        #expect(StructuredLogHandler.logfmt("filemaker") == "filemaker")
        #expect(StructuredLogHandler.logfmt("") == #""""#)
        #expect(StructuredLogHandler.logfmt("two words") == #""two words""#)
        #expect(StructuredLogHandler.logfmt(#"a\b "c""#) == #""a\\b \"c\"""#)
        #expect(StructuredLogHandler.logfmt("x\ny\rz\t") == #""x\ny\rz\t""#)
        #expect(StructuredLogHandler.logfmt("bell\u{7}") == #""bell\u{7}""#)
        #expect(StructuredLogHandler.logfmt("del\u{7F}") == #""del\u{7f}""#)
        #expect(StructuredLogHandler.logfmt("c1\u{85}") == #""c1\u{85}""#)
        #expect(StructuredLogHandler.logfmt("ls\u{2028}") == #""ls\u{2028}""#)
        #expect(StructuredLogHandler.logfmt("café~") == "café~")
    }

    @Test func timestampsAreUTCWithMillisecondsAndZeroPadded() {
        // 2026-11-22T21:04:00.120Z, and a date whose every field needs padding.
        #expect(StructuredLogHandler.timestamp(timespec(tv_sec: 1_795_381_440, tv_nsec: 120_999_999)) == "2026-11-22T21:04:00.120Z")
        #expect(StructuredLogHandler.timestamp(timespec(tv_sec: 1_704_164_645, tv_nsec: 7_000_000)) == "2024-01-02T03:04:05.007Z")
        #expect(StructuredLogHandler.timestamp(timespec(tv_sec: 0, tv_nsec: 0)) == "1970-01-01T00:00:00.000Z")
    }

    /// A quote with a combining mark after it is one Character, not `"`: checked per Character,
    /// it went out bare and closed nothing, or unescaped inside quotes and closed them.
    @Test func aQuoteWithACombiningMarkCannotForgeAPair() {
        let forged = "x\"\u{301} level=error"
        let value = StructuredLogHandler.logfmt(forged)
        #expect(value == "\"x\\\"\u{301} level=error\"")
        // Exactly two unescaped quotes: the ones around the value.
        var quotes = 0
        var escape = false
        for scalar in value.unicodeScalars {
            if escape { escape = false; continue }
            if scalar == "\\" { escape = true } else if scalar == "\"" { quotes += 1 }
        }
        #expect(quotes == 2)
    }

    @Test func aMessageCannotStartALine() {
        #expect(StructuredLogHandler.message("journal opened") == "journal opened")
        #expect(
            StructuredLogHandler.message("a\r\n2026-01-01T00:00:00Z info broker: fake") == #"a\r\n2026-01-01T00:00:00Z info broker: fake"#)
        #expect(!StructuredLogHandler.message("x\u{2028}y").unicodeScalars.contains("\u{2028}"))
    }
}
