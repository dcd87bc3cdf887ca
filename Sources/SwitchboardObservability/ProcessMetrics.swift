// The process figures Prometheus' own clients export under the same names, read from /proc at
// each scrape (Linux; elsewhere they stay at zero).

import CoreMetrics
import Foundation

final class ProcessMetrics: Sendable {
    private let start: Gauge
    private let cpu: TotalCounter
    private let memory: Gauge
    private let files: Gauge
    private let startTime: Double

    init(factory: any MetricsFactory) {
        start = Gauge(label: "process_start_time_seconds", factory: factory)
        cpu = TotalCounter(label: "process_cpu_seconds_total", factory: factory)
        memory = Gauge(label: "process_resident_memory_bytes", factory: factory)
        files = Gauge(label: "process_open_fds", factory: factory)
        startTime = Self.readStartTime() ?? Date().timeIntervalSince1970
        start.record(startTime)
    }

    func update() {
        var usage = rusage()
        if getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 {
            let seconds = { (time: timeval) in Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
            cpu.update(total: seconds(usage.ru_utime) + seconds(usage.ru_stime))
        }
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
            let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        {
            memory.record(pages * Double(sysconf(Int32(_SC_PAGESIZE))))
        }
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            // Less the descriptor that lists the directory.
            files.record(max(0, entries.count - 1))
        }
    }

    /// The process's start from /proc/self/stat (field 22, clock ticks after boot) and the
    /// boot time in /proc/stat.
    private static func readStartTime() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name (which may hold spaces); field 3 is the first.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        guard let system = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = system.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        else { return nil }
        return boot + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
