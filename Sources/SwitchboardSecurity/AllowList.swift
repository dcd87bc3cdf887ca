import Foundation
import SwitchboardRuntime
import Synchronization
public import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    /// Loads the directory; throws if it cannot be read, a certificate in it is bad, or anyone
    /// but the owner could change it (`checkOwnerOnly`): a broker should not start with an
    /// allow-list it cannot trust.
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
        let files = names.sorted().filter { $0.hasSuffix(".cert") }
        try Self.checkOwnerOnly(directory: directory, files: files)
        var loaded: [CurveKey: Certificate] = [:]
        var byName: [String: (file: String, certificate: Certificate)] = [:]
        for file in files {
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

    /// A fingerprint of the directory (its mode; each certificate's name, size, modification
    /// time and mode), to notice changes. Modes are in it so that the `chmod go-w` a refused
    /// reload asks for is itself noticed, without a SIGHUP.
    public func fingerprint() -> String {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".cert") }.sorted()
        let files = names.map { name -> String in
            let path = (directory as NSString).appendingPathComponent(name)
            let attributes = try? FileManager.default.attributesOfItem(atPath: path)
            let size = (attributes?[.size] as? NSNumber)?.intValue ?? -1
            let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            return "\(name):\(size):\(modified):\(Self.mode(path))"
        }
        return ([Self.mode(directory)] + files).joined(separator: "|")
    }

    /// The permission bits of what `path` resolves to, in octal; `-` when it cannot be read.
    static func mode(_ path: String) -> String {
        var info = stat()
        return stat(path, &info) == 0 ? String(info.st_mode & 0o7777, radix: 8) : "-"
    }
}

extension AllowList {
    /// Refuses an allow-list that group or others could change (protocol/README.md, 13.6): a
    /// `.cert` file there gives its key a role, `admin` included, so whoever can write the
    /// directory (add or replace a file) or a file in it decides what every key may do.
    /// Reading is fine: the certificates are public.
    ///
    /// Symbolic links are followed and what is checked is what is read: the directory the path
    /// resolves to, each certificate's target file, and the directory holding that target when
    /// it is another one (whoever can write that directory can replace the file). A file or
    /// directory on a read-only mount passes whatever its mode, since nobody can write it there:
    /// a Kubernetes ConfigMap is a 0777 directory of links into a 0755 one, mounted read-only,
    /// and compose mounts the allow-list `:ro`. Directories above the allow-list are not
    /// checked, as for the data directory: whoever controls those controls the host's
    /// configuration in any case.
    ///
    /// We refuse rather than tighten, as `PrivateFiles` does: the error names every exposed path
    /// and one `chmod go-w` that fixes them all.
    static func checkOwnerOnly(directory: String, files: [String]) throws(Certificate.Failure) {
        let real = resolved(directory)
        var exposed: [String] = []
        if let mode = writableByOthers(real) {
            exposed.append("certificate directory \(described(directory, real)) (mode \(String(mode, radix: 8)))")
        }
        var fixes = exposed.isEmpty ? [] : [directory]
        var holders: Set<String> = [real]
        for file in files {
            let path = (directory as NSString).appendingPathComponent(file)
            let target = resolved(path)
            if let mode = writableByOthers(target) {
                exposed.append("certificate \(described(path, target)) (mode \(String(mode, radix: 8)))")
                fixes.append(target)
            }
            let holder = PrivateFiles.parentDirectory(of: target)
            if holders.insert(holder).inserted, let mode = writableByOthers(holder) {
                exposed.append("directory \(holder), which holds the target of \(path) (mode \(String(mode, radix: 8)))")
                fixes.append(holder)
            }
        }
        guard !exposed.isEmpty else { return }
        throw Certificate.Failure(
            "the allow-list decides every principal's role, so only its owner may change it; group or others can write "
                + exposed.joined(separator: ", ") + "; run chmod go-w " + fixes.joined(separator: " "))
    }

    /// `path` with every symbolic link resolved; `path` itself when that fails (a missing or
    /// dangling entry is left for the read to report).
    static func resolved(_ path: String) -> String {
        guard let pointer = realpath(path, nil) else { return path }
        defer { free(pointer) }
        return String(cString: pointer)
    }

    static func described(_ path: String, _ target: String) -> String {
        target == path ? path : "\(path) (-> \(target))"
    }

    /// The permission bits of `path` when group or others may write it on a writable mount.
    static func writableByOthers(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o022 != 0 else { return nil }
        var mount = statvfs()
        if statvfs(path, &mount) == 0, mount.f_flag & UInt(ST_RDONLY) != 0 { return nil }
        return info.st_mode & 0o777
    }
}
