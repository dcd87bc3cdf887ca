// Reading a program's admin endpoint in tests: plain GETs, and the Prometheus text format
// parsed into samples keyed by name and labels.

import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One `/metrics` answer, parsed.
public struct Scrape: Sendable {
    public struct Sample: Sendable, Hashable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }

    public var samples: [Sample]
    /// The text as served.
    public var text: String

    /// Parses the Prometheus text exposition format (version 0.0.4).
    public init(text: String) throws {
        self.text = text
        samples = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.isEmpty {
            var labels: [String: String] = [:]
            let name: Substring
            var rest: Substring
            if let brace = line.firstIndex(of: "{") {
                name = line[..<brace]
                rest = line[line.index(after: brace)...]
                while !rest.hasPrefix("}") {
                    guard let equals = rest.firstIndex(of: "=") else { throw ScrapeError("no '=' in labels of: \(line)") }
                    let label = rest[..<equals].trimmingCharacters(in: CharacterSet(charactersIn: ", "))
                    rest = rest[rest.index(after: equals)...]
                    guard rest.hasPrefix("\"") else { throw ScrapeError("label value not quoted in: \(line)") }
                    rest = rest.dropFirst()
                    var value = ""
                    var escaped = false
                    while let character = rest.first {
                        rest = rest.dropFirst()
                        if escaped {
                            value.append(character == "n" ? "\n" : character)
                            escaped = false
                        } else if character == "\\" {
                            escaped = true
                        } else if character == "\"" {
                            break
                        } else {
                            value.append(character)
                        }
                    }
                    labels[label] = value
                    rest = rest.drop(while: { $0 == "," })
                }
                rest = rest.dropFirst()
            } else {
                guard let space = line.firstIndex(of: " ") else { throw ScrapeError("no value in: \(line)") }
                name = line[..<space]
                rest = line[space...]
            }
            let valueText = rest.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init) ?? ""
            guard let value = Double(valueText) ?? (valueText == "+Inf" ? .infinity : nil) else {
                throw ScrapeError("value '\(valueText)' is not a number in: \(line)")
            }
            samples.append(Sample(name: String(name), labels: labels, value: value))
        }
    }

    /// The value of the sample named `name` whose labels include `labels`; nil if none, the sum
    /// if several match.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples.filter { sample in
            sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value }
        }
        return matching.isEmpty ? nil : matching.reduce(0) { $0 + $1.value }
    }

    /// The names of the metric families served (from their `# TYPE` lines).
    public var families: Set<String> {
        Set(
            text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.compactMap {
                $0.split(separator: " ").dropFirst(2).first.map(String.init)
            })
    }
}

public struct ScrapeError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// GETs `url` with the shared client; the status and the body as text.
public func httpGet(_ url: String, headers: [(String, String)] = []) async throws -> (status: Int, body: String) {
    try await httpRequest("GET", url, headers: headers)
}

/// Any request with the shared client (a test's WebDriver calls, for one); the status and the
/// body as text.
public func httpRequest(
    _ method: String, _ url: String, body: String? = nil, headers: [(String, String)] = []
) async throws -> (status: Int, body: String) {
    var request = HTTPClientRequest(url: url)
    request.method = HTTPMethod(rawValue: method)
    if let body {
        request.body = .bytes(ByteBuffer(string: body))
        request.headers.add(name: "Content-Type", value: "application/json")
    }
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
    let body = try await response.body.collect(upTo: 16 << 20)
    return (Int(response.status.code), String(buffer: body))
}

/// Scrapes `http://127.0.0.1:<port>/metrics`.
public func scrapeMetrics(port: Int, host: String = "127.0.0.1") async throws -> Scrape {
    let (status, body) = try await httpGet("http://\(host):\(port)/metrics")
    guard status == 200 else { throw ScrapeError("/metrics on port \(port) answered \(status): \(body)") }
    return try Scrape(text: body)
}

/// One answer with its headers, as `httpExchange` returns it.
public struct HTTPAnswer: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: String

    /// The first value of the header `name` (any case).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A client that follows no redirect: a test sees each answer as a browser would get it.
private let literalClient = HTTPClient(
    eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .init(redirectConfiguration: .disallow))

/// Any request, headers and body exactly as given (no Content-Type added), redirects not
/// followed; the status, the headers and the body as text.
public func httpExchange(
    _ method: String, _ url: String, body: String? = nil, headers: [(String, String)] = []
) async throws -> HTTPAnswer {
    var request = HTTPClientRequest(url: url)
    request.method = HTTPMethod(rawValue: method)
    if let body { request.body = .bytes(ByteBuffer(string: body)) }
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    let response = try await literalClient.execute(request, timeout: .seconds(10))
    let body = try await response.body.collect(upTo: 16 << 20)
    return HTTPAnswer(
        status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, body: String(buffer: body))
}
