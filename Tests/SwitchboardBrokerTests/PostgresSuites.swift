// The suites that work a PostgreSQL server run one test at a time, as one group, each test on a
// thread of its own.
//
// The journal store is synchronous (made for the broker's own thread): a test calling it, or
// `createdb`, `initdb` and `psql`, holds the thread it runs on. Side by side at the start of the
// whole run, these suites held both of the cooperative pool's threads (two cores) for tens of
// seconds at a stretch, and every other suite's timers and sockets waited: pair brokers did not
// serve within 30 s, service requests timed out at 5 s. One at a time, they held one, for the
// minutes the group runs: a stack sample of a full run caught a pool thread waiting in the
// store's connect (`BrokerPairTests.pairTakesOver`) while other suites' tests ran 5-30 times
// slower than alone. On a thread of their own (`.ownThread`) they hold none.

import Foundation
import SwitchboardTesting
import Testing

@Suite("PostgreSQL", .serialized, .ownThread)
enum PostgresSuites {}

/// Runs each test case with a `ThreadExecutor` of its own as its task executor preference: the
/// test's code, and its child tasks, block that thread rather than the cooperative pool's.
struct OwnThreadTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let executor = ThreadExecutor(name: "test-own-thread")
        defer { executor.shutdown() }
        try await withTaskExecutorPreference(executor) { try await function() }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// See `OwnThreadTrait`.
    static var ownThread: Self { OwnThreadTrait() }
}

extension PostgresSuites {
    /// A socket on a free loopback port that listens and is never served: TCP connects (the
    /// kernel's backlog), PostgreSQL's start-up message is never answered. The caller closes it.
    static func silentListener() throws -> (port: Int, descriptor: Int32) {
        let port = try freePort()
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let listening = bound == 0 && listen(listener, 8) == 0
        if !listening { close(listener) }
        try #require(listening, "bind and listen on 127.0.0.1:\(port)")
        return (port, listener)
    }
}
