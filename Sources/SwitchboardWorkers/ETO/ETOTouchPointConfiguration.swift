// How a check-in becomes a TouchPoint response in ETO: which TouchPoint, which of its elements
// holds the bus event id (the worker's memory of what it recorded, kept in ETO itself), and
// which elements get which part of the check-in. ETO's API has no call that describes a
// TouchPoint's elements, so what can be checked is checked at start (ids, types, sources) and
// the rest is reported by ETO on the first write, as a dead letter naming the element.

import Foundation
import SwitchboardProtocol

/// The `--touchpoint` file of `switchboard-eto`. Documented in its `--help` and in
/// `Sources/SwitchboardWorkers/README.md`.
public struct ETOTouchPointConfiguration: Codable, Sendable, Hashable {
    public struct Element: Codable, Sendable, Hashable {
        /// The TouchPoint element id.
        public var id: Int
        /// ETO's element type: 5 (text) or 9 (date, `MM/dd/yyyy`).
        public var type: Int
        /// What goes in it: a source as in the FileMaker mapping (`checked_in_at`, `notes`, `$event_id`…).
        public var source: String

        public init(id: Int, type: Int, source: String) {
            self.id = id
            self.type = type
            self.source = source
        }
    }

    public var touchPointID: Int
    /// A text element (type 5) that receives the event id; the worker lists a participant's
    /// responses and skips the write when one holds the id already.
    public var eventIDElement: Int
    public var elements: [Element]
    /// The zone dates are written in (IANA name): a check-in at 23:30 in Los Angeles is that day.
    public var timeZone: String

    enum CodingKeys: String, CodingKey {
        case touchPointID = "touchpoint_id", eventIDElement = "event_id_element", elements, timeZone = "time_zone"
    }

    public init(touchPointID: Int, eventIDElement: Int, elements: [Element], timeZone: String) {
        self.touchPointID = touchPointID
        self.eventIDElement = eventIDElement
        self.elements = elements
        self.timeZone = timeZone
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        touchPointID = try c.decode(Int.self, forKey: .touchPointID)
        eventIDElement = try c.decode(Int.self, forKey: .eventIDElement)
        elements = try c.decodeIfPresent([Element].self, forKey: .elements) ?? []
        timeZone = try c.decodeIfPresent(String.self, forKey: .timeZone) ?? "UTC"
    }

    /// The seed's "Shelter Check-In" TouchPoint (54): the night of the stay, notes, and the
    /// event id in element 822.
    public static let `default` = ETOTouchPointConfiguration(
        touchPointID: 54, eventIDElement: 822,
        elements: [Element(id: 820, type: 9, source: "checked_in_at"), Element(id: 821, type: 5, source: "notes")], timeZone: "UTC")

    public static func load(path: String) throws(WorkerConfigurationError) -> ETOTouchPointConfiguration {
        let configuration = try WorkerConfigurationFile.load(
            ETOTouchPointConfiguration.self, path: path, flag: "--touchpoint", what: "TouchPoint configuration")
        try configuration.validate(source: path)
        return configuration
    }

    public func validate(source: String = "the default TouchPoint configuration") throws(WorkerConfigurationError) {
        func fail(_ text: String) -> WorkerConfigurationError { WorkerConfigurationError("--touchpoint: \(source): \(text)") }
        guard touchPointID > 0 else { throw fail("touchpoint_id must be a positive number") }
        guard eventIDElement > 0 else { throw fail("event_id_element must be a positive element id") }
        guard TimeZone(identifier: timeZone) != nil else { throw fail("time_zone '\(timeZone)' is not a time zone name") }
        var seen: Set<Int> = [eventIDElement]
        for (index, element) in elements.enumerated() {
            let at = "elements.\(index)"
            guard element.id > 0 else { throw fail("\(at).id must be a positive element id") }
            guard seen.insert(element.id).inserted else {
                throw fail("\(at).id \(element.id) is used twice (event_id_element counts too)")
            }
            guard let kind = FileMakerMapping.sources[element.source] else {
                throw fail(
                    "\(at).source: unknown source '\(element.source)' (known: \(FileMakerMapping.sources.keys.sorted().joined(separator: ", ")))"
                )
            }
            switch element.type {
            case 5: break
            case 9:
                guard kind == .date || kind == .timestamp else {
                    throw fail(
                        "\(at): a date element (type 9) needs a date or timestamp source, not '\(element.source)' (\(kind.rawValue))")
                }
            default:
                throw fail("\(at).type \(element.type) is not supported (5 text, 9 date)")
            }
        }
    }
}
