// The byte scanner behind the fast header readers (the broker's `SettleHeader.plain` and
// `GroupAcks.plain`, a member's `DeliverHeader.plain`): it reads only the compact spelling our
// members and brokers write, and answers nil for anything else, which the general parse then
// reads (and refuses) as it always did.

struct PlainHeaderScan {
    let bytes: UnsafeBufferPointer<UInt8>
    var at = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    var atEnd: Bool { at == bytes.count }

    mutating func take(_ byte: UInt8) -> Bool {
        guard at < bytes.count, bytes[at] == byte else { return false }
        at += 1
        return true
    }

    /// A key and its colon, `"…":` (no escapes): the key's bytes.
    mutating func key() -> UnsafeBufferPointer<UInt8>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = at
        while at < bytes.count, bytes[at] != UInt8(ascii: "\"") { at += 1 }
        let key = UnsafeBufferPointer(rebasing: bytes[start..<at])
        guard take(UInt8(ascii: "\"")), take(UInt8(ascii: ":")) else { return nil }
        return key
    }

    /// A string of a–z 0–9 _ - only (no escapes).
    mutating func name() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = at
        while at < bytes.count, bytes[at] != UInt8(ascii: "\"") {
            let c = bytes[at]
            guard (97...122).contains(c) || (48...57).contains(c) || c == 95 || c == 45 else { return nil }
            at += 1
        }
        guard take(UInt8(ascii: "\"")) else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<(at - 1)]), as: UTF8.self)
    }

    /// A timestamp's string: 1–40 of 0–9 - : . + T Z (no escapes, nothing the general parse
    /// would read differently).
    mutating func timestamp() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = at
        while at < bytes.count, bytes[at] != UInt8(ascii: "\"") {
            let c = bytes[at]
            guard (48...58).contains(c) || c == 45 || c == 46 || c == 43 || c == 84 || c == 90, at - start < 40 else { return nil }
            at += 1
        }
        guard at > start, take(UInt8(ascii: "\"")) else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<(at - 1)]), as: UTF8.self)
    }

    /// A positive integer of 1 to `digits` digits (at most 18) with no leading zero, in `range`.
    mutating func integer(digits: Int, in range: ClosedRange<Int64>) -> Int64? {
        let start = at
        guard at < bytes.count, (49...57).contains(bytes[at]) else { return nil }
        var value: Int64 = 0
        while at < bytes.count, (48...57).contains(bytes[at]) {
            guard at - start < digits else { return nil }
            value = value * 10 + Int64(bytes[at] - 48)
            at += 1
        }
        return range.contains(value) ? value : nil
    }
}
