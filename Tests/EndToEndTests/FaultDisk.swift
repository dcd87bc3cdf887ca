// A file system of a test's own, to fill up or to turn read-only under a running program.
//
// Two kinds, because Linux offers no single one that does both: a tmpfs of a few megabytes fills
// up and empties again at once (ENOSPC, then space back by deleting a filler file); but a
// read-only remount (`mount -o remount,ro`) is refused with EBUSY while any file on it is open
// for writing, and a broker always holds its journal open. A file system turns read-only under
// a running program only when the kernel does it after an error: an ext4 image on a loop device,
// mounted `errors=remount-ro`, and an error raised through ext4's own `trigger_fs_error` knob.
// Writes then fail with EROFS while reads go on. On this kernel (6.x) that state is left only by
// unmounting: a remount read-write is refused while the flag is set.

import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Synchronization
import Testing

final class FaultDisk: Sendable {
    /// Where it is mounted.
    let path: String
    /// The loop device's image, for ext4.
    let image: String?
    private let programs: Programs
    /// Programs that keep files open on it: stopped before it is unmounted.
    private let holders = Mutex<[ChildProcess]>([])

    /// Root and mount(8): what a tmpfs needs.
    static var canMountTmpfs: Bool {
        geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/mount")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/umount")
    }

    /// And loop devices, mkfs.ext4, e2fsck and ext4's error knob: what the read-only case needs.
    static var canMountExt4: Bool {
        canMountTmpfs && FileManager.default.fileExists(atPath: "/dev/loop-control")
            && FileManager.default.isExecutableFile(atPath: "/usr/sbin/mkfs.ext4")
            && FileManager.default.isExecutableFile(atPath: "/usr/sbin/e2fsck") && FileManager.default.fileExists(atPath: "/sys/fs/ext4")
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private init(path: String, image: String?, programs: Programs) {
        self.path = path
        self.image = image
        self.programs = programs
    }

    /// Mounts a tmpfs of `size` (mount's syntax: `4m`) at `name` in the test's directory.
    static func tmpfs(_ programs: Programs, name: String, size: String) async throws -> FaultDisk {
        let path = programs.directory.path(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let disk = FaultDisk(path: path, image: nil, programs: programs)
        try await disk.run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path])
        return disk
    }

    /// Makes an ext4 image of `megabytes` (no journal, so nothing but our own writes reaches it)
    /// and mounts it through a loop device, `errors=remount-ro`.
    static func ext4(_ programs: Programs, name: String, megabytes: Int) async throws -> FaultDisk {
        let path = programs.directory.path(name)
        let image = programs.directory.path("\(name).img")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: image, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: image))
        try handle.truncate(atOffset: UInt64(megabytes) << 20)
        try handle.close()
        let disk = FaultDisk(path: path, image: image, programs: programs)
        try await disk.run("/usr/sbin/mkfs.ext4", ["-q", "-F", "-O", "^has_journal", image])
        try await disk.mountImage(options: "rw")
        return disk
    }

    /// Mounts the ext4 image again (after `unmount()`), `rw` or `ro`.
    func mountImage(options: String) async throws {
        guard let image else { throw Failure(description: "not an image") }
        try await run("/usr/bin/mount", ["-o", "loop,errors=remount-ro,\(options)", image, path])
        // The image's root directory keeps its mode: set once, on the first (read-write) mount.
        if options == "rw" { try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: path) }
    }

    /// The ext4 error knob of this mount: `/sys/fs/ext4/<loop device>/trigger_fs_error`.
    func errorKnob() throws -> String {
        let mounts = try String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)
        guard
            let line = mounts.split(separator: "\n").first(where: { $0.split(separator: " ").dropFirst().first.map(String.init) == path }),
            let device = line.split(separator: " ").first
        else { throw Failure(description: "\(path) is not mounted") }
        let knob = "/sys/fs/ext4/\((device as Substring).split(separator: "/").last ?? "")/trigger_fs_error"
        guard FileManager.default.fileExists(atPath: knob) else { throw Failure(description: "no \(knob) on this kernel") }
        return knob
    }

    /// What the kernel does when ext4 meets an error on a disk mounted `errors=remount-ro`: every
    /// write from now on fails with EROFS, also through files already open.
    func forceReadOnlyAfterError() throws {
        try "switchboard resource-fault test\n".write(toFile: try errorKnob(), atomically: false, encoding: .utf8)
    }

    /// Whether a new file can be made on it now.
    var isWritable: Bool {
        let probe = "\(path)/.probe"
        let fd = open(probe, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        guard fd >= 0 else { return false }
        close(fd)
        unlink(probe)
        return true
    }

    /// Writes a filler file until the disk refuses (ENOSPC); returns its size. Only whatever the
    /// programs on it had already allocated, and `leaving` bytes, are left to them.
    @discardableResult
    func fill(name: String = "filler", leaving: Int = 0) throws -> Int {
        if leaving > 0 {
            let reserve = "\(path)/\(name).reserve"
            guard FileManager.default.createFile(atPath: reserve, contents: Data(repeating: 0x5A, count: leaving)) else {
                throw Failure(description: "cannot reserve \(leaving) bytes on \(path)")
            }
            defer { unlink(reserve) }
            return try fill(name: name)
        }
        let fd = open("\(path)/\(name)", O_CREAT | O_WRONLY | O_APPEND, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot make \(path)/\(name): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var written = 0
        for chunk in [1 << 20, 64 << 10, 4 << 10, 512, 1] {
            let buffer = [UInt8](repeating: 0x5A, count: chunk)
            while true {
                let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress, chunk) }
                guard n > 0 else {
                    guard errno == ENOSPC else { throw Failure(description: "filling \(path): \(String(cString: strerror(errno)))") }
                    break
                }
                written += n
                if n < chunk { break }
            }
        }
        return written
    }

    /// Deletes a filler file: its space is free again at once.
    func removeFiller(name: String = "filler") throws {
        try FileManager.default.removeItem(atPath: "\(path)/\(name)")
    }

    /// Says that `process` keeps files open here: it is killed before the unmount if it still runs
    /// then (a test that failed half-way).
    func holds(_ process: ChildProcess) {
        holders.withLock { $0.append(process) }
    }

    /// Unmounts. Call it once whatever ran on the disk has exited; should anything still hold a
    /// file there (a test that failed half-way), the unmount is lazy, so nothing stays mounted
    /// once that process ends.
    func unmount() async {
        for process in holders.withLock({ $0 }) where process.isRunning {
            process.signal(SIGKILL)
            _ = await process.waitForExit(timeout: .seconds(10))
        }
        if (try? await run("/usr/bin/umount", [path])) == nil {
            _ = try? await run("/usr/bin/umount", ["-l", path])
        }
    }

    /// Checks and repairs the ext4 image (after the kernel's error, as an operator would).
    func check() async throws -> String {
        guard let image else { throw Failure(description: "not an image") }
        // e2fsck: 0 clean, 1 errors corrected; anything above is a failure.
        let (status, output) = try await runAllowingFailure("/usr/sbin/e2fsck", ["-f", "-y", image])
        guard let status, status <= 1 else {
            throw Failure(description: "e2fsck \(image) exited \(status.map(String.init) ?? "?"): \(output)")
        }
        return output
    }

    private static let runs = Mutex(0)

    /// Runs a tool to its end (30 s at most).
    @discardableResult
    func run(_ tool: String, _ arguments: [String]) async throws -> String {
        let (status, output) = try await runAllowingFailure(tool, arguments)
        guard status == 0 else {
            throw Failure(
                description: "\(tool) \(arguments.joined(separator: " ")) exited \(status.map(String.init) ?? "(still running)"): \(output)"
            )
        }
        return output
    }

    func runAllowingFailure(_ tool: String, _ arguments: [String]) async throws -> (Int32?, String) {
        let number = Self.runs.withLock {
            $0 += 1
            return $0
        }
        let log = "tool-\(number).log"
        let process = try programs.start((tool as NSString).lastPathComponent, arguments, log: log, executable: tool)
        let status = await process.waitForExit(timeout: .seconds(30))
        if status == nil { process.signal(SIGKILL) }
        return (status, programs.read(log))
    }
}

/// Runs `body` with `disk`, then unmounts it, also when `body` throws.
func withFaultDisk<T>(_ disk: FaultDisk, _ body: (FaultDisk) async throws -> T) async throws -> T {
    do {
        let result = try await body(disk)
        await disk.unmount()
        return result
    } catch {
        await disk.unmount()
        throw error
    }
}
