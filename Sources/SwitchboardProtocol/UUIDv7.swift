public import Foundation
import Synchronization

/// UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, then random bits, so ids sort by
/// creation time. Ids from one process are strictly increasing even within a millisecond
/// (RFC 9562 §6.2, method 1: a 12-bit counter in `rand_a`, seeded at random each millisecond).
public enum UUIDv7 {
    private static let state = Mutex<(milliseconds: UInt64, counter: UInt16)>((0, 0))

    public static func make(milliseconds now: UInt64 = UInt64(Date().timeIntervalSince1970 * 1000)) -> UUID {
        let (ms, counter) = state.withLock { state -> (UInt64, UInt16) in
            if now > state.milliseconds {
                state = (now, UInt16.random(in: 0...0x3FF))
            } else if state.counter < 0xFFF {
                state.counter += 1
            } else {
                // Counter exhausted: borrow the next millisecond rather than repeat.
                state = (state.milliseconds + 1, UInt16.random(in: 0...0x3FF))
            }
            return (state.milliseconds, state.counter)
        }
        return encode(milliseconds: ms, counter: counter)
    }

    /// Lays out a v7 id from its time and 12-bit counter, with fresh random bits.
    public static func encode(milliseconds ms: UInt64, counter: UInt16) -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<6 { bytes[i] = UInt8(truncatingIfNeeded: ms >> (8 * (5 - i))) }
        bytes[6] = 0x70 | UInt8((counter >> 8) & 0x0F)
        bytes[7] = UInt8(truncatingIfNeeded: counter)
        // One draw for the eight random bytes: each `next()` is a getrandom call.
        var random = SystemRandomNumberGenerator()
        let bits: UInt64 = random.next()
        for i in 8..<16 { bytes[i] = UInt8(truncatingIfNeeded: bits >> (8 * (i - 8))) }
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// The id as the protocol writes it: lowercase, hyphenated.
    public static func string() -> String { lowercase(make()) }

    /// `uuid.uuidString.lowercased()` without the formatting and the second string: ids are
    /// made for every request and event.
    static func lowercase(_ uuid: UUID) -> String {
        let hex = Array("0123456789abcdef".utf8)
        return withUnsafeBytes(of: uuid.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { out in
                var at = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    out[at] = hex[Int(byte >> 4)]
                    out[at + 1] = hex[Int(byte & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }

    /// Whether `text` is a canonical (lowercase, hyphenated) UUID of version 7 and
    /// the RFC 9562 variant.
    public static func isValid(_ text: String) -> Bool {
        withUTF8Bytes(text) { b in
            guard b.count == 36 else { return false }
            for i in 0..<36 {
                let c = b[i]
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    guard c == 0x2D else { return false }
                } else {
                    // Canonical form only: lower case, so one id has one spelling (the journal's
                    // uniqueness is by bytes).
                    guard (48...57).contains(c) || (97...102).contains(c) else { return false }
                }
            }
            let variant = b[19]
            return b[14] == UInt8(ascii: "7")
                && (variant == UInt8(ascii: "8") || variant == UInt8(ascii: "9") || variant == UInt8(ascii: "a")
                    || variant == UInt8(ascii: "b"))
        }
    }

    /// The creation time encoded in a v7 id, in Unix milliseconds.
    public static func milliseconds(of text: String) -> UInt64? {
        guard isValid(text) else { return nil }
        let hex = text.replacingOccurrences(of: "-", with: "").prefix(12)
        return UInt64(hex, radix: 16)
    }
}
