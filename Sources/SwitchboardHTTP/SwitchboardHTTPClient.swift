// The one outgoing HTTP client of a Switchboard process. Every back-end client (ETO,
// FileMaker, Directory, SAP) shares it, so they share a connection pool and one TLS policy:
// verification always on, TLS 1.2 or later, the system's roots plus our own CA files.

import AsyncHTTPClient
public import CoreMetrics
public import Foundation
public import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Sends ``HTTPRequest``s with AsyncHTTPClient, retrying by the ``RetryPolicy`` and answering
/// Basic challenges; logs one redacted line per attempt.
///
/// Create one per process and call ``shutdown()`` before it is released. Safe to use from any
/// task: it holds no mutable state of its own.
public final class SwitchboardHTTPClient: Sendable {
    /// How the client connects and what it accepts.
    public struct Configuration: Sendable {
        /// Establishing a connection (TCP and TLS) may take at most this long. Default 10 s.
        public var connectTimeout: Duration
        /// One attempt — connect, send, receive the whole body — may take at most this long,
        /// unless the request sets ``HTTPRequest/timeout``. Default 30 s.
        public var timeout: Duration
        /// A response body longer than this fails with ``HTTPError/Code/responseTooLarge``.
        /// Default 16 MiB.
        public var maxResponseBytes: Int
        /// PEM files of certificate authorities trusted in addition to the system's (a
        /// shelter's on-premises FileMaker server signed by its own CA). Default none.
        public var extraCAFiles: [String]
        /// Sent with every request, under the request's own headers. Default
        /// `User-Agent: Switchboard`.
        public var headers: HTTPHeaderFields
        /// Default ``RetryPolicy/default``.
        public var retryPolicy: RetryPolicy
        /// Threads of the client's own event loop group, which every connection runs on.
        /// Default 1: a worker's few thousand requests a second leave one thread far from busy.
        /// On NIO's shared group (a thread per core) the connections were spread over every
        /// thread, each waking for its own; on the workers bench one thread cut the FileMaker
        /// writer's CPU per check-in by about a fifth and its context switches from 9.3–9.6 to
        /// 7.6–8.2 (bench/RESULTS.md).
        public var eventLoopThreads: Int

        public init(
            connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(30), maxResponseBytes: Int = 16 << 20,
            extraCAFiles: [String] = [], headers: HTTPHeaderFields = ["User-Agent": "Switchboard"], retryPolicy: RetryPolicy = .default,
            eventLoopThreads: Int = 1
        ) {
            self.connectTimeout = connectTimeout
            self.timeout = timeout
            self.maxResponseBytes = maxResponseBytes
            self.extraCAFiles = extraCAFiles
            self.headers = headers
            self.retryPolicy = retryPolicy
            self.eventLoopThreads = eventLoopThreads
        }
    }

    public let configuration: Configuration
    private let client: HTTPClient
    private let eventLoops: MultiThreadedEventLoopGroup
    /// The default logger of requests; the ``AuthenticatedExecutor`` logs through it too.
    let logger: Logger
    private let metrics: HTTPMetrics

    /// Creates the client. Reads every key of `configuration`.
    ///
    /// - Throws: ``HTTPError`` with code ``HTTPError/Code/invalidConfiguration`` when an extra
    ///   CA file cannot be read or holds no PEM certificate, or `eventLoopThreads` is below 1.
    /// `metrics` receives `switchboard_backend_requests_total` and `…_request_seconds` for each
    /// attempt (deploy/prometheus/README.md).
    public init(
        configuration: Configuration = Configuration(), logger: Logger, metrics: any MetricsFactory = MetricsSystem.factory
    ) throws(HTTPError) {
        self.metrics = HTTPMetrics(factory: metrics)
        guard configuration.eventLoopThreads >= 1 else {
            throw HTTPError(
                .invalidConfiguration, context: .init(api: .generic("http"), operation: "configure", method: "-", redactedURL: "-"),
                message: "eventLoopThreads must be at least 1, got \(configuration.eventLoopThreads)")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        tls.minimumTLSVersion = .tlsv12
        tls.trustRoots = .default
        for file in configuration.extraCAFiles {
            // Loaded here, not left to the first handshake, so a bad path fails at start-up.
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(file)
                guard !certificates.isEmpty else { throw NIOSSLError.failedToLoadCertificate }
                tls.additionalTrustRoots.append(.certificates(certificates))
            } catch {
                throw HTTPError(
                    .invalidConfiguration, context: .init(api: .generic("http"), operation: "configure", method: "-", redactedURL: "-"),
                    message: "cannot load CA file \(file): \(error)")
            }
        }
        var ahc = HTTPClient.Configuration(
            tlsConfiguration: tls,
            // Redirects are not followed: none of our back ends redirects an API call, and a
            // followed redirect could carry a credential header to another host.
            redirectConfiguration: .disallow,
            timeout: .init(connect: configuration.connectTimeout.timeAmount, read: nil),
            decompression: .disabled
        )
        // Connection failures surface at once so the retry policy (which knows idempotency
        // and logs every attempt) decides, instead of the pool retrying silently until the
        // deadline.
        ahc.connectionPool.retryConnectionEstablishment = false
        self.configuration = configuration
        self.logger = logger
        // Made last, once nothing above can throw: only `shutdown` ends its threads.
        eventLoops = MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoopThreads)
        self.client = HTTPClient(eventLoopGroup: eventLoops, configuration: ahc, backgroundActivityLogger: logger)
    }

    /// Closes every connection and ends the client's event loop threads. Requests in flight
    /// fail; the client cannot be used afterwards.
    public func shutdown() async throws {
        do {
            try await client.shutdown()
        } catch {
            try? await eventLoops.shutdownGracefully()
            throw error
        }
        try await eventLoops.shutdownGracefully()
    }

    /// Sends the request and returns the response whatever its status, after retries.
    ///
    /// - Throws: ``HTTPError`` when no usable response arrived: ``HTTPError/Code/connectionFailed``,
    ///   ``HTTPError/Code/timeout``, ``HTTPError/Code/tls``, ``HTTPError/Code/responseTooLarge``,
    ///   ``HTTPError/Code/invalidRequest``, ``HTTPError/Code/cancelled``.
    public func response(for request: HTTPRequest, logger: Logger? = nil) async throws(HTTPError) -> HTTPResponse {
        let logger = logger ?? self.logger
        let policy = configuration.retryPolicy
        var prepared = request
        prepared.authorizer?.authorize(&prepared)
        var redactor = Redactor(secrets: prepared.allSecrets)
        var context = HTTPError.Context(prepared, redactor: redactor)
        var sent = 0
        var tries = 0
        var challengeAnswered = false

        while true {
            sent += 1
            tries += 1
            let outcome = await attempt(prepared, number: sent, context: context, logger: logger)
            let retryOutcome: RetryPolicy.Outcome
            switch outcome {
            case .success(var response):
                response.attempts = sent
                if response.status == 401, !challengeAnswered, let authorizer = prepared.authorizer,
                    authorizer.answerChallenge(response, request: &prepared)
                {
                    challengeAnswered = true
                    tries -= 1
                    redactor = Redactor(secrets: prepared.allSecrets)
                    context = HTTPError.Context(prepared, redactor: redactor)
                    continue
                }
                retryOutcome = .response(
                    status: response.status, retryAfter: response.headers["Retry-After"].flatMap { RetryPolicy.parseRetryAfter($0) },
                    logicalFailure: prepared.api.isLogicalFailure(response))
                guard case .retry(let delay) = policy.decide(attempt: tries, idempotent: prepared.idempotent, outcome: retryOutcome) else {
                    return response
                }
                try await pause(delay, context: context, attempts: sent)
            case .failure(let failure):
                var error = failure.error
                error.attempts = sent
                retryOutcome = failure.retryable ? .connectionFailure : .permanentFailure
                guard case .retry(let delay) = policy.decide(attempt: tries, idempotent: prepared.idempotent, outcome: retryOutcome) else {
                    throw error
                }
                try await pause(delay, context: context, attempts: sent)
            }
        }
    }

    /// Sends the request and returns its 2xx response, after retries.
    ///
    /// - Throws: ``HTTPError``; for a non-2xx response ``HTTPError/Code/vendor`` (the body
    ///   carries the vendor's code or message) or ``HTTPError/Code/httpStatus``.
    public func execute(_ request: HTTPRequest, logger: Logger? = nil) async throws(HTTPError) -> HTTPResponse {
        let response = try await response(for: request, logger: logger)
        try response.requireSuccess()
        return response
    }

    /// Sends the request and decodes its 2xx JSON body.
    public func execute<T: Decodable>(
        _ request: HTTPRequest, as type: T.Type, decoder: JSONDecoder = JSONDecoder(), logger: Logger? = nil
    ) async throws(HTTPError) -> T {
        try await execute(request, logger: logger).decode(T.self, decoder: decoder)
    }

    private func pause(_ delay: Duration, context: HTTPError.Context, attempts: Int) async throws(HTTPError) {
        do {
            try await configuration.retryPolicy.sleep(delay)
        } catch {
            throw HTTPError(.cancelled, context: context, attempts: attempts, message: "cancelled while waiting to retry")
        }
    }

    private struct AttemptFailure: Error {
        var error: HTTPError
        var retryable: Bool
    }

    /// One attempt: send, collect the whole body, log one line.
    private func attempt(
        _ request: HTTPRequest, number: Int, context: HTTPError.Context, logger: Logger
    ) async -> Result<HTTPResponse, AttemptFailure> {
        let started = ContinuousClock.now
        let result = await send(request, context: context)
        let elapsed = ContinuousClock.now - started
        metrics.record(
            backend: context.api.name, operation: context.operation, status: (try? result.get()).map { String($0.status) } ?? "error",
            elapsed: elapsed)
        let level: Logger.Level
        switch result {
        case .success(let response): level = response.isSuccess ? .debug : .info
        case .failure: level = .info
        }
        // The line's metadata (a redacted URL among it) is only built when the line is written.
        guard logger.logLevel <= level else { return result }
        var metadata: Logger.Metadata = [
            "http.api": "\(context.api.name)", "http.operation": "\(context.operation)", "http.method": "\(context.method)",
            "http.url": "\(context.redactedURL)", "http.attempt": "\(number)",
            "http.duration_ms": "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)",
        ]
        switch result {
        case .success(let response):
            metadata["http.status"] = "\(response.status)"
            logger.log(level: level, "http attempt", metadata: metadata)
        case .failure(let failure):
            metadata["http.error"] = "\(failure.error.code)"
            metadata["http.error_message"] = "\(failure.error.message)"
            logger.log(level: level, "http attempt failed", metadata: metadata)
        }
        return result
    }

    private func send(_ request: HTTPRequest, context: HTTPError.Context) async -> Result<HTTPResponse, AttemptFailure> {
        func failure(_ code: HTTPError.Code, _ message: String, retryable: Bool) -> Result<HTTPResponse, AttemptFailure> {
            .failure(
                AttemptFailure(error: HTTPError(code, context: context, message: context.redactor.redact(message)), retryable: retryable))
        }
        if request.path.contains(.credential) {
            return failure(.invalidRequest, "a credential path segment was never filled (no PathTokenAuthorizer?)", retryable: false)
        }
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue)
        let (body, contentType) = request.body.encoded()
        var headers = configuration.headers
        if let contentType { headers["Content-Type"] = contentType }
        headers = headers.merging(request.headers)
        for field in headers { outgoing.headers.add(name: field.name, value: field.value) }
        if case .none = request.body {
        } else {
            outgoing.body = .bytes(ByteBuffer(data: body))
        }
        let deadline = NIODeadline.now() + (request.timeout ?? configuration.timeout).timeAmount
        do {
            let response = try await client.execute(outgoing, deadline: deadline, logger: nil)
            let bytes = try await response.body.collect(upTo: configuration.maxResponseBytes)
            var fields = HTTPHeaderFields()
            for (name, value) in response.headers { fields.add(name, value) }
            return .success(HTTPResponse(status: Int(response.status.code), headers: fields, body: Data(buffer: bytes), context: context))
        } catch let error as NIOTooManyBytesError {
            _ = error
            return failure(.responseTooLarge, "response body exceeds \(configuration.maxResponseBytes) bytes", retryable: false)
        } catch let error as HTTPClientError {
            switch error {
            case .connectTimeout, .tlsHandshakeTimeout, .deadlineExceeded, .readTimeout, .writeTimeout, .getConnectionFromPoolTimeout:
                return failure(.timeout, error.shortDescription, retryable: true)
            case .remoteConnectionClosed:
                return failure(.connectionFailed, error.shortDescription, retryable: true)
            case .cancelled:
                return failure(.cancelled, error.shortDescription, retryable: false)
            case .alreadyShutdown:
                return failure(.shutDown, error.shortDescription, retryable: false)
            case .invalidURL, .emptyHost, .emptyScheme:
                return failure(.invalidRequest, error.shortDescription, retryable: false)
            default:
                if error.shortDescription.hasPrefix("Unsupported scheme") || error.shortDescription.hasPrefix("Invalid header") {
                    return failure(.invalidRequest, error.shortDescription, retryable: false)
                }
                return failure(.connectionFailed, error.shortDescription, retryable: false)
            }
        } catch let error as NIOSSLError {
            return failure(.tls, "TLS handshake failed: \(error)", retryable: false)
        } catch let error as BoringSSLError {
            return failure(.tls, "TLS failed: \(error)", retryable: false)
        } catch is CancellationError {
            return failure(.cancelled, "cancelled", retryable: false)
        } catch {
            // Connection refused or reset, a channel closed early: NIO reports these as IOError,
            // NIOConnectionError or ChannelError. All are worth another attempt.
            return failure(.connectionFailed, "\(error)", retryable: true)
        }
    }
}

extension Duration {
    var timeAmount: TimeAmount {
        let (seconds, attoseconds) = components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
