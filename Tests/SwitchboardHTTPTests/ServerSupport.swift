import HTTPTypes
import Hummingbird
import NIOCore

// Kept apart from files that import SwitchboardHTTP, whose HTTPResponse would make the name
// ambiguous here.

extension Response {
    /// A response with a text body and a content type.
    static func text(
        _ status: HTTPResponse.Status, _ text: String, contentType: String = "application/json", headers: HTTPFields = [:]
    )
        -> Response
    {
        var fields = headers
        fields[.contentType] = contentType
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
