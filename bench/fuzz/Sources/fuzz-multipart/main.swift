import Foundation
import FuzzSupport

runFuzzer()

/// The FileMaker emulator's `multipart/form-data` parser (container uploads,
/// `POST …/records/{id}/containers/{field}/{repetition}`), as it runs on a request: the
/// Content-Type header's text and the body's bytes. Multipart.swift is the emulator's own file,
/// linked into this target. Input: the header's text up to the first newline (at most 200
/// bytes), then the body.
///
/// Properties:
/// - a parse ends (a part or an error), whatever the bytes;
/// - every part's body is a run of the input's bytes that holds no CRLF + delimiter: the parser
///   stops a part at the first one;
/// - there are no more parts than delimiters in the body;
/// - the input's bytes, sent as a file in a well-formed body (boundary chosen not to occur in
///   them), come back as exactly one part with that name, filename, type and body.
func fuzzMultipart(_ data: Data) {
    let newline = data.prefix(200).firstIndex(of: 0x0A)
    let contentType = String(decoding: newline.map { data[data.startIndex..<$0] } ?? data.prefix(0), as: UTF8.self)
    let body = Data(newline.map { data[data.index(after: $0)...] } ?? data[...])
    if let parts = try? MultipartPart.parse(body, contentType: contentType), let boundary = try? MultipartPart.boundary(of: contentType) {
        let delimiter = Data("--\(boundary)".utf8)
        fuzzCheck(parts.count <= occurrences(of: delimiter, in: body), "more parts than delimiters")
        for part in parts {
            fuzzCheck(body.range(of: part.body) != nil || part.body.isEmpty, "a part's body is not bytes of the input")
            fuzzCheck(part.body.range(of: Data("\r\n".utf8) + delimiter) == nil, "a part's body holds a delimiter")
        }
    }
    roundTrip(Data(data))
}

func occurrences(of needle: Data, in haystack: Data) -> Int {
    var count = 0
    var from = haystack.startIndex
    while let found = haystack.range(of: needle, in: from..<haystack.endIndex) {
        count += 1
        from = found.upperBound
    }
    return count
}

/// Arbitrary bytes as a file in a body a client writes: they must come back unchanged.
func roundTrip(_ file: Data) {
    var boundary = "switchboard-fuzz"
    var n = 0
    while file.range(of: Data(boundary.utf8)) != nil {
        n += 1
        boundary = "switchboard-fuzz-\(n)-\(file.count)"
    }
    var body = Data("--\(boundary)\r\n".utf8)
    body += Data("Content-Disposition: form-data; name=\"upload\"; filename=\"photo.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
    body += file
    body += Data("\r\n--\(boundary)--\r\n".utf8)
    do {
        let parts = try MultipartPart.parse(body, contentType: "multipart/form-data; boundary=\"\(boundary)\"")
        fuzzCheck(parts.count == 1, "a one-file body parsed as \(parts.count) parts")
        guard let part = parts.first else { return }
        fuzzCheck(part.name == "upload" && part.filename == "photo.jpg" && part.contentType == "image/jpeg", "the part's headers changed")
        fuzzCheck(part.body == file, "the file's bytes changed")
    } catch {
        fuzzCheck(false, "a well-formed one-file body was refused: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzMultipart(FuzzInput.data(start, count))
    return 0
}
