import Foundation

/// The monitor's tables: left-aligned columns for a terminal or a pipe.
public enum Table {
    /// Writes at once (a pipe reader sees it); on a terminal, `clearing` redraws in place.
    public static func emit(_ text: String, clearing: Bool) {
        let clear = clearing && isatty(STDOUT_FILENO) == 1 ? "\u{1B}[H\u{1B}[2J" : ""
        FileHandle.standardOutput.write(Data((clear + text + (text.hasSuffix("\n") ? "" : "\n")).utf8))
    }

    /// Left-aligned columns, two spaces apart.
    public static func render(_ header: [String], _ rows: [[String]], empty: String) -> String {
        guard !rows.isEmpty else { return empty + "\n" }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces)
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n") + "\n"
    }
}
