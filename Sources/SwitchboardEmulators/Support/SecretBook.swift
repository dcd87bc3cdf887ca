import Foundation
import Synchronization

/// Every secret the emulators hand out or hold (tokens, API keys, connection ids, passwords),
/// each with a label that names it without revealing it (`filemaker-session-3`). The request log
/// and the emulator's own log lines show labels in place of secrets, so a test can tell which
/// credential a request used while nothing secret is written anywhere.
final class SecretBook: Sendable {
    private struct State {
        var labels: [String: String] = [:]
        var counters: [String: Int] = [:]
    }

    private let state = Mutex(State())

    /// Records a new secret and returns its label, `<kind>-<n>`.
    @discardableResult
    func register(_ secret: String, kind: String) -> String {
        state.withLock { state in
            if let existing = state.labels[secret] { return existing }
            let n = state.counters[kind, default: 0] + 1
            state.counters[kind] = n
            let label = "\(kind)-\(n)"
            state.labels[secret] = label
            return label
        }
    }

    /// Records a secret under a fixed label (a seeded password: `password-of-admin`).
    func register(_ secret: String, label: String) {
        guard !secret.isEmpty else { return }
        state.withLock { $0.labels[secret] = label }
    }

    func label(for secret: String) -> String? {
        state.withLock { $0.labels[secret] }
    }

    func reset() { state.withLock { $0 = State() } }

    /// `text` with every known secret in it replaced by `‹label›`. Long secrets only (≥ 8
    /// characters), so that short ordinary words are never mangled.
    func mask(_ text: String) -> String {
        let known = state.withLock { $0.labels }
        var result = text
        let length = text.utf8.count
        for (secret, label) in known where secret.utf8.count <= length && secret.count >= 8 && result.contains(secret) {
            result = result.replacingOccurrences(of: secret, with: "‹\(label)›")
        }
        return result
    }

    /// A path with each segment that is a secret (or contains one) masked.
    func maskPath(_ segments: [String]) -> String {
        let known = state.withLock { $0.labels }
        return "/"
            + segments.map { segment in
                if let label = known[segment] { return "‹\(label)›" }
                // Most segments are shorter than any secret: skip the substring search for them.
                let length = segment.utf8.count
                guard length >= 8 else { return segment }
                var masked = segment
                for (secret, label) in known where secret.utf8.count <= length && secret.count >= 8 && masked.contains(secret) {
                    masked = masked.replacingOccurrences(of: secret, with: "‹\(label)›")
                }
                return masked
            }.joined(separator: "/")
    }
}
