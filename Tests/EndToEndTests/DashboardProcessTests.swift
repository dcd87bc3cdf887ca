import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

/// The dashboard in a real browser: headless Chromium driven over WebDriver (Debian's
/// `chromium` and `chromium-driver`, installed by deploy/local/setup.sh), against a real broker,
/// kiosk and `switchboard-monitor web`.
@Suite("Dashboard in a browser (processes)", .serialized, .timeLimit(.minutes(3)))
struct DashboardProcessTests {
    @Test(
        "the dashboard shows the journal, rates, groups and kiosks, updates within seconds of new check-ins, shows a dead letter and replays it, and shows no personal data"
    )
    func dashboardInABrowser() async throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            try #require(
                FileManager.default.isExecutableFile(atPath: tool),
                "\(tool) is missing: run deploy/local/setup.sh (it installs chromium and chromium-driver)")
        }
        let directory = try TemporaryDirectory("dashboard")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        defer { broker.signal(SIGKILL) }
        let ports = try freePort(count: 2)
        let (webPort, driverPort) = (ports, ports + 1)
        let token = "dashboard-test-token-0123456789"
        let web = try programs.start(
            "switchboard-monitor",
            [
                "web", "--listen", "127.0.0.1:\(webPort)", "--fanout", endpoints.fanout, "--replay", endpoints.replay,
                "--groups", endpoints.groups, "--service", endpoints.service,
            ], log: "web.log", environment: ["SWITCHBOARD_DASHBOARD_TOKEN": token])
        defer { web.signal(SIGKILL) }
        let driver = try programs.start(
            "chromedriver", ["--port=\(driverPort)"], log: "chromedriver.log", executable: "/usr/bin/chromedriver")
        defer { driver.signal(SIGKILL) }
        try await waitUntil("the dashboard and chromedriver listen", timeout: .seconds(30), interval: .milliseconds(100)) {
            guard web.isRunning else { throw WaitTimedOut(description: "the dashboard exited: \(programs.read("web.log"))") }
            let dashboard = try? await httpGet("http://127.0.0.1:\(webPort)/api/snapshot", headers: [("Authorization", "Bearer \(token)")])
            let status = try? await httpGet("http://127.0.0.1:\(driverPort)/status")
            return dashboard?.status == 200 && status?.status == 200
        }
        #expect(try await httpGet("http://127.0.0.1:\(webPort)/").status == 401, "the page needs its token")
        #expect(try await httpGet("http://127.0.0.1:\(webPort)/api/stream").status == 401)

        func load(_ count: Int, kiosk: String) async throws {
            let process = try programs.start(
                "switchboard-kiosk",
                [
                    "load", "--rate", "0", "--site", "12", "--program", "3", "--count", "\(count)", "--id", kiosk, "--outbox",
                    directory.path("\(kiosk)/outbox.sqlite"),
                    "--ingest", endpoints.ingest,
                ], log: "\(kiosk)-\(count).log")
            #expect(await process.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("\(kiosk)-\(count).log"))")
        }
        try await load(30, kiosk: "shelter-east")
        let create = try programs.start(
            "switchboard",
            ["groups", "create", "audit", "--topic", "checkin.", "--start", "earliest", "--groups", endpoints.groups, "--insecure"],
            log: "create.log")
        #expect(await create.waitForExit(timeout: .seconds(30)) == 0)

        // Not closed on a failure: the chromedriver process is killed, and its browser with it.
        let browser = try await Browser.open(port: driverPort)
        // The entry address: the dashboard sets its cookie and sends the browser to / without the token.
        try await browser.go("http://127.0.0.1:\(webPort)/?token=\(token)")
        #expect(try await browser.run("return location.href") == "http://127.0.0.1:\(webPort)/")
        try await waitUntil("the page shows the first 30 check-ins", timeout: .seconds(20), interval: .milliseconds(100)) {
            let rates = try await browser.text("rates")
            let kiosks = try await browser.text("kiosks")
            return rates.contains("checkin.recorded") && kiosks.contains("shelter-east")
        }
        #expect(try await browser.text("rates").contains("30"))
        // Times as "… ago", the kiosk's last check-in among them, and the hour's charts as inline SVG
        // drawn from the dashboard's samples (the first sample is taken at once).
        try await waitUntil("the page says when shelter-east last checked in and draws the charts", timeout: .seconds(20)) {
            let kiosks = try await browser.text("kiosks")
            let paths = try await browser.run(
                "return [...document.querySelectorAll('#charts svg path')].map(p => p.getAttribute('d')).join(' ')")
            return kiosks.contains("shelter-east") && kiosks.contains(" s ago") && paths.hasPrefix("M")
        }
        // The broker's tables are read once a second.
        try await waitUntil("the page shows the group", timeout: .seconds(10), interval: .milliseconds(100)) {
            try await browser.text("groups").contains("audit")
        }

        // 20 more: the page shows them within seconds of the broker having them all.
        try await load(20, kiosk: "shelter-east")
        let journaled = ContinuousClock.now
        try await waitUntil("the page shows 50 check-ins", timeout: .seconds(10), interval: .milliseconds(100)) {
            try await browser.run("return [...document.querySelectorAll('#rates td')].map(c => c.innerText).includes('50')") == "1"
        }
        let elapsed = journaled.duration(to: .now)
        // The stream sends every second: alone on the machine the page shows them within 2 s.
        // With every suite at once and the browser at a lower priority than the tests, 5 s.
        #expect(elapsed < .seconds(5), "the page took \(elapsed) to show new check-ins")

        // A member that gives up on the first check-in makes a dead letter; the page shows it.
        let context = try Context()
        let io = try IOThread(context: context)
        var quiet = Logger(label: "member")
        quiet.logLevel = .critical
        let consumer = GroupConsumer(
            io: io, endpoint: endpoints.groups, settings: .init(group: "audit", topics: ["checkin."]), logger: quiet)
        let member = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await consumer.run() }
                var first = true
                for await delivery in consumer.deliveries {
                    if first {
                        try await delivery.term(code: "test-refusal", message: "refused by the test")
                        first = false
                    } else {
                        try await delivery.ack()
                    }
                }
                try await group.waitForAll()
            }
        }
        try await waitUntil("the page shows the dead letter", timeout: .seconds(20), interval: .milliseconds(100)) {
            let letters = try await browser.text("dead-letters")
            let problems = try await browser.text("problems")
            return letters.contains("test-refusal") && problems.contains("dead letter")
        }
        try await browser.screenshot(to: Self.artifacts + "/dashboard.png")
        // Replay from the page (the test broker runs without security: every peer may).
        _ = try await browser.run("document.querySelector('#dead-letters button').click(); return 'clicked';")
        try await waitUntil("the page says it replayed it", timeout: .seconds(10), interval: .milliseconds(100)) {
            try await browser.text("replay-result").hasPrefix("replayed ")
        }

        // Nothing personal: not in the page, not in the stream. The load's people and notes:
        let page = try await browser.run("return document.documentElement.outerHTML")
        let stream = try await browser.run("return window.lastMessage")
        #expect(stream.contains("\"dead_letters\""), "the last message of the stream: \(stream)")
        for personal in ["Fatima", "Okafor", "Dmitri", "Ivanov", "Priya", "Street outreach", "1950-", "47.6"] {
            #expect(!page.contains(personal), "the page shows '\(personal)'")
            #expect(!stream.contains(personal), "the stream carries '\(personal)'")
        }
        consumer.leave()
        member.cancel()
        _ = await member.result
        await io.shutdown()
        await context.terminate()
        await browser.close()
    }

    /// Where test artifacts (the screenshot) go: .build/test-artifacts in the package.
    static var artifacts: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/test-artifacts").path
    }
}
