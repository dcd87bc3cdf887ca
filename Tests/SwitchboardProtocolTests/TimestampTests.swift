import Foundation
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite("RFC 3339 timestamps")
struct TimestampTests {
    @Test("every accepted vector parses to its instant", arguments: try Vectors.timestamps(accepted: true))
    func accepted(_ vector: Vectors.TimestampCase) {
        #expect(Timestamp.parse(vector.text) == vector.unixMilliseconds, "\(vector)")
    }

    @Test("every refused vector is refused", arguments: try Vectors.timestamps(accepted: false))
    func refused(_ vector: Vectors.TimestampCase) {
        #expect(Timestamp.parse(vector.text) == nil, "\(vector)")
    }

    @Test("the vectors cover 0 to 9 fraction digits, Z, z, t and both offset signs")
    func coverage() throws {
        let texts = try Vectors.timestamps(accepted: true).map(\.text)
        for digits in 0...9 {
            #expect(
                texts.contains { text in
                    guard let point = text.firstIndex(of: ".") else { return digits == 0 }
                    return text[text.index(after: point)...].prefix(while: \.isNumber).count == digits
                }, "no accepted vector with \(digits) fraction digits")
        }
        for form in ["Z", "z", "t", "+", "-0"] { #expect(texts.contains { $0.dropFirst(10).contains(form) }, "no vector with \(form)") }
    }

    /// Random valid date-times in every allowed form, checked against Foundation's calendar
    /// (not our own day arithmetic).
    @Test("random valid timestamps parse to the instant Foundation computes", arguments: [1, 2, 3] as [UInt64])
    func randomValid(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(secondsFromGMT: 0))
        for round in 0..<5_000 {
            await yieldNowAndThen(round)
            let year = Int.random(in: 1900...2200, using: &random)
            let month = Int.random(in: 1...12, using: &random)
            let days = calendar.range(of: .day, in: .month, for: calendar.date(from: DateComponents(year: year, month: month))!)!.count
            let day = Int.random(in: 1...days, using: &random)
            let (hour, minute, second) = (
                Int.random(in: 0...23, using: &random), Int.random(in: 0...59, using: &random), Int.random(in: 0...59, using: &random)
            )
            let digits = Int.random(in: 0...9, using: &random)
            let fraction = (0..<digits).map { _ in String(Int.random(in: 0...9, using: &random)) }.joined()
            var offsetMinutes = 0
            var zone = Bool.random(using: &random) ? "Z" : "z"
            if Int.random(in: 0..<3, using: &random) == 0 {
                let (oh, om) = (Int.random(in: 0...23, using: &random), Int.random(in: 0...59, using: &random))
                let negative = Bool.random(using: &random)
                offsetMinutes = (negative ? -1 : 1) * (oh * 60 + om)
                zone = String(format: "%@%02d:%02d", negative ? "-" : "+", oh, om)
            }
            let separator = Bool.random(using: &random) ? "T" : "t"
            let text =
                String(format: "%04d-%02d-%02d", year, month, day) + separator + String(format: "%02d:%02d:%02d", hour, minute, second)
                + (digits > 0 ? "." + fraction : "") + zone
            let local = try #require(
                calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)))
            let millis = Int64(Int(String((fraction + "000").prefix(3)))!)
            let expected = Int64(local.timeIntervalSince1970) * 1000 - Int64(offsetMinutes) * 60_000 + millis
            #expect(Timestamp.parse(text) == expected, "seed \(seed): '\(text)'")
        }
    }

    /// The writer against Foundation's calendar: every field, the zero padding, and back
    /// through the parser to the same instant.
    @Test("format writes the instant Foundation computes, and parse reads it back", arguments: [21, 22] as [UInt64])
    func formatRandom(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(secondsFromGMT: 0))
        // 1583-01-01 (Foundation's calendar is Julian before the Gregorian reform; RFC 3339's
        // is proleptic Gregorian) to 9999-12-31, and a few edges.
        let edges: [Int64] = [0, -1, 999, 1000, -12_212_553_600_000, 253_402_300_799_999]
        for index in 0..<5_000 {
            await yieldNowAndThen(index)
            let millis = index < edges.count ? edges[index] : Int64.random(in: -12_212_553_600_000...253_402_300_799_999, using: &random)
            let text = Timestamp.format(milliseconds: millis)
            let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
            let date = Date(timeIntervalSince1970: Double(seconds))
            let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            let expected =
                String(format: "%04d-%02d-%02dT%02d:%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
                + String(format: ".%03dZ", Int(millis - seconds * 1000))
            #expect(text == expected, "seed \(seed): \(millis)")
            #expect(Timestamp.parse(text) == millis, "seed \(seed): '\(text)'")
        }
        #expect(Timestamp.format(milliseconds: -62_135_596_800_000) == "0001-01-01T00:00:00.000Z")
        #expect(Timestamp.format(milliseconds: 253_402_300_800_000) == "10000-01-01T00:00:00.000Z")
    }

    /// Random strings, mostly made of the characters a date-time uses, and mutations of valid
    /// ones: the parser never traps, and whatever it accepts has the shape the schema gives.
    @Test("random and mutated strings never trap, and only schema-shaped strings are accepted", arguments: [11, 12] as [UInt64])
    func randomStrings(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let shape = try NSRegularExpression(
            pattern: #"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})$"#)
        let alphabet = Array("0123456789-:.TtZz+ ,é\u{0}9")
        let seeds = try Vectors.timestamps(accepted: true).map(\.text) + Vectors.timestamps(accepted: false).map(\.text)
        var accepted = 0
        for round in 0..<40_000 {
            await yieldNowAndThen(round)
            var characters: [Character]
            if round % 2 == 0 {
                characters = (0..<Int.random(in: 0...40, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            } else {
                characters = Array(seeds.randomElement(using: &random)!)
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    let position = Int.random(in: 0...characters.count, using: &random)
                    let replacement = alphabet.randomElement(using: &random)!
                    switch (Int.random(in: 0..<3, using: &random), position < characters.count) {
                    case (0, _), (_, false): characters.insert(replacement, at: position)
                    case (1, true): characters.remove(at: position)
                    default: characters[position] = replacement
                    }
                }
            }
            let text = String(characters)
            if Timestamp.parse(text) != nil {
                accepted += 1
                let range = NSRange(text.startIndex..., in: text)
                #expect(shape.firstMatch(in: text, range: range) != nil, "seed \(seed): accepted '\(text)'")
            }
        }
        #expect(accepted > 100, "the mutations should keep some strings valid")
    }
}
