import Foundation
import SwitchboardSecurity
import SwitchboardTesting
import Testing
import ZeroMQ

@testable import SwitchboardBroker

/// One client whose key is on no allow-list, reconnecting as fast as it can: every attempt is a
/// ZAP denial. Issue 26 measured 1,161 log lines a second from one such client.
@Suite("Refusal log flood")
struct RefusalLogFloodTests {
    /// "connection refused" lines of unknown keys, and the refusals they account for: those
    /// lines, plus the `suppressed=N` they and the summaries carry.
    static func logged(_ capture: LogCapture) -> (lines: Int, accounted: Int) {
        func suppressed(_ line: String) -> Int {
            guard let range = line.range(of: #"suppressed=[0-9]+"#, options: .regularExpression) else { return 0 }
            return Int(line[range].dropFirst("suppressed=".count)) ?? 0
        }
        let lines = capture.all.filter { $0.contains("connection refused") && $0.contains("unknown key") }
        let summaries = capture.all.filter { $0.contains("connection refusals left out of the log") && $0.contains("kind=unknown-key") }
        return (lines.count, lines.count + (lines + summaries).map(suppressed).reduce(0, +))
    }

    @Test("an unknown key reconnecting in a loop gets a few log lines a second, and the lines count every refusal")
    func unknownKeyReconnecting() async throws {
        let capture = LogCapture()
        let secure = try await SecureBroker.start(principals: SecurityTests.principals, logger: capture.logger)
        let security = try #require(secure.fixture.broker.security)
        let stranger = try CurveKeyPair.generate()
        let unknown: [SocketOption] = [
            .curvePublicKey(stranger.publicKey), .curveSecretKey(stranger.secretKey), .curveServerKey(secure.broker.publicKey),
        ]
        // As a client program does when its connection fails: a fresh socket, at once, again and
        // again (each waits for its handshake's end, so every attempt reaches ZAP).
        let started = ContinuousClock.now
        for _ in 0..<300 {
            #expect(try await secure.handshake(unknown, secure.fixture.endpoints.ingest) == .handshakeFailedAuth)
        }
        let elapsed = ContinuousClock.now - started
        // ZAP logs (or counts) a denial before the client hears of it.
        #expect(security.refusals["unknown-key"] == 300)
        // The flood's tail is counted by the summary the broker writes a second after it stops.
        try await waitUntil("every refusal accounted for in the log") { Self.logged(capture).accounted >= 300 }
        let (lines, accounted) = Self.logged(capture)
        // A window opens at most once a second, the first with the first refusal.
        let windows = Int((elapsed / .seconds(1)).rounded(.up)) + 1
        #expect(lines <= BrokerSecurity.refusalLinesPerSecond * windows, "\(lines) lines for 300 refusals in \(elapsed)")
        #expect(accounted == 300, "each refusal counted once: \(lines) lines, \(accounted) accounted for")
        await secure.stop()
    }
}
