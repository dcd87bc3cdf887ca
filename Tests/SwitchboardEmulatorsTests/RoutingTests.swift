import Foundation
import NIOHTTP1
import SwitchboardEmulators
import SwitchboardTesting
import Testing

/// What every emulated API's router does the same way: a body over the limit, a path it does not
/// serve and a method a route does not take, each answered in the API's own shape; the request
/// log and faults apply to all of them but the oversized body.
@Suite struct RoutingTests {
    @Test func aBodyOverTheLimitIs413InTheAPIsShapeAndNotLogged() async throws {
        try await withEmulator({ $0.maxBodyBytes = 64 }) { emulator in
            let wire = Wire(emulator)
            let big = Data(repeating: UInt8(ascii: "a"), count: 65)
            let fileMaker = try await wire.call(.POST, Wire.fm + "/sessions", body: big, contentType: "application/json")
            #expect(fileMaker.status == 413)
            #expect(fileMaker.code == "-1")
            let directory = try await wire.call(.POST, "/directory/users", body: big, contentType: "application/json")
            #expect(directory.status == 413)
            #expect(try directory.object["path"] as? String == "/directory/users")
            #expect(try await wire.requests().isEmpty)
            let control = try await wire.call(.POST, "/_emulator/faults", body: big, contentType: "application/json")
            #expect(control.status == 413)
        }
    }

    @Test func unknownPathsAndWrongMethodsAreLoggedAndCanBeFaulted() async throws {
        try await withEmulator { emulator in
            let wire = Wire(emulator)
            let unknown = try await wire.call(.GET, "/fmi/data/vLatest/nothing")
            #expect(unknown.status == 404)
            #expect(unknown.code == "3")
            let wrong = try await wire.call(.PUT, "/fmi/data/vLatest/productInfo")
            #expect(wrong.status == 405)
            #expect(wrong.code == "3")
            let sap = try await wire.call(.PUT, "/odata/applications/v1/nothing/Connections")
            #expect(sap.status == 405)
            #expect(try await wire.call(.GET, "/odata/applications/v1/nothing/Other").status == 404)
            #expect(try await wire.call(.GET, "/nothing").status == 404, "no API serves it")
            let log = try await wire.requests()
            #expect(log.map { $0["status"] as? Int } == [404, 405, 405, 404])
            try await wire.fault(["api": "filemaker", "path": "/fmi/data/vLatest/nothing", "kind": "status", "status": 503])
            #expect(try await wire.call(.GET, "/fmi/data/vLatest/nothing").status == 503)
        }
    }
}
