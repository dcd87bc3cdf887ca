import Foundation

/// One field's criterion in a FileMaker find request, parsed from its text. Supported, as the
/// Data API applies them: plain words (each must begin a word of the field), `==` whole-field
/// match (`==` alone: empty), `=` whole word (`=` alone: empty), `*` any characters, `@` one
/// character, `#` one digit, `>`, `>=`, `<`, `<=`, and `a...b` ranges. Comparisons are numeric
/// when both sides are numbers, by date when both are `MM/dd/yyyy`, else by text without regard
/// to case. Other operators (`!`, `//`, `?`) are matched as literal text.
enum FindCriterion: Equatable {
    case empty
    case anyValue
    case whole(String)
    case word(String)
    case less(String, orEqual: Bool)
    case greater(String, orEqual: Bool)
    case range(String, String)
    case words([String])

    init(_ text: String) {
        let t = text.trimmingCharacters(in: .whitespaces)
        if t == "=" || t == "==" {
            self = .empty
        } else if t == "*" {
            self = .anyValue
        } else if t.hasPrefix("==") {
            self = .whole(String(t.dropFirst(2)))
        } else if t.hasPrefix(">=") {
            self = .greater(String(t.dropFirst(2)).trimmingCharacters(in: .whitespaces), orEqual: true)
        } else if t.hasPrefix("<=") {
            self = .less(String(t.dropFirst(2)).trimmingCharacters(in: .whitespaces), orEqual: true)
        } else if t.hasPrefix(">") {
            self = .greater(String(t.dropFirst()).trimmingCharacters(in: .whitespaces), orEqual: false)
        } else if t.hasPrefix("<") {
            self = .less(String(t.dropFirst()).trimmingCharacters(in: .whitespaces), orEqual: false)
        } else if t.hasPrefix("=") {
            self = .word(String(t.dropFirst()))
        } else if let range = t.range(of: "...") {
            self = .range(
                String(t[..<range.lowerBound]).trimmingCharacters(in: .whitespaces),
                String(t[range.upperBound...]).trimmingCharacters(in: .whitespaces))
        } else {
            self = .words(FindCriterion.words(of: t))
        }
    }

    static func words(of text: String) -> [String] {
        text.lowercased().split(whereSeparator: { $0.isWhitespace || ($0.isPunctuation && !"*@#-.'/".contains($0)) }).map(String.init)
    }

    /// Whether a stored value (nil or "" when the field is empty) meets the criterion.
    func matches(_ value: String) -> Bool {
        switch self {
        case .empty: return value.isEmpty
        case .anyValue: return !value.isEmpty
        case .whole(let pattern): return FindCriterion.wildcard(pattern.lowercased(), value.lowercased(), prefix: false)
        case .word(let pattern):
            let p = pattern.lowercased()
            return FindCriterion.words(of: value).contains { FindCriterion.wildcard(p, $0, prefix: false) }
        case .less(let bound, let orEqual):
            guard !value.isEmpty else { return false }
            let order = FindCriterion.compare(value, bound)
            return order < 0 || (orEqual && order == 0)
        case .greater(let bound, let orEqual):
            guard !value.isEmpty else { return false }
            let order = FindCriterion.compare(value, bound)
            return order > 0 || (orEqual && order == 0)
        case .range(let low, let high):
            guard !value.isEmpty else { return false }
            return FindCriterion.compare(value, low) >= 0 && FindCriterion.compare(value, high) <= 0
        case .words(let patterns):
            guard !patterns.isEmpty else { return true }
            let fieldWords = FindCriterion.words(of: value)
            return patterns.allSatisfy { pattern in fieldWords.contains { FindCriterion.wildcard(pattern, $0, prefix: true) } }
        }
    }

    /// Matches `pattern` (with `*`, `@`, `#`) against the whole of `text`, or its beginning
    /// when `prefix` is set. Both are already lower-cased.
    ///
    /// One pass, backtracking only to the last `*` seen: at most pattern × text steps. (Trying
    /// every split at every `*` took time exponential in the number of stars: `*******x` on a
    /// 36-character value took seconds, a few more stars hours — a find request holding the
    /// model's lock all along.) Backtracking to the last `*` alone is enough because every
    /// other pattern character matches exactly one text character.
    static func wildcard(_ pattern: String, _ text: String, prefix: Bool) -> Bool {
        let p = Array(pattern)
        let t = Array(text)
        var i = 0
        var j = 0
        // The last `*` seen, and where in `text` what it matches now ends.
        var star: Int?
        var starEnd = 0
        while j < t.count {
            if i < p.count {
                if p[i] == "*" {
                    star = i
                    starEnd = j
                    i += 1
                    continue
                }
                if p[i] == "@" || (p[i] == "#" ? t[j].isNumber : t[j] == p[i]) {
                    i += 1
                    j += 1
                    continue
                }
            } else if prefix {
                return true
            }
            // A mismatch: the last `*` takes one more character, if there was one.
            guard let star else { return false }
            i = star + 1
            starEnd += 1
            j = starEnd
        }
        while i < p.count, p[i] == "*" { i += 1 }
        return i == p.count
    }

    /// Orders two field values: numbers numerically, `MM/dd/yyyy` dates by date, else text
    /// without regard to case.
    static func compare(_ a: String, _ b: String) -> Int {
        if let x = Double(a.trimmingCharacters(in: .whitespaces)), let y = Double(b.trimmingCharacters(in: .whitespaces)) {
            return x < y ? -1 : (x > y ? 1 : 0)
        }
        if let x = dateKey(a), let y = dateKey(b) { return x < y ? -1 : (x > y ? 1 : 0) }
        let x = a.lowercased()
        let y = b.lowercased()
        return x < y ? -1 : (x > y ? 1 : 0)
    }

    /// `MM/dd/yyyy` (optionally followed by a time) as a sortable number; the year 1–9999
    /// (a longer one, as `1/1/99999999999999999` in a find or an ETO date element, overflowed
    /// the key and trapped).
    static func dateKey(_ text: String) -> Int? {
        let datePart = text.split(separator: " ").first ?? ""
        let parts = datePart.split(separator: "/")
        guard parts.count == 3, let m = Int(parts[0]), let d = Int(parts[1]), let y = Int(parts[2]), (1...12).contains(m),
            (1...31).contains(d), (1...9999).contains(y)
        else { return nil }
        return y * 10000 + m * 100 + d
    }
}
