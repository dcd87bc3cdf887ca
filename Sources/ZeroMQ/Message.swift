public import Foundation

/// One multipart message as received: its frames in order, and the ZAP user id of the peer
/// that sent it (`User-Id`), which a CURVE server uses to authorise the message by sender.
public struct Message: Sendable, Hashable {
    public var frames: [Data]
    /// The user id the ZAP handler returned for the sending peer, if any.
    public var userID: String?

    public init(frames: [Data], userID: String? = nil) {
        self.frames = frames
        self.userID = userID
    }

    public init(_ frames: Data...) {
        self.frames = frames
        self.userID = nil
    }

    /// The sum of the frame sizes in bytes.
    public var byteCount: Int { frames.reduce(0) { $0 + $1.count } }
}

extension Data {
    /// The UTF-8 bytes of a string, a convenience for building frames.
    public init(frame string: String) {
        self = Data(string.utf8)
    }
}
