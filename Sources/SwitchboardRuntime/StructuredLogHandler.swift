public import Configuration
import Foundation
public import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How log records are written.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `2026-11-22T21:04:00.120Z info broker: journal opened head=42 path=…` (logfmt metadata)
    case text
    /// One JSON object per line: `ts`, `level`, `label`, `msg`, then the metadata.
    case json
}

/// A `LogHandler` writing one structured line per record to standard error.
///
/// Metadata values are written as given: callers never put secrets in metadata (the protocol
/// and the review rules keep tokens and passwords out of every log line).
public struct StructuredLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let format: LogFormat

    public init(label: String, format: LogFormat, level: Logger.Level) {
        self.label = label
        self.format = format
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        let time = Self.timestamp()
        let line: String
        switch format {
        case .text:
            var text = "\(time) \(event.level) \(label): \(Self.message(event.message.description))"
            for (key, value) in all.sorted(by: { $0.key < $1.key }) {
                text += " \(key)=\(Self.logfmt(value.description))"
            }
            line = text
        case .json:
            var object: [String: String] = [:]
            for (key, value) in all { object[key] = value.description }
            object["ts"] = time
            object["level"] = event.level.rawValue
            object["label"] = label
            object["msg"] = event.message.description
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            line = String(decoding: data, as: UTF8.self)
        }
        Self.write(line + "\n")
    }

    private static let output = Mutex<Void>(())

    private static func write(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            output.withLock { _ in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0 && errno == EINTR {
                        continue
                    } else {
                        return  // standard error is gone or full: a log line is not worth a crash
                    }
                }
            }
        }
    }

    /// A metadata value in logfmt: bare when it can be, else quoted with `\\`, `\"` and control
    /// characters escaped. Decided per Unicode scalar, not per Character: a quote followed by a
    /// combining mark is one Character that is not `"`, and a value could otherwise close its own
    /// quotes and write a made-up `key=value`, or start a new line with a carriage return.
    static func logfmt(_ value: String) -> String {
        let bare = !value.isEmpty && !value.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || isControl($0) }
        return bare ? value : "\"" + escaped(value) + "\""
    }

    /// A message on a text line: control characters escaped, so it cannot start a line of its own.
    static func message(_ text: String) -> String {
        text.unicodeScalars.contains(where: isControl) ? escaped(text, quotes: false) : text
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        // ASCII (nearly every value) answered without the Unicode tables.
        if scalar.value < 0x80 { return scalar.value < 0x20 || scalar.value == 0x7F }
        return scalar.properties.generalCategory == .control || scalar == "\u{2028}" || scalar == "\u{2029}"
    }

    private static func escaped(_ value: String, quotes: Bool = true) -> String {
        var out = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\" where quotes: out.append(contentsOf: #"\\"#.unicodeScalars)
            case "\"" where quotes: out.append(contentsOf: #"\""#.unicodeScalars)
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            case "\t": out.append(contentsOf: #"\t"#.unicodeScalars)
            case _ where isControl(scalar): out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    /// `2026-11-22T21:04:00.120Z`, UTC, milliseconds; digits written directly, since this runs
    /// for every line and `String(format:)` goes through Foundation's formatter each time.
    static func timestamp(_ now: timespec = now()) -> String {
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var at = 0
            func put(_ value: Int, _ width: Int, _ separator: Character) {
                var rest = value
                for place in stride(from: width - 1, through: 0, by: -1) {
                    buffer[at + place] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                buffer[at + width] = separator.asciiValue!
                at += width + 1
            }
            put(Int(parts.tm_year) + 1900, 4, "-")
            put(Int(parts.tm_mon) + 1, 2, "-")
            put(Int(parts.tm_mday), 2, "T")
            put(Int(parts.tm_hour), 2, ":")
            put(Int(parts.tm_min), 2, ":")
            put(Int(parts.tm_sec), 2, ".")
            put(Int(now.tv_nsec) / 1_000_000, 3, "Z")
            return at
        }
    }

    private static func now() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now
    }
}

extension StructuredLogHandler {
    /// Sets up swift-log for a process once.
    public static func bootstrap(format: LogFormat = .text, level: Logger.Level = .info) {
        LoggingSystem.bootstrap { label in StructuredLogHandler(label: label, format: format, level: level) }
    }

    /// `bootstrap` as a program's settings say.
    ///
    /// Keys read: `log_format` (`text`, the default, or `json`), `log_level` (`trace`, `debug`,
    /// `info`, `notice`, `warning`, `error` or `critical`; default `defaultLevel`).
    public static func bootstrap(reader: ConfigReader, defaultLevel: Logger.Level = .info) throws(ConfigurationError) {
        var format = LogFormat.text
        if let text = reader.string(forKey: "log_format") {
            guard let value = LogFormat(rawValue: text) else {
                throw ConfigurationError(key: "log_format", "must be text or json, got '\(text)'")
            }
            format = value
        }
        var level = defaultLevel
        if let text = reader.string(forKey: "log_level") {
            guard let value = Logger.Level(rawValue: text) else {
                throw ConfigurationError(key: "log_level", "must be trace, debug, info, notice, warning, error or critical, got '\(text)'")
            }
            level = value
        }
        bootstrap(format: format, level: level)
    }
}
