import Foundation
import Synchronization
public import ZeroMQ

/// The broker's allow-list: every `*.cert` file of a directory, by public key. Reloadable; a
/// reload that fails keeps the list it had.
///
/// Each principal name has one certificate, with one exception: while a key is rotated, the
/// principal's new key is `<name>.cert` and its old one `<name>.previous.cert`, both of the same
/// role, so the program keeps working until it runs with its new key (`switchboard keys rotate`).
/// Any other two certificates naming the same principal are refused: two devices under one name
/// would publish under one producer name.
public final class AllowList: Sendable {
    public let directory: String
    private let state = Mutex<[CurveKey: Certificate]>([:])

    /// What a rotated-out key's file name adds to the principal's name: `<name>.previous.cert`.
    public static let previousSuffix = ".previous"

    /// Loads the directory; throws if it cannot be read or a certificate in it is bad (a broker
    /// should not start with an allow-list it cannot trust).
    public init(directory: String) throws {
        self.directory = directory
        _ = try reload()
    }

    /// Reads the directory again.
    /// - Returns: the principals no longer allowed (removed, or their key replaced).
    @discardableResult
    public func reload() throws -> [Certificate] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw Certificate.Failure("cannot read the certificate directory \(directory): \(error.localizedDescription)")
        }
        var loaded: [CurveKey: Certificate] = [:]
        var byName: [String: (file: String, certificate: Certificate)] = [:]
        for file in names.sorted() where file.hasSuffix(".cert") {
            let path = (directory as NSString).appendingPathComponent(file)
            let certificate = try Certificate.load(publicFile: path)
            if let other = byName[certificate.name] {
                let principal = certificate.name
                let rotation = Set([other.file, file]) == ["\(principal).cert", "\(principal)\(Self.previousSuffix).cert"]
                guard rotation, other.certificate.role == certificate.role else {
                    throw Certificate.Failure(
                        "\(path) and \((directory as NSString).appendingPathComponent(other.file)) both name principal '\(principal)'")
                }
            }
            byName[certificate.name] = (file, certificate)
            loaded[certificate.publicKey] = certificate
        }
        return state.withLock { current in
            let gone = current.filter { loaded[$0.key] == nil }.map(\.value)
            current = loaded
            return gone
        }
    }

    public func certificate(for key: CurveKey) -> Certificate? { state.withLock { $0[key] } }

    /// The certificate of a principal by name (as `User-Id` gives it); during a rotation, an
    /// unexpired one of its two when there is one.
    public func certificate(named name: String) -> Certificate? {
        state.withLock { certificates in
            let named = certificates.values.filter { $0.name == name }
            return named.first { !$0.isExpired() } ?? named.first
        }
    }

    public var count: Int { state.withLock { $0.count } }

    /// A fingerprint of the directory (names, sizes, modification times), to notice changes.
    public func fingerprint() -> String {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".cert") }.sorted()
        return names.map { name -> String in
            let attributes = try? FileManager.default.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(name))
            let size = (attributes?[.size] as? NSNumber)?.intValue ?? -1
            let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            return "\(name):\(size):\(modified)"
        }.joined(separator: "|")
    }
}
