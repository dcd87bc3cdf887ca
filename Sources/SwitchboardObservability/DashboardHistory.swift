// What the dashboard (`switchboard-monitor web`) draws over time: samples of the event rate and
// of each group's lag, kept in memory for the last hour, and the SVG path of a series; and
// times as "12 s ago". Pure values: the monitor feeds them from its clock, tests with numbers.

public import SwitchboardProtocol

/// The dashboard's samples over the last hour: one every `interval` (10 s), at most `capacity`.
public struct DashboardHistory: Sendable, Equatable {
    /// One moment: the events per second over the interval before it, and each group's lag.
    public struct Sample: Sendable, Equatable {
        /// Unix milliseconds.
        public var at: Int64
        public var eventsPerSecond: Double
        public var lag: [String: Int64]

        public init(at: Int64, eventsPerSecond: Double, lag: [String: Int64]) {
            self.at = at
            self.eventsPerSecond = eventsPerSecond
            self.lag = lag
        }
    }

    public let interval: Duration
    /// Samples kept: an hour's at the interval.
    public let capacity: Int
    public private(set) var samples: [Sample] = []
    /// The time of the last sample and the total of events then, to take the next rate from.
    private var lastAt: Int64?
    private var lastTotal = 0

    public init(interval: Duration = .seconds(10), span: Duration = .seconds(3600)) {
        self.interval = interval
        capacity = max(1, Int(span.components.seconds / max(1, interval.components.seconds)))
    }

    /// Takes a sample when `interval` has passed since the last one (the first at once, with no
    /// rate yet: zero), given the total of events seen and the groups' lags. True if it took one.
    @discardableResult
    public mutating func offer(at now: Int64, totalEvents: Int, lag: [String: Int64]) -> Bool {
        let step = Int64(interval.components.seconds) * 1000
        if let lastAt, now - lastAt < step { return false }
        var rate = 0.0
        if let lastAt, now > lastAt { rate = Double(max(0, totalEvents - lastTotal)) * 1000 / Double(now - lastAt) }
        samples.append(Sample(at: now, eventsPerSecond: rate, lag: lag))
        if samples.count > capacity { samples.removeFirst(samples.count - capacity) }
        lastAt = now
        lastTotal = totalEvents
        return true
    }

    /// The groups any kept sample names, sorted.
    public var groups: [String] { Set(samples.flatMap(\.lag.keys)).sorted() }

    /// A chart of the rate and one of each group's lag, as the stream carries them:
    /// `{"width", "height", "from", "to", "rate": {"max", "path"}, "lag": [{"group", "max", "path"}]}`
    /// with times in Unix milliseconds; the x axis spans the hour before the newest sample.
    public func charts(width: Double = 600, height: Double = 80) -> JSONValue {
        let to = samples.last?.at ?? 0
        let from = to - Int64(capacity) * Int64(interval.components.seconds) * 1000
        func chart(_ points: [(Int64, Double)]) -> JSONValue {
            let top = SVGPath.ceiling(points.map { $0.1 }.max() ?? 0)
            return .object([
                "max": .double(top), "path": .string(SVGPath.line(points, from: from, to: to, top: top, width: width, height: height)),
            ])
        }
        var rate = chart(samples.map { ($0.at, $0.eventsPerSecond) })
        if case .object(var fields) = rate {
            fields["now"] = .double(samples.last?.eventsPerSecond ?? 0)
            rate = .object(fields)
        }
        let lags: [JSONValue] = groups.map { group in
            var fields: [String: JSONValue] = ["group": .string(group), "now": .integer(samples.last?.lag[group] ?? 0)]
            if case .object(let drawn) = chart(samples.compactMap { sample in sample.lag[group].map { (sample.at, Double($0)) } }) {
                fields.merge(drawn) { $1 }
            }
            return .object(fields)
        }
        return .object([
            "width": .double(width), "height": .double(height), "from": .integer(from), "to": .integer(to), "rate": rate,
            "lag": .array(lags),
        ])
    }
}

/// The `d` of an SVG `<path>` drawing a series in a box `width` × `height` (y down, as SVG).
public enum SVGPath {
    /// Points (time in Unix milliseconds, value) at their times between `from` and `to` (x 0…width) and values between 0 and `top`
    /// (y height…0), joined by straight lines: "M0,80L10,40…", one decimal. Empty for no points;
    /// a value above `top` is drawn at the top, a time outside the span at its edge.
    public static func line(
        _ points: [(at: Int64, value: Double)], from: Int64, to: Int64, top: Double, width: Double, height: Double
    )
        -> String
    {
        guard !points.isEmpty else { return "" }
        let span = Double(max(1, to - from))
        var path = ""
        for (index, point) in points.enumerated() {
            let x = min(width, max(0, Double(point.0 - from) / span * width))
            let fraction = top > 0 ? min(1, max(0, point.1 / top)) : 0
            let y = height - fraction * height
            path += (index == 0 ? "M" : "L") + number(x) + "," + number(y)
        }
        return path
    }

    /// The top of a chart's scale: the maximum rounded up to 1, 2 or 5 times a power of ten
    /// (a reader can tell 500 from 480 at a glance); 1 for nothing above zero.
    public static func ceiling(_ maximum: Double) -> Double {
        guard maximum > 0, maximum.isFinite else { return 1 }
        var scale = 1.0
        while scale * 10 <= maximum { scale *= 10 }
        while scale > maximum { scale /= 10 }
        for step in [1.0, 2.0, 5.0, 10.0] where step * scale >= maximum { return step * scale }
        return 10 * scale
    }

    /// One decimal, without a trailing ".0".
    static func number(_ value: Double) -> String {
        let tenths = Int64((value * 10).rounded())
        let whole = tenths / 10
        let rest = abs(tenths % 10)
        return rest == 0 ? String(whole) : (tenths < 0 && whole == 0 ? "-" : "") + "\(whole).\(rest)"
    }
}

/// Times as a person reads them on a dashboard: "12 s ago", "5 min ago", "3 h ago", "2 d ago".
public enum TimeAgo {
    /// `text` (RFC 3339) relative to `now` (Unix milliseconds); nil when `text` is not a time. A
    /// time ahead of `now` (another machine's clock) reads "just now".
    public static func text(_ text: String, now: Int64) -> String? {
        guard let at = Timestamp.parse(text) else { return nil }
        return self.text(milliseconds: now - at)
    }

    /// `elapsed` milliseconds as "… ago".
    public static func text(milliseconds elapsed: Int64) -> String {
        guard elapsed >= 0 else { return "just now" }
        let seconds = elapsed / 1000
        if seconds < 60 { return "\(seconds) s ago" }
        if seconds < 3600 { return "\(seconds / 60) min ago" }
        if seconds < 86_400 { return "\(seconds / 3600) h ago" }
        return "\(seconds / 86_400) d ago"
    }
}
