// A program's configuration sources for a unit test: a JSON file, environment variables and
// flags, as the program would be given them, without starting it.

import Foundation
public import SwitchboardRuntime

/// What a program is given: its configuration file's text, its environment and its flags.
public struct ConfigurationSources: Sendable {
    public var file: String?
    public var environment: [String: String]
    public var flags: [String]

    public init(file: String? = nil, environment: [String: String] = [:], flags: [String] = []) {
        self.file = file
        self.environment = environment
        self.flags = flags
    }

    /// Builds the program's configuration with `make` (its own `programConfiguration(arguments:
    /// environment:)`) from these sources, the file written to a temporary directory named
    /// `--config`, and reads it with `body`.
    /// - Returns: what `body` read, and where each key's value came from (`source`).
    public func read<T>(
        program: String,
        _ make: (_ arguments: [String], _ environment: [String: String]) throws -> ProgramConfiguration,
        _ body: (ProgramConfiguration) throws -> T
    ) throws -> T {
        let directory = try TemporaryDirectory("configuration")
        defer { directory.remove() }
        var arguments = ["switchboard-\(program)"]
        if let file {
            let path = directory.path("switchboard.json")
            try file.write(toFile: path, atomically: true, encoding: .utf8)
            arguments += ["--config", path]
        }
        let configuration = try make(arguments + flags, environment)
        return try body(configuration)
    }
}
