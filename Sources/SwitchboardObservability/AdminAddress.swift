// Where a program serves `/metrics` and `/health/*`: `HOST:PORT`, `[IPv6]:PORT`, or `none`.

public import Configuration
import Foundation
public import SwitchboardRuntime

/// A parsed `--admin` value.
public struct AdminAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// On loopback at `port`: every program's default, so nothing is exposed unless asked.
    public static func loopback(_ port: Int) -> AdminAddress { AdminAddress(host: "127.0.0.1", port: port) }

    /// Reads `HOST:PORT`, `[IPv6]:PORT` or `none` (nil: no admin server).
    /// - Throws: `AdminAddress.Failure` naming what was wrong and the option.
    public static func parse(_ text: String, option: String = "--admin") throws(Failure) -> AdminAddress? {
        switch read(text) {
        case .success(let address): return address
        case .failure(let problem): throw Failure(problem.text(option: option))
        }
    }

    /// What is wrong with a written address, worded to follow the option or key that gave it.
    struct Problem: Error {
        var text: String
        /// Whether `text` reads as a sentence's predicate ("must be …"), else as a clause of its
        /// own ("the port of …").
        var predicate: Bool

        func text(option: String) -> String { predicate ? "\(option) \(text)" : "\(option): \(text)" }
    }

    static func read(_ text: String) -> Result<AdminAddress?, Problem> {
        if text == "none" { return .success(nil) }
        let host: Substring
        let portText: Substring
        let shape = Problem(text: "must be HOST:PORT, [IPv6]:PORT or none, got '\(text)'", predicate: true)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return .failure(shape) }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return .failure(shape) }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }) else {
            return .failure(Problem(text: "the host of '\(text)' is empty or not a host name or address", predicate: false))
        }
        guard let port = Int(portText), (0...65535).contains(port) else {
            return .failure(Problem(text: "the port of '\(text)' must be a number from 0 to 65535", predicate: false))
        }
        return .success(AdminAddress(host: String(host), port: port))
    }

    /// A program's admin address: its `admin` setting (flag `--admin`, `SWITCHBOARD_<PROGRAM>_ADMIN`,
    /// the shared `SWITCHBOARD_ADMIN`, the file) when given, else loopback at `defaultPort`.
    public static func resolve(_ setting: String?, defaultPort: Int) throws(Failure) -> AdminAddress? {
        guard let setting else { return .loopback(defaultPort) }
        return try parse(setting, option: "admin")
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}

extension ConfigReader {
    /// An address to serve on at `key`: `HOST:PORT`, `[IPv6]:PORT`, or `none` (nil: serve
    /// nothing) when `allowsNone`; not given, `fallback`.
    public func address(
        _ key: String, default fallback: AdminAddress?, allowsNone: Bool = true
    ) throws(ConfigurationError) -> AdminAddress? {
        guard let text = string(forKey: ConfigKey(key)) else { return fallback }
        guard allowsNone || text != "none" else { throw ConfigurationError(key: key, "must be HOST:PORT, got 'none'") }
        switch AdminAddress.read(text) {
        case .success(let address): return address
        case .failure(let problem): throw ConfigurationError(key: key, problem.text)
        }
    }
}
