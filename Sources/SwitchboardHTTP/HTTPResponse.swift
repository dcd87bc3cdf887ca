public import Foundation

/// A complete response: status, headers and the whole body (never more than the client's
/// ``SwitchboardHTTPClient/Configuration/maxResponseBytes``).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaderFields
    public var body: Data
    /// How many times the request was sent to get this response (retries and a Basic
    /// challenge count; a re-authentication's second request counts too).
    public var attempts: Int
    /// Describes the request for errors raised from this response; secrets already redacted.
    public var context: HTTPError.Context

    public init(status: Int, headers: HTTPHeaderFields = [:], body: Data = Data(), attempts: Int = 1, context: HTTPError.Context) {
        self.status = status
        self.headers = headers
        self.body = body
        self.attempts = attempts
        self.context = context
    }

    /// Whether the status is 2xx.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// The body as UTF-8 text, or `nil` when it is not UTF-8. Directory's log-in answers with
    /// the key as plain text.
    public var text: String? { String(data: body, encoding: .utf8) }

    /// Whether the body is HTML: a `text/html` content type, or a body whose first non-blank
    /// character is `<`. What ETO sends (a log-in page) when a session is gone.
    public var looksLikeHTML: Bool {
        if let type = headers["Content-Type"]?.lowercased(), type.contains("text/html") { return true }
        return body.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "<")
    }

    /// The vendor's error code and message in the body, read the way the request's API reads
    /// them; `nil` when the body carries none.
    public var vendorError: VendorError? { context.api.vendorError(self) }

    /// The body decoded as JSON.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/decoding`` whose message names the
    ///   field path that failed (e.g. `response.data[0].recordId`) and why; no body content.
    public func decode<T: Decodable>(_ type: T.Type = T.self, decoder: JSONDecoder = JSONDecoder()) throws(HTTPError) -> T {
        do {
            return try decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            throw HTTPError(
                .decoding, context: context, status: status, attempts: attempts,
                message: context.redactor.redact(Self.describe(error, as: T.self)))
        } catch {
            throw HTTPError(
                .decoding, context: context, status: status, attempts: attempts, message: context.redactor.redact("\(T.self): \(error)"))
        }
    }

    /// Throws the typed error this response stands for unless its status is 2xx.
    public func requireSuccess() throws(HTTPError) {
        guard !isSuccess else { return }
        throw HTTPError(response: self)
    }

    static func describe(_ error: DecodingError, as type: Any.Type) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return text.isEmpty ? "(top level)" : text
        }
        switch error {
        case .typeMismatch(let expected, let context):
            return "\(type) at \(path(context.codingPath)): expected \(expected); \(context.debugDescription)"
        case .valueNotFound(let expected, let context):
            return "\(type) at \(path(context.codingPath)): missing \(expected) value; \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "\(type) at \(path(context.codingPath + [key])): key not found"
        case .dataCorrupted(let context):
            return "\(type) at \(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(type): \(error)"
        }
    }
}

/// The code and message a back end puts in an error body.
public struct VendorError: Sendable, Hashable {
    /// FileMaker's `messages[0].code` (a string such as `"952"`), Spring's `error`, or `nil`.
    public var code: String?
    public var message: String?

    public init(code: String?, message: String?) {
        self.code = code
        self.message = message
    }

    /// Reads the error shapes our back ends use:
    /// - FileMaker: `{"messages":[{"code":"952","message":"…"}]}` (code `"0"` is success and
    ///   gives `nil`);
    /// - WCF faults: `Detail`, `Message`, `ExceptionDetail.Message`, `Fault.Detail`/`Reason`;
    /// - Spring Boot: `{"status":404,"error":"Not Found","message":"…"}`.
    public static func parse(_ body: Data) -> VendorError? {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return nil }
        func text(_ value: Any?) -> String? {
            switch value {
            case let string as String: return string
            case let number as NSNumber: return number.stringValue
            default: return nil
            }
        }
        if let messages = object["messages"] as? [[String: Any]], let first = messages.first {
            let code = text(first["code"])
            if code == "0" { return nil }
            return VendorError(code: code, message: text(first["message"]))
        }
        let fault = (object["Fault"] as? [String: Any]) ?? object
        if let detail = text(fault["Detail"]) ?? text(fault["Reason"]) ?? text(fault["Message"])
            ?? text((fault["ExceptionDetail"] as? [String: Any])?["Message"])
        {
            return VendorError(code: text(fault["Code"]) ?? text(fault["ErrorCode"]), message: detail)
        }
        if object["error"] != nil || object["message"] != nil {
            return VendorError(code: text(object["error"]), message: text(object["message"]))
        }
        return nil
    }
}
