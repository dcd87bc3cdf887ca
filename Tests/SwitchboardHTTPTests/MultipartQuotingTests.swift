import Testing

@testable import SwitchboardHTTP

/// A part's name and filename go inside quotes in its Content-Disposition header: nothing in
/// them may end the quotes or the header.
@Suite("Multipart quoting")
struct MultipartQuotingTests {
    @Test func quotesAndLineBreaksAreEscapedPerScalar() {
        #expect(HTTPRequest.Body.quoted("photo.jpg") == "photo.jpg")
        #expect(HTTPRequest.Body.quoted("a\"b") == "a%22b")
        // "\r\n" is one Character; each of its scalars is escaped.
        #expect(HTTPRequest.Body.quoted("a\r\nContent-Type: text/html") == "a%0D%0AContent-Type: text/html")
        // A quote with a combining mark is one Character, not `"`: its quote is escaped all the same.
        let escaped = HTTPRequest.Body.quoted("x\"\u{301}; name=\"other")
        #expect(!escaped.unicodeScalars.contains("\""))
        #expect(escaped == "x%22\u{301}; name=%22other")
    }
}
