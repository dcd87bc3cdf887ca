// A headless Chromium driven over WebDriver (W3C, through Debian's `chromedriver`): what the
// browser tests of the dashboard and the desk use to try a page as its user would.

import Foundation

/// One WebDriver session on a chromedriver that a test started (`chromedriver --port=N`).
/// Not closed on a failure: the test kills the chromedriver process, and its browser with it.
public struct Browser: Sendable {
    public let base: String
    public let session: String

    /// The programs a browser test needs; `#require` them with this message.
    public static let tools = ["/usr/bin/chromium", "/usr/bin/chromedriver"]
    public static let missingTools = "chromium and chromedriver are missing: run deploy/local/setup.sh --tests"

    @discardableResult
    static func post(_ url: String, _ body: String) async throws -> [String: Any] {
        let (_, text) = try await httpRequest("POST", url, body: body)
        return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    /// Opens a headless browser window of `width` × `height` CSS pixels.
    public static func open(port: Int, width: Int = 1400, height: Int = 1100) async throws -> Browser {
        let base = "http://127.0.0.1:\(port)"
        let capabilities = #"""
            {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": "/usr/bin/chromium",
             "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=\#(width),\#(height)"]}}}}
            """#
        let answer = try await post(base + "/session", capabilities)
        guard let value = answer["value"] as? [String: Any], let session = value["sessionId"] as? String else {
            throw ScrapeError("chromedriver made no session: \(answer)")
        }
        return Browser(base: base + "/session/" + session, session: session)
    }

    public func go(_ url: String) async throws {
        try await Self.post(base + "/url", #"{"url": "\#(url)"}"#)
    }

    /// Runs `script` in the page (a function body; `arguments[0…]` are `args`); its value as text.
    public func run(_ script: String, _ args: [String] = []) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: ["script": script, "args": args])
        let answer = try await Self.post(base + "/execute/sync", String(decoding: body, as: UTF8.self))
        return answer["value"].map { "\($0)" } ?? ""
    }

    /// The visible text of the element with this id ("" when there is none).
    public func text(_ id: String) async throws -> String {
        try await run("const e = document.getElementById(arguments[0]); return e ? e.innerText : '';", [id])
    }

    /// The WebDriver id of the first element matching a CSS selector.
    public func element(_ selector: String) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: ["using": "css selector", "value": selector])
        let answer = try await Self.post(base + "/element", String(decoding: body, as: UTF8.self))
        guard let value = answer["value"] as? [String: Any], let id = value.values.first as? String, value.count == 1 else {
            throw ScrapeError("no element matches \(selector): \(answer)")
        }
        return id
    }

    /// Clicks the element as a user would (it must be visible and not covered).
    public func click(_ selector: String) async throws {
        let answer = try await Self.post(base + "/element/\(try await element(selector))/click", "{}")
        if let value = answer["value"] as? [String: Any], let error = value["error"] { throw ScrapeError("click \(selector): \(error)") }
    }

    /// Types `text` into the element (key by key, as a keyboard would).
    public func type(_ selector: String, _ text: String) async throws {
        let body = try JSONSerialization.data(withJSONObject: ["text": text])
        let answer = try await Self.post(base + "/element/\(try await element(selector))/value", String(decoding: body, as: UTF8.self))
        if let value = answer["value"] as? [String: Any], let error = value["error"] {
            throw ScrapeError("type into \(selector): \(error)")
        }
    }

    /// Resizes the window (its outer size; the page's viewport is a little smaller).
    public func resize(width: Int, height: Int) async throws {
        try await Self.post(base + "/window/rect", #"{"width": \#(width), "height": \#(height)}"#)
    }

    /// The elements wider than the viewport or reaching past its right edge (a page that
    /// scrolls sideways at this size): their tag, id or class, and width. Empty: nothing overflows.
    public func horizontalOverflow() async throws -> String {
        try await run(
            """
            const width = document.documentElement.clientWidth;
            const wide = [];
            if (document.documentElement.scrollWidth > width) wide.push('document ' + document.documentElement.scrollWidth + ' > ' + width);
            for (const e of document.querySelectorAll('body *')) {
              const r = e.getBoundingClientRect();
              if (r.width > 0 && r.right > width + 1) wide.push(e.tagName + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : '') + ' right ' + Math.round(r.right));
            }
            return wide.slice(0, 10).join('; ');
            """)
    }

    public func screenshot(to path: String) async throws {
        let (_, text) = try await httpGet(base + "/screenshot")
        let answer = (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        guard let encoded = answer["value"] as? String, let png = Data(base64Encoded: encoded) else {
            throw ScrapeError("no screenshot")
        }
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try png.write(to: URL(fileURLWithPath: path))
    }

    public func close() async {
        _ = try? await httpRequest("DELETE", base)
    }
}
