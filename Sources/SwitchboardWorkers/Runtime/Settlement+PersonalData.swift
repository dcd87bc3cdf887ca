// A settlement's message becomes a NACK or TERM reason: the worker logs it, the broker logs and
// keeps it, and `switchboard dlq list` shows it to anyone with a monitor key. So it holds codes
// and ids only (protocol section 15.2), never the words a person typed into a check-in. The
// handlers build their own messages that way; this is the net under the text they do not
// write themselves: a back end's error message, which may quote the request (ETO's search
// URL carries a last name, a FileMaker validation message can name a field's value).

import Foundation
public import SwitchboardProtocol

extension Settlement {
    /// What stands in a reason where a check-in's personal words were.
    public static let personalPlaceholder = "[personal]"

    /// This settlement with every personal word of `checkIn` (first and last name, date of
    /// birth also as M/D/YYYY, notes) replaced by ``personalPlaceholder`` in its message,
    /// ignoring case, wherever it stands as a whole word. Nil: nothing to take out.
    public func withoutPersonalData(of checkIn: CheckIn?) -> Settlement {
        guard let checkIn else { return self }
        let words = checkIn.personalWords
        switch self {
        case .done: return .done
        case .retry(let delay, let code, let message):
            return .retry(after: delay, code: code, message: Self.removing(words, from: message))
        case .deadLetter(let code, let message):
            return .deadLetter(code: code, message: Self.removing(words, from: message))
        }
    }

    /// `text` with each of `words` replaced where it is not part of a longer word: a first name
    /// "Li" must not turn "Limit" into nonsense.
    static func removing(_ words: [String], from text: String) -> String {
        var result = text
        // Longest first, so "Mary Ann" goes before "Mary" would leave " Ann" behind.
        for word in words.sorted(by: { $0.count > $1.count }) {
            var searchStart = result.startIndex
            while let found = result.range(of: word, options: .caseInsensitive, range: searchStart..<result.endIndex) {
                let before = found.lowerBound == result.startIndex ? nil : result[result.index(before: found.lowerBound)]
                let after = found.upperBound == result.endIndex ? nil : result[found.upperBound]
                if isWordCharacter(before) || isWordCharacter(after) {
                    searchStart = found.upperBound
                    continue
                }
                result.replaceSubrange(found, with: personalPlaceholder)
                searchStart = result.index(found.lowerBound, offsetBy: personalPlaceholder.count)
            }
        }
        return result
    }

    private static func isWordCharacter(_ character: Character?) -> Bool {
        guard let character else { return false }
        return character.isLetter || character.isNumber
    }
}

extension CheckIn {
    /// The words a person typed that identify or describe the participant, as they may come
    /// back in a back end's message: each name, the date of birth (also the US M/D/YYYY form
    /// ETO and FileMaker print), the notes. Trimmed; blanks left out.
    var personalWords: [String] {
        var words = [participant.firstName, participant.lastName, participant.dateOfBirth, notes].compactMap {
            $0?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let dob = participant.dateOfBirth, let days = Timestamp.parseDate(dob) {
            let day = String(Timestamp.format(milliseconds: Int64(days) * 86_400_000).prefix(10))
            let parts = day.split(separator: "-").map { String($0) }
            if parts.count == 3, let month = Int(parts[1]), let date = Int(parts[2]) {
                words += ["\(month)/\(date)/\(parts[0])", "\(parts[1])/\(parts[2])/\(parts[0])"]
            }
        }
        return words.filter { !$0.isEmpty }
    }
}
