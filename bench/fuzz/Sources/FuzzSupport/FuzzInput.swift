internal import CFuzzDriver
public import Foundation

/// How a fuzz target turns libFuzzer's one byte string into what a decoder reads.
///
/// Multi-frame messages (the envelope, Majordomo) are the input split at every `0xFF 0xFF`.
/// Why that separator: 0xFF never occurs in UTF-8, so no JSON, command word or service name
/// of a valid message contains it, while a mutation that deletes or inserts one still makes a
/// neighbouring message. The price: a frame with two 0xFF bytes in a row can't be expressed;
/// such frames are only interesting in binary frames (the version frame, Majordomo's command
/// byte), whose decoders read one or two bytes and are reached with any other values.
public enum FuzzInput {
    public static let separator: [UInt8] = [0xFF, 0xFF]

    /// A message has at most this many frames; more only repeats the frame-count check.
    public static let maximumFrames = 16

    /// libFuzzer's input as `Data` (copied: decoders keep slices of what they are given).
    public static func data(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Data {
        guard let start, count > 0 else { return Data() }
        return Data(bytes: start, count: count)
    }

    /// The frames of `data`: the pieces between separators, at most `maximumFrames` (the last
    /// keeps the rest). An empty input is a message of one empty frame.
    public static func frames(_ data: Data) -> [Data] {
        let bytes = [UInt8](data)
        var frames: [Data] = []
        var start = 0
        var index = 0
        while index + 1 < bytes.count, frames.count < maximumFrames - 1 {
            if bytes[index] == separator[0] && bytes[index + 1] == separator[1] {
                frames.append(Data(bytes[start..<index]))
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        frames.append(Data(bytes[start...]))
        return frames
    }
}

/// Stops the process with a message libFuzzer records with the crash input: a decoder broke
/// a property the fuzz target checks (a trap in the decoder itself needs no help).
public func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("fuzz property failed: \(message())") }
}

/// Runs libFuzzer on the executable's `LLVMFuzzerTestOneInput`, with this process's arguments,
/// and exits.
///
/// Why not libFuzzer's own `main`: SwiftPM links an executable target with
/// `--defsym main=<module>_main`, so the target's top-level code is always the program's main
/// and libFuzzer's is never called. The top-level code calls this instead.
public func runFuzzer() -> Never {
    exit(switchboard_fuzz_run(CommandLine.argc, CommandLine.unsafeArgv))
}
