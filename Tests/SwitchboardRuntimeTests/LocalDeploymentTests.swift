import Foundation
import SwitchboardRuntime
import Testing

/// `switchboard up`'s layout as a value: checked here without starting anything.
@Suite("LocalDeployment: what `switchboard up` runs")
struct LocalDeploymentTests {
    static let keys = LocalDeployment.KeyArguments(broker: ["--key", "k/broker.secret", "--certificates", "k/allowed"]) { name in
        ["--certificate", "k/\(name).secret", "--broker-key", "k/broker.cert"]
    }

    /// The value of `flag` in `arguments`.
    func value(_ flag: String, in arguments: [String]) -> String? {
        arguments.firstIndex(of: flag).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    }

    @Test("the default run: every program in start order, the broker and the emulators awaited first, the broker stopped last")
    func defaults() {
        let deployment = LocalDeployment(LocalDeployment.Options(), keys: Self.keys)
        #expect(
            deployment.processes.map(\.name) == ["broker", "emulator", "auth", "filemaker", "eto", "directory", "monitor", "kiosk", "desk"])
        #expect(deployment.processes.filter(\.awaited).map(\.name) == ["broker", "emulator"])
        #expect(deployment.process("broker")?.stopGrace == .seconds(20))
        #expect(deployment.endpoints.ingest == "tcp://127.0.0.1:5560")
        #expect(deployment.endpoints.groups == "tcp://127.0.0.1:5564")
    }

    @Test("every port is distinct, and every program that serves /metrics has its own admin port from the one table")
    func portsAreDistinct() {
        for base in [AdminPort.base, 19_000] {
            var options = LocalDeployment.Options()
            options.adminBase = base
            let deployment = LocalDeployment(options, keys: Self.keys)
            let ports = deployment.listeningPorts.map(\.port)
            #expect(Set(ports).count == ports.count, "\(deployment.listeningPorts)")
            for process in deployment.processes where !["emulator", "monitor"].contains(process.name) {
                let program = AdminPort.of(process.name)
                #expect(program != nil, "\(process.name) has a row in AdminPort")
                #expect(process.adminPort == base + (program?.offset ?? -1))
                #expect(value("--admin", in: process.arguments) == "127.0.0.1:\(base + (program?.offset ?? -1))")
            }
        }
        // The programs' own defaults are the same table at its base.
        #expect(AdminPort.broker.defaultPort == 9560)
        #expect(AdminPort.auth.defaultPort == 9563)
        #expect([AdminPort.filemaker, .eto, .directory].map(\.defaultPort) == [9564, 9565, 9566])
    }

    @Test("with --admin-port 0 each program binds any free port; with none given, no --admin flag (SWITCHBOARD_ADMIN applies)")
    func adminChoices() {
        var options = LocalDeployment.Options()
        options.adminBase = 0
        for process in LocalDeployment(options, keys: nil).processes where process.adminPort != nil {
            #expect(value("--admin", in: process.arguments) == "127.0.0.1:0")
        }
        options.adminBase = nil
        for process in LocalDeployment(options, keys: nil).processes {
            #expect(!process.arguments.contains("--admin"), "\(process.name)")
            #expect(process.adminPort == nil)
        }
    }

    @Test("every client is given the broker endpoints it uses and its own key; the broker its key and allow-list, or --insecure")
    func endpointsAndKeys() {
        var options = LocalDeployment.Options()
        options.port = 6000
        let deployment = LocalDeployment(options, keys: Self.keys)
        let endpoints = deployment.endpoints
        #expect(value("--ingest", in: deployment.process("broker")?.arguments ?? []) == "tcp://127.0.0.1:6000")
        for name in ["filemaker", "eto", "directory"] {
            let arguments = deployment.process(name)?.arguments ?? []
            #expect(value("--groups", in: arguments) == endpoints.groups)
            #expect(value("--service", in: arguments) == endpoints.service)
            #expect(value("--ingest", in: arguments) == endpoints.ingest)
            #expect(value("--certificate", in: arguments) == "k/\(name).secret")
            #expect(value("--data-dir", in: arguments) == deployment.data.appendingPathComponent(name).path)
        }
        #expect(value("--ingest", in: deployment.process("kiosk")?.arguments ?? []) == endpoints.ingest)
        #expect(value("--certificate", in: deployment.process("kiosk")?.arguments ?? []) == "k/\(LocalDeployment.demoKiosk).secret")
        #expect(value("--fanout", in: deployment.process("monitor")?.arguments ?? []) == endpoints.fanout)
        #expect(value("--key", in: deployment.process("broker")?.arguments ?? []) == "k/broker.secret")
        #expect(LocalDeployment(options, keys: nil).process("broker")?.arguments.contains("--insecure") == true)
        // Each program with a log has its own file.
        let logs = deployment.processes.compactMap(\.log)
        #expect(Set(logs).count == logs.count)
    }

    @Test("--no-demo and --no-desk leave their processes out; the emulator restarts on the certificate its first start made")
    func optionalProcesses() {
        var options = LocalDeployment.Options()
        options.demoInterval = nil
        options.deskPort = nil
        let deployment = LocalDeployment(options, keys: nil)
        #expect(deployment.process("kiosk") == nil)
        #expect(deployment.process("desk") == nil)
        let emulator = deployment.process("emulator")
        #expect(emulator?.arguments.contains("--tls-generate") == true)
        #expect(emulator?.restartArguments?.contains("--tls-certificate") == true)
    }
}
