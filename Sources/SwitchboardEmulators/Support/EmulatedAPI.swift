import Foundation
import Hummingbird

/// One emulated back end. Handlers are synchronous: each works on in-memory state under its own
/// lock, so a request is one short critical section and the emulator never blocks a thread on
/// anything but that lock.
protocol EmulatedAPI: Sendable {
    /// `eto`, `filemaker`, `directory` or `sap`: the name faults, the request log and `--api` use.
    var name: String { get }

    /// Whether a path (decoded segments) belongs to this API.
    func owns(_ segments: [String]) -> Bool

    /// How its router matches paths (ETO's ignores case, as WCF does).
    var routerOptions: RouterOptions { get }

    /// Adds its routes (full paths, prefix included) to its router, whose middleware is in place.
    func addRoutes(to router: Router<EmulatorContext>)

    /// What it answers for a path under its prefix that it does not serve.
    func unknownRoute(for exchange: Exchange) -> Reply

    /// What it answers for a method a route does not take.
    func wrongMethod(for exchange: Exchange) -> Reply

    /// Ends every session or token this API has issued (the control API's "expire now").
    /// Returns how many were ended.
    func expireAll() -> Int

    /// What this API answers when a credential has expired, as a client would see it.
    func expiredReply(for exchange: Exchange) -> Reply

    /// A failure in this API's own error shape, for injected faults.
    func failureReply(status: Int, code: String?, message: String?, for exchange: Exchange) -> Reply

    /// Replaces the state with the seed's.
    func load(_ seed: EmulatorSeed)

    /// Writes the current state into a seed document (for `--state FILE`).
    func save(into seed: inout EmulatorSeed)

    /// A short description of the credential a request used, masked; nil when it used none.
    func credentialLabel(for exchange: Exchange) -> String?
}

extension EmulatedAPI {
    var routerOptions: RouterOptions { [] }
}

/// Random hexadecimal text for tokens and ids.
func randomHex(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    var text = ""
    text.reserveCapacity(bytes * 2)
    let digits = Array("0123456789abcdef")
    for _ in 0..<bytes {
        let byte = UInt8.random(in: 0...255, using: &generator)
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0xF)])
    }
    return text
}

/// A lower-case GUID (`426330ef-2927-4f0d-b87a-398e54245c27`), as ETO and SAP write them.
func randomGUID() -> String { UUID().uuidString.lowercased() }
