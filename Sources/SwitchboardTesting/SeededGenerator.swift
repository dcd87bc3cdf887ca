/// A deterministic random number generator (SplitMix64) for property tests and simulations:
/// the same seed gives the same sequence on every machine, so a failing case can be replayed
/// from the seed a test prints.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SeededGenerator {
    /// Mutates `bytes` 1–3 times, each a byte replaced by, or inserted from, `alphabet`, or one
    /// removed (never the last): the inputs of the parsers' agreement tests.
    public mutating func mutate(_ bytes: inout [UInt8], from alphabet: [UInt8]) {
        for _ in 0..<Int.random(in: 1...3, using: &self) {
            let index = Int.random(in: 0..<bytes.count, using: &self)
            switch Int.random(in: 0..<3, using: &self) {
            case 0: bytes[index] = alphabet.randomElement(using: &self)!
            case 1: bytes.insert(alphabet.randomElement(using: &self)!, at: index)
            default: if bytes.count > 1 { bytes.remove(at: index) }
            }
        }
    }
}
