import Foundation

/// Runs `body` over a string's UTF-8 bytes without copying them when the string is native
/// (the common case); validators on the broker's hot path use it to avoid allocations.
@inline(__always)
func withUTF8Bytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
    return Array(text.utf8).withUnsafeBufferPointer(body)
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether these bytes are exactly `word`'s: a JSON key read in place against a literal.
    /// Compared with memcmp; `elementsEqual(word.utf8)` walks the literal through String's
    /// generic UTF-8 iterator, and cost the checking thread an eighth of its time.
    @inline(__always)
    func spells(_ word: StaticString) -> Bool {
        guard count == word.utf8CodeUnitCount else { return false }
        guard let start = baseAddress, count > 0 else { return true }
        return memcmp(start, word.utf8Start, count) == 0
    }
}
