// The emulator must never be the bottleneck of a test or a benchmark (issue 4): FileMaker
// creates and finds with 8 concurrent loopback clients, next to the cheapest route the same
// server has (productInfo, no auth, no state) measured in the same run.
//
// The clients are deliberately plain: 8 threads, each with one keep-alive connection, writing a
// prepared HTTP/1.1 request and reading the response by its Content-Length. They cost far less
// CPU than a full HTTP client, so the figure is the server's, on the two cores it shares with
// them.

import Foundation
import NIOCore
import NIOPosix
import SwitchboardEmulators
import SwitchboardTesting
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One blocking keep-alive HTTP/1.1 connection to 127.0.0.1.
final class RawConnection {
    let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var pending: [UInt8] = []

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw EmulatorError("cannot connect to 127.0.0.1:\(port): errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(fd) }

    /// Sends `request` and returns the status and body of the response.
    func exchange(_ request: [UInt8]) throws -> (Int, [UInt8]) {
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw EmulatorError("send failed: errno \(errno)") }
            sent += n
        }
        // Read until the head is complete, then until Content-Length bytes of body.
        while true {
            if let end = headEnd() {
                let head = String(decoding: pending[..<end], as: UTF8.self)
                let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                var length = 0
                for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
                let total = end + 4 + length
                while pending.count < total { try fill() }
                let body = Array(pending[(end + 4)..<total])
                pending.removeFirst(total)
                return (status, body)
            }
            try fill()
        }
    }

    private func headEnd() -> Int? {
        guard pending.count >= 4 else { return nil }
        for i in 0...(pending.count - 4)
        where pending[i] == 13 && pending[i + 1] == 10 && pending[i + 2] == 13 && pending[i + 3] == 10 {
            return i
        }
        return nil
    }

    private func fill() throws {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw EmulatorError("connection closed: errno \(errno)") }
        pending.append(contentsOf: buffer[..<n])
    }
}

func httpRequest(_ method: String, _ path: String, token: String? = nil, basic: String? = nil, json: String? = nil) -> [UInt8] {
    var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if let token { text += "Authorization: Bearer \(token)\r\n" }
    if let basic { text += "Authorization: Basic \(Data(basic.utf8).base64EncodedString())\r\n" }
    if let json { text += "Content-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n\(json)" } else { text += "\r\n" }
    return Array(text.utf8)
}

/// `load`, run on a thread of its own so that its waiting never blocks a thread the server needs
/// (with `--nio-executor` the server's event loops are the async executor).
func measure(port: Int, clients: Int, seconds: Double, request: @escaping @Sendable (Int, Int) -> [UInt8]) async throws -> (Double, Int) {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            continuation.resume(with: Result { try load(port: port, clients: clients, seconds: seconds, request: request) })
        }.start()
    }
}

/// Runs `clients` threads for `seconds`, each sending what `request(client, n)` gives on its own
/// connection; returns completed requests per second and the count of non-200 answers.
func load(port: Int, clients: Int, seconds: Double, request: @escaping @Sendable (Int, Int) -> [UInt8]) throws -> (Double, Int) {
    let done = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    let stop = Atomic<Bool>(false)
    let connections = try (0..<clients).map { _ in try RawConnection(port: port) }
    nonisolated(unsafe) let shared = connections
    let threads = (0..<clients).map { client in
        Thread {
            var n = 0
            while !stop.load(ordering: .relaxed) {
                guard let (status, _) = try? shared[client].exchange(request(client, n)) else {
                    failed.add(1, ordering: .relaxed)
                    return
                }
                if status != 200 { failed.add(1, ordering: .relaxed) }
                n += 1
                done.add(1, ordering: .relaxed)
            }
        }
    }
    let start = ContinuousClock.now
    threads.forEach { $0.start() }
    Thread.sleep(forTimeInterval: seconds)
    stop.store(true, ordering: .relaxed)
    let elapsed = ContinuousClock.now - start
    // Let the threads finish their last exchange.
    Thread.sleep(forTimeInterval: 0.2)
    let secondsElapsed = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return (Double(done.load(ordering: .relaxed)) / secondsElapsed, failed.load(ordering: .relaxed))
}

func emulatorBench(quick: Bool, takeOver: Bool) async throws {
    if takeOver {
        print(
            "NIO event loops as the global executor: \(NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor())"
        )
    }
    let seconds = quick ? 2.0 : 5.0
    let clients = 8
    print(
        "Emulator benchmark, \(ProcessInfo.processInfo.activeProcessorCount) cores, \(clients) keep-alive loopback clients, \(seconds) s per row"
    )
    try await withEmulator { emulator in
        let port = emulator.port
        let login = RawConnection.self
        let tokens: [String] = try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Result {
                        try (0..<clients).map { _ in
                            let connection = try login.init(port: port)
                            let (status, body) = try connection.exchange(
                                httpRequest(
                                    "POST", "/fmi/data/vLatest/databases/Shelter/sessions", basic: "switchboard:fm-demo-Passw0rd!",
                                    json: "{}"))
                            guard status == 200, let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
                                let token = (object["response"] as? [String: Any])?["token"] as? String
                            else { throw EmulatorError("log-in failed: \(status)") }
                            return token
                        }
                    })
            }.start()
        }
        let sessionTokens = tokens
        let records = "/fmi/data/vLatest/databases/Shelter/layouts/CheckIns/records"
        let find = "/fmi/data/vLatest/databases/Shelter/layouts/CheckIns/_find"
        func row(_ name: String, _ rate: Double, _ failures: Int, _ baseline: Double?) {
            let ratio = baseline.map { String(format: "%.2f× productInfo", rate / $0) } ?? "baseline"
            print(
                String(
                    format: "%-52@ %10.0f req/s  %@%@", name as NSString, rate, ratio as NSString,
                    failures > 0 ? "  (\(failures) non-200)" as NSString : ""))
        }
        let (baseline, baseFailures) = try await measure(port: port, clients: clients, seconds: seconds) { _, _ in
            httpRequest("GET", "/fmi/data/vLatest/productInfo")
        }
        row("GET productInfo (no auth, no state)", baseline, baseFailures, nil)
        let (creates, createFailures) = try await measure(port: port, clients: clients, seconds: seconds) { client, n in
            httpRequest(
                "POST", records, token: sessionTokens[client],
                json:
                    "{\"fieldData\":{\"EventID\":\"bench-\(client)-\(n)\",\"FirstName\":\"Ana\",\"ParticipantID\":\(1000 + n % 36),\"Shelter\":\"Harbor Family Center\",\"Bed\":\"Bed \(n % 40)\"}}"
            )
        }
        row("POST records (create, unique EventID)", creates, createFailures, baseline)
        let (finds, findFailures) = try await measure(port: port, clients: clients, seconds: seconds) { client, n in
            httpRequest("POST", find, token: sessionTokens[client], json: "{\"query\":[{\"EventID\":\"==bench-\(client)-\(n / 2)\"}]}")
        }
        row("POST _find (== on the unique EventID)", finds, findFailures, baseline)
        let (gets, getFailures) = try await measure(port: port, clients: clients, seconds: seconds) { client, n in
            httpRequest("GET", records + "/\(1 + n % 12)", token: sessionTokens[client])
        }
        row("GET records/{id}", gets, getFailures, baseline)
        print("records in CheckIns after the run: \(12 + Int(creates * seconds))+")
    }
}
