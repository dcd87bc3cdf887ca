// How a back end's HTTP failure becomes a settlement, once for every worker. The rule is the
// same for FileMaker, ETO and the Directory: a kind of failure another try can fix is retried, a
// request the back end refuses as such is a dead letter, an HTTP status decides the rest (5xx,
// 429 and 408 are retried). What differs between back ends is data, side by side below: which
// kinds count as transient, and the back end's own error codes (only FileMaker has any).

public import SwitchboardHTTP

/// One back end's table for settling an ``HTTPError``: ``settlement(for:fields:)`` applies it.
public struct SettlementRules: Sendable {
    /// What a back end's own error code (a response's ``HTTPError/vendorCode``) means.
    public enum VendorOutcome: Sendable, Hashable {
        /// The server or the session, not the record: retried with the group's back-off.
        case retry
        /// The request or the record, which no retry changes: a dead letter with the back end's
        /// message.
        case deadLetter
        /// A validation refused one of the record's values: a dead letter whose message names the
        /// code and the written fields the back end's message mentions, never that message (it
        /// can quote the value, which is what a person typed).
        case refusedValue
    }

    /// The back end, as the first word of every code: `filemaker-http-503`.
    public var backend: String
    /// The back end's name in messages: "FileMaker code 507".
    public var name: String
    /// Kinds of failure that another try can fix: retried, after the failure's own wait when it
    /// has one (``Settlement/delay(for:now:)``), otherwise the group's back-off.
    public var transient: Set<HTTPError.Code>
    /// Kinds of failure no retry changes: dead letters.
    public var permanent: Set<HTTPError.Code>
    /// The back end's numeric error codes by range, for failures of neither kind; a code in no
    /// range is settled by the HTTP status.
    public var vendorCodes: [(codes: ClosedRange<Int>, outcome: VendorOutcome)]

    public init(
        backend: String, name: String, transient: Set<HTTPError.Code>, permanent: Set<HTTPError.Code>,
        vendorCodes: [(codes: ClosedRange<Int>, outcome: VendorOutcome)] = []
    ) {
        self.backend = backend
        self.name = name
        self.transient = transient
        self.permanent = permanent
        self.vendorCodes = vendorCodes
    }

    /// Connection trouble, a body that cannot be read, a credential that cannot be had now, a
    /// task or client that stopped: every back end retries these.
    static let connectionAndCredential: Set<HTTPError.Code> = [
        .connectionFailed, .timeout, .tls, .decoding, .credentialRejected, .credentialUnavailable, .cancelled, .shutDown,
    ]
    /// A request that cannot be sent as built, a configuration that cannot work, an answer too
    /// large, an account's own credentials refused: no back end's retry changes these.
    static let unusable: Set<HTTPError.Code> = [.invalidRequest, .invalidConfiguration, .responseTooLarge, .invalidCredentials]

    /// FileMaker's Data API. 952 (token), 10 (auth header), 8xx (host, file not open, session
    /// limit): the server or the session. 5xx: a field validation refused this record's values;
    /// 1xx: a layout, field or record that does not exist; 2xx: access; 17xx: a request FileMaker
    /// cannot read.
    ///
    /// `notResent` is transient for ETO and the Directory but not here (one would be settled by
    /// its code or status). Only ETO's client raises it today, after its log-in page: FileMaker's
    /// and the Directory's rejections show the request was not acted on, so it is sent again.
    public static let fileMaker = SettlementRules(
        backend: "filemaker", name: "FileMaker", transient: connectionAndCredential, permanent: unusable,
        vendorCodes: [
            (952...952, .retry), (10...10, .retry), (800...899, .retry), (500...599, .refusedValue), (100...199, .deadLetter),
            (200...299, .deadLetter), (1700...1799, .deadLetter),
        ])

    /// ETO. A write not sent again after the log-in page (`notResent`) is retried: the recorder
    /// looks before it writes. ETO answers a bad request (a disabled program, an element that is
    /// not part of the TouchPoint) with a 400 WCF fault, which the status settles.
    public static let eto = SettlementRules(
        backend: "eto", name: "ETO", transient: connectionAndCredential.union([.notResent]), permanent: unusable)

    /// The Directory. A request it refuses as such is a dead letter carrying the status.
    public static let directory = SettlementRules(
        backend: "directory", name: "Directory", transient: connectionAndCredential.union([.notResent]), permanent: unusable)

    /// How `error` is settled under these rules: its kind first, then the back end's code, then
    /// the HTTP status (5xx, 429, 408 retried; other statuses dead letters); a failure none of
    /// them places is retried.
    /// - Parameter fields: the fields the request wrote, to name the ones a validation refusal
    ///   (``VendorOutcome/refusedValue``) mentions.
    public func settlement(for error: HTTPError, fields: [String] = []) -> Settlement {
        let text = error.description
        if transient.contains(error.code) {
            return .retry(after: Settlement.delay(for: error), code: Settlement.code("\(backend)-\(error.code)"), message: text)
        }
        if permanent.contains(error.code) {
            return .deadLetter(code: Settlement.code("\(backend)-\(error.code)"), message: text)
        }
        if let code = error.vendorCode, let number = Int(code), let rule = vendorCodes.first(where: { $0.codes.contains(number) }) {
            switch rule.outcome {
            case .retry: return .retry(after: nil, code: "\(backend)-\(code)", message: text)
            case .deadLetter: return .deadLetter(code: "\(backend)-\(code)", message: text)
            case .refusedValue:
                return .deadLetter(code: "\(backend)-\(code)", message: refusedValueMessage(error, code: code, fields: fields))
            }
        }
        if let status = error.status {
            if status >= 500 || status == 429 || status == 408 {
                return .retry(after: nil, code: "\(backend)-http-\(status)", message: text)
            }
            return .deadLetter(code: "\(backend)-http-\(status)", message: text)
        }
        return .retry(after: nil, code: Settlement.code("\(backend)-\(error.code)"), message: text)
    }

    /// A validation refusal in codes and names: the call, the back end's code, and which of the
    /// written fields its message names (the back end's own words are left out, see above).
    func refusedValueMessage(_ error: HTTPError, code: String, fields: [String]) -> String {
        let named = fields.filter { field in error.vendorMessage?.contains(field) ?? false }.sorted()
        let which =
            named.isEmpty
            ? "\(name)'s message names none of the written fields"
            : "field\(named.count == 1 ? "" : "s") \(named.map { "'\($0)'" }.joined(separator: ", "))"
        return
            "\(error.api) \(error.operation) failed: \(name) code \(code), a field's validation refused the record's value (\(which)); HTTP \(error.status ?? 0), attempts \(error.attempts)"
    }
}
