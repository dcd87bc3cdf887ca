import CZeroMQ
public import Foundation

/// Z85 (ZeroMQ RFC 32), the text form of CURVE keys, through libzmq's own codec.
public enum Z85 {
    /// Encodes bytes whose count is a multiple of 4.
    public static func encode(_ data: Data) throws(ZMQError) -> String {
        guard data.count % 4 == 0 else {
            throw ZMQError.invalid("Z85 input must be a multiple of 4 bytes, got \(data.count)", operation: "z85 encode")
        }
        var output = [CChar](repeating: 0, count: data.count * 5 / 4 + 1)
        let ok = data.withUnsafeBytes { raw in
            zmq_z85_encode(&output, raw.bindMemory(to: UInt8.self).baseAddress, data.count) != nil
        }
        guard ok || data.isEmpty else { throw ZMQError.last("zmq_z85_encode") }
        return String(decoding: output.prefix(data.count * 5 / 4).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Decodes text whose length is a multiple of 5 into bytes.
    public static func decode(_ text: String) throws(ZMQError) -> Data {
        let utf8 = Array(text.utf8)
        guard utf8.count % 5 == 0 else {
            throw ZMQError.invalid("Z85 text must be a multiple of 5 characters, got \(utf8.count)", operation: "z85 decode")
        }
        guard utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw ZMQError.invalid("Z85 text holds a character outside the Z85 alphabet", operation: "z85 decode")
        }
        var output = [UInt8](repeating: 0, count: utf8.count * 4 / 5)
        let cString = utf8.map { CChar(bitPattern: $0) } + [0]
        guard zmq_z85_decode(&output, cString) != nil || utf8.isEmpty else {
            throw ZMQError.invalid("not valid Z85 text", operation: "z85 decode")
        }
        return Data(output)
    }
}

/// A 32-byte CURVE key. Its `description` never shows the key (it may be a secret key); use
/// `z85` to write a public key out.
public struct CurveKey: Sendable, Hashable, CustomStringConvertible {
    public let bytes: Data

    public init(bytes: Data) throws(ZMQError) {
        guard bytes.count == 32 else {
            throw ZMQError.invalid("a CURVE key is 32 bytes, got \(bytes.count)", operation: "curve key")
        }
        self.bytes = bytes
    }

    /// Reads a key from its 40-character Z85 text.
    public init(z85: String) throws(ZMQError) {
        guard z85.utf8.count == 40 else {
            throw ZMQError.invalid("a CURVE key in Z85 is 40 characters, got \(z85.utf8.count)", operation: "curve key")
        }
        try self.init(bytes: try Z85.decode(z85))
    }

    public var z85: String {
        // 32 bytes is a multiple of 4, so encoding cannot fail.
        (try? Z85.encode(bytes)) ?? ""
    }

    public var description: String { "CurveKey(32 bytes)" }
}

/// A CURVE long-term key pair.
public struct CurveKeyPair: Sendable, Hashable {
    public let publicKey: CurveKey
    public let secretKey: CurveKey

    public init(publicKey: CurveKey, secretKey: CurveKey) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Makes a fresh key pair (`zmq_curve_keypair`).
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicText, &secretText) == 0 else { throw ZMQError.last("zmq_curve_keypair") }
        defer { for i in secretText.indices { secretText[i] = 0 } }
        return CurveKeyPair(
            publicKey: try CurveKey(z85: z85Text(publicText)),
            secretKey: try CurveKey(z85: z85Text(secretText))
        )
    }

    /// Rebuilds the pair from a secret key alone (`zmq_curve_public`).
    public init(secretKey: CurveKey) throws(ZMQError) {
        var publicText = [CChar](repeating: 0, count: 41)
        let secretText = secretKey.z85.utf8.map { CChar(bitPattern: $0) } + [0]
        guard zmq_curve_public(&publicText, secretText) == 0 else { throw ZMQError.last("zmq_curve_public") }
        self.init(publicKey: try CurveKey(z85: z85Text(publicText)), secretKey: secretKey)
    }
}

/// The text of a NUL-terminated buffer libzmq filled with Z85 characters.
private func z85Text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
