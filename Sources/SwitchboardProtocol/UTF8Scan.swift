/// Runs `body` over a string's UTF-8 bytes without copying them when the string is native
/// (the common case); validators on the broker's hot path use it to avoid allocations.
@inline(__always)
func withUTF8Bytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
    return Array(text.utf8).withUnsafeBufferPointer(body)
}
