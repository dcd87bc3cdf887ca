import Foundation
import SwitchboardHTTP
import SwitchboardTesting
import Testing

/// `WCFDate(wire:)` reads bytes since issue 30 (a search hit carries two dates, and the ETO
/// worker's profile spent 6 % of its CPU in the Character-based reading). This checks that it
/// accepts and refuses exactly what that reading did, kept here as the reference, but for
/// milliseconds beyond `WCFDate.millisecondsRange`, which it now refuses: the old reading took
/// them, and `milliseconds` then trapped converting them back.
@Suite("WCF date reading")
struct WCFDateReadingTests {
    /// The reading `WCFDate(wire:)` had until issue 30: milliseconds and offset, or nil.
    static func reference(_ text: String) -> (Int64, Int?)? {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        for prefix in ["\\/Date(", "/Date("] where rest.hasPrefix(prefix) {
            rest = rest.dropFirst(prefix.count)
            break
        }
        guard text.contains("Date("), rest.first != nil, !rest.hasPrefix("/"), !rest.hasPrefix("\\") else { return nil }
        guard rest.hasSuffix(")/") || rest.hasSuffix(")\\/") else { return nil }
        rest = rest.hasSuffix(")\\/") ? rest.dropLast(3) : rest.dropLast(2)
        func isDigit(_ c: Character) -> Bool { c.isASCII && c.isNumber }
        var millisText = rest
        var offset: Int?
        if let signIndex = rest.dropFirst().lastIndex(where: { $0 == "+" || $0 == "-" }) {
            let zone = rest[rest.index(after: signIndex)...]
            guard zone.count == 4, zone.allSatisfy(isDigit), let hhmm = Int(zone) else { return nil }
            let minutes = (hhmm / 100) * 60 + hhmm % 100
            offset = rest[signIndex] == "-" ? -minutes : minutes
            millisText = rest[..<signIndex]
        }
        let digits = millisText.hasPrefix("-") ? millisText.dropFirst() : millisText
        guard !digits.isEmpty, digits.allSatisfy(isDigit), let millis = Int64(millisText) else { return nil }
        guard WCFDate.millisecondsRange.contains(millis) else { return nil }
        return (millis, offset)
    }

    static func agree(_ text: String) -> Bool {
        let read = WCFDate(wire: text)
        guard let expected = reference(text) else { return read == nil }
        guard let read else { return false }
        return read.date == Date(timeIntervalSince1970: Double(expected.0) / 1000) && read.offsetMinutes == expected.1
    }

    @Test("the edges: offsets, escaped slashes, spaces, negative and extreme milliseconds, and what is refused")
    func edges() {
        let cases = [
            "/Date(0)/", "/Date(-0)/", "/Date(1571411927090)/", "\\/Date(1571411927090)\\/", "/Date(1571411927090-0500)/",
            "/Date(-86400000+0130)/", " \t/Date(5)/\t ", "\u{00A0}/Date(5)/\u{2003}", "/Date(9223372036854775807)/",
            "/Date(-9223372036854775808)/", "/Date(9223372036854775808)/", "/Date(8640000000000000)/",
            "/Date(-8640000000000001)/", "/Date(5+130)/", "/Date(5+01300)/", "/Date(+5)/",
            "/Date(--5)/", "/Date(5-)/", "/Date()/", "/Date(-)/", "Date(5)", "/Date(5)", "/Date(5)\\/", "\\/Date(5)/", "/Date(5a)/",
            "/Date(٣)/", "/date(5)/", "x/Date(5)/", "/Date(/Date(5)/", "/Date(\\5)/", "", " ", ")/",
        ]
        for text in cases {
            #expect(Self.agree(text), "\(text.debugDescription): \(String(describing: WCFDate(wire: text)))")
        }
        #expect(WCFDate(wire: "/Date(1571411927090-0500)/")?.offsetMinutes == -300)
        #expect(WCFDate(wire: "/Date(8640000000000000)/")?.milliseconds == 8_640_000_000_000_000)
        #expect(WCFDate(wire: "/Date(9223372036854775807)/") == nil, "beyond the range is refused")
        #expect(WCFDate(Date(timeIntervalSince1970: 1e300)).milliseconds == WCFDate.millisecondsRange.upperBound)
    }

    @Test("20,000 mutations of WCF dates read alike both ways")
    func mutations() {
        var generator = SeededGenerator(seed: 0x5743_4644)
        let seeds = ["/Date(1571411927090)/", "\\/Date(1571411927090-0500)\\/", "/Date(-86400000+0130)/", " /Date(0)/ "]
        let alphabet = Array("/\\Date()+-0123456789 \t٣\u{00A0}x".utf8)
        for round in 0..<20_000 {
            var bytes = Array(seeds[round % seeds.count].utf8)
            generator.mutate(&bytes, from: alphabet)
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(Self.agree(text), "round \(round): \(text.debugDescription)")
        }
    }
}
