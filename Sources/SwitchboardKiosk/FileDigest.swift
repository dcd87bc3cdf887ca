public import Foundation

/// What names an imported file in the outbox's record of imports, so the same file is not
/// imported twice (under any name).
public enum FileDigest {
    /// FNV-1a (64-bit) over the bytes, then the length: `<hex>-<count>`. It identifies a file; it
    /// is no secret and no defence against a file made to collide.
    public static func of(_ data: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return String(hash, radix: 16) + "-" + String(data.count)
    }
}
