import Foundation

/// Durations written as `500ms`, `30s`, `2m`, `12h` or `7d`: every setting and flag that takes a
/// duration, one syntax (a bare number is refused: seconds or milliseconds would be a guess).
public enum DurationText {
    public static func parse(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            let number = trimmed.dropLast(suffix.count)
            // "ms" also ends with "s": only accept a clean number before the suffix.
            guard let value = Double(number), value >= 0 else { continue }
            return .milliseconds(Int64((value * factor * 1000).rounded()))
        }
        return nil
    }

    /// Writes a duration the way `parse` reads it, in its largest whole unit: `250ms`, `5s`, `2m`, `7d`.
    public static func format(_ duration: Duration) -> String {
        let ms = duration.wholeMilliseconds
        if ms % 86_400_000 == 0 && ms >= 86_400_000 { return "\(ms / 86_400_000)d" }
        if ms % 3_600_000 == 0 && ms >= 3_600_000 { return "\(ms / 3_600_000)h" }
        if ms % 60_000 == 0 && ms >= 60_000 { return "\(ms / 60_000)m" }
        if ms % 1000 == 0 { return "\(ms / 1000)s" }
        return "\(ms)ms"
    }
}

/// Sizes written as `1048576`, `512KB`, `512MB`, `2GB` (powers of 1024).
public enum ByteCountText {
    public static func parse(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).uppercased()
        let units: [(String, Int64)] = [("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1)]
        for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
            guard let value = Double(trimmed.dropLast(suffix.count)), value >= 0 else { return nil }
            return Int64(value * Double(factor))
        }
        return Int64(trimmed).flatMap { $0 >= 0 ? $0 : nil }
    }

    /// Writes a size the way `parse` reads it, in its largest whole unit: `512KB`, `1MB`, `8GB`.
    public static func format(_ bytes: Int64) -> String {
        for (suffix, factor) in [("TB", Int64(1) << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)]
        where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor)\(suffix)"
        }
        return "\(bytes)"
    }
}

extension Duration {
    /// The duration in whole milliseconds (rounded toward zero).
    public var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
