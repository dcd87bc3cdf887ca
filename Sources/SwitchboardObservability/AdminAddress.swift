// Where a program serves `/metrics` and `/health/*`: `HOST:PORT`, `[IPv6]:PORT`, or `none`.

import Foundation

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
        if text == "none" { return nil }
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw Failure("\(option) must be HOST:PORT, [IPv6]:PORT or none, got '\(text)'")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw Failure("\(option) must be HOST:PORT, [IPv6]:PORT or none, got '\(text)'")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }) else {
            throw Failure("\(option): the host of '\(text)' is empty or not a host name or address")
        }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw Failure("\(option): the port of '\(text)' must be a number from 0 to 65535")
        }
        return AdminAddress(host: String(host), port: port)
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
