import Crypto
import Foundation
import Hummingbird
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import SwiftASN1
import SwitchboardHTTP
import SwitchboardTesting
import Synchronization
import X509

// Hummingbird exports types named HTTPRequest, HTTPResponse and HTTPError too.
typealias OutRequest = SwitchboardHTTP.HTTPRequest
typealias OutError = SwitchboardHTTP.HTTPError

/// Runs a Hummingbird application on 127.0.0.1 and an ephemeral port for the duration of `body`.
/// The port comes from `onServerRunning`, so nothing waits on a timer.
func withServer<T: Sendable>(
    _ router: Router<BasicRequestContext>, tls: TLSConfiguration? = nil, _ body: @Sendable (_ port: Int) async throws -> T
) async throws -> T {
    let (ports, portContinuation) = AsyncStream<Int>.makeStream()
    var serverLogger = Logger(label: "test-server")
    serverLogger.logLevel = .critical
    let app = Application(
        router: router,
        server: try tls.map { try .tls(.http1(), tlsConfiguration: $0) } ?? .http1(),
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            portContinuation.yield(channel.localAddress?.port ?? 0)
            portContinuation.finish()
        },
        logger: serverLogger
    )
    // Stopped by graceful shutdown, not by cancelling its task (see `withEmulator`: a cancelled
    // server drops accepted connections and swift-nio traps on them).
    let services = ServiceGroup(configuration: .init(services: [app], logger: serverLogger))
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await services.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else { throw WaitTimedOut(description: "server did not start") }
        do {
            let value = try await body(port)
            await services.triggerGracefulShutdown()
            try await group.waitForAll()
            return value
        } catch {
            await services.triggerGracefulShutdown()
            try? await group.waitForAll()
            throw error
        }
    }
}

let quietLogger: Logger = {
    var logger = Logger(label: "test-client")
    logger.logLevel = .error
    return logger
}()

/// A client whose retries wait for nothing and record the delays they were asked for.
func withClient<T: Sendable>(
    maxAttempts: Int = 3, maxRetryAfter: Duration = .seconds(30), timeout: Duration = .seconds(10), maxResponseBytes: Int = 1 << 20,
    extraCAFiles: [String] = [], logger: Logger = quietLogger,
    _ body: @Sendable (SwitchboardHTTPClient, DelayRecorder) async throws -> T
) async throws -> T {
    let recorder = DelayRecorder()
    let policy = RetryPolicy(
        maxAttempts: maxAttempts, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5), maxRetryAfter: maxRetryAfter,
        sleep: { delay in
            recorder.record(delay)
            try Task.checkCancellation()
        })
    let client = try SwitchboardHTTPClient(
        configuration: .init(
            connectTimeout: .seconds(5), timeout: timeout, maxResponseBytes: maxResponseBytes, extraCAFiles: extraCAFiles,
            retryPolicy: policy),
        logger: logger)
    do {
        let value = try await body(client, recorder)
        try await client.shutdown()
        return value
    } catch {
        try await client.shutdown()
        throw error
    }
}

/// A value behind a lock that escaping closures (route handlers) can share.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

final class DelayRecorder: Sendable {
    private let delays = Mutex<[Duration]>([])
    func record(_ delay: Duration) { delays.withLock { $0.append(delay) } }
    var recorded: [Duration] { delays.withLock { $0 } }
}

/// Counts calls per route, for asserting how many attempts reached the server.
final class Counter: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    /// Adds one and returns the new count.
    @discardableResult func next(_ key: String) -> Int {
        counts.withLock { counts in
            counts[key, default: 0] += 1
            return counts[key]!
        }
    }
    func count(_ key: String) -> Int { counts.withLock { $0[key, default: 0] } }
}

/// A certificate authority and a leaf for `localhost`, made fresh for a test.
struct TestPKI {
    let caPEM: String
    let leafPEM: String
    let leafKeyPEM: String

    init() throws {
        let caKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("Switchboard Test CA") }
        let now = Date()
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey), notValidBefore: now - 3600,
            notValidAfter: now + 3600, issuer: caName, subject: caName,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                KeyUsage(keyCertSign: true)
            },
            issuerPrivateKey: .init(caKey))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: now - 3600,
            notValidAfter: now + 3600, issuer: caName, subject: try DistinguishedName { CommonName("localhost") },
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                KeyUsage(digitalSignature: true)
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost")])
            },
            issuerPrivateKey: .init(caKey))
        caPEM = try ca.serializeAsPEM().pemString
        leafPEM = try leaf.serializeAsPEM().pemString
        leafKeyPEM = leafKey.pemRepresentation
    }

    func serverTLS() throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(leafPEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(leafKeyPEM.utf8), format: .pem)))
    }
}
