import Foundation

/// One part of a `multipart/form-data` body (RFC 7578), as FileMaker's container upload takes it.
struct MultipartPart: Sendable {
    var name: String?
    var filename: String?
    var contentType: String?
    var body: Data

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// The `boundary` parameter of a multipart Content-Type, unquoted.
    static func boundary(of contentType: String) throws -> String {
        guard
            let boundaryParameter = contentType.split(separator: ";").map({ $0.trimmingCharacters(in: .whitespaces) })
                .first(where: { $0.lowercased().hasPrefix("boundary=") })
        else { throw Malformed(description: "multipart Content-Type has no boundary") }
        var boundary = String(boundaryParameter.dropFirst("boundary=".count))
        if boundary.hasPrefix("\""), boundary.hasSuffix("\""), boundary.count >= 2 { boundary = String(boundary.dropFirst().dropLast()) }
        guard !boundary.isEmpty else { throw Malformed(description: "multipart boundary is empty") }
        return boundary
    }

    static func parse(_ body: Data, contentType: String) throws -> [MultipartPart] {
        let delimiter = Data("--\(try boundary(of: contentType))".utf8)
        let crlf = Data("\r\n".utf8)
        let headerEnd = Data("\r\n\r\n".utf8)
        guard var cursor = body.range(of: delimiter)?.upperBound else {
            throw Malformed(description: "multipart body does not contain its boundary")
        }
        var parts: [MultipartPart] = []
        while true {
            // After a delimiter: `--` ends the body, otherwise CRLF and a part follow.
            if body[cursor...].starts(with: Data("--".utf8)) { break }
            guard body[cursor...].starts(with: crlf) else { throw Malformed(description: "multipart delimiter not followed by CRLF") }
            cursor += 2
            guard let headersRange = body.range(of: headerEnd, in: cursor..<body.endIndex) else {
                throw Malformed(description: "multipart part has no end of headers")
            }
            let headerText = String(decoding: body[cursor..<headersRange.lowerBound], as: UTF8.self)
            guard let next = body.range(of: crlf + delimiter, in: headersRange.upperBound..<body.endIndex) else {
                throw Malformed(description: "multipart part is not closed by the boundary")
            }
            var part = MultipartPart(body: body.subdata(in: headersRange.upperBound..<next.lowerBound))
            for line in headerText.components(separatedBy: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if name == "content-type" { part.contentType = value }
                if name == "content-disposition" {
                    for parameter in value.split(separator: ";").dropFirst() {
                        let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                        guard pair.count == 2 else { continue }
                        let unquoted = pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"") ? String(pair[1].dropFirst().dropLast()) : pair[1]
                        if pair[0] == "name" { part.name = unquoted }
                        if pair[0] == "filename" { part.filename = unquoted }
                    }
                }
            }
            parts.append(part)
            cursor = next.upperBound
        }
        return parts
    }
}
